"""``mkl audit RUN | NOTEBOOK | DIR | --store PATH``: every answer a person gave, and what stands behind it.

A text table (``--json``: a list of objects; ``--csv``: a header row and one row per answer), then the summary
line (answers, pending, median time to decide; on stderr with ``--json`` and ``--csv``, so stdout stays the
tool's). Reading only: nothing is made or written (see :mod:`app.audit`).
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
from os.path import isdir
from typing import Any

from ..app.errors import UsageProblem
from ..render.common import printable
from .common import say

FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")  # what makes a spreadsheet read a cell as a formula (OWASP)


def _cell(value: Any) -> str:
    """A CSV cell: text as it is, nothing as empty, anything else as JSON. A cell a spreadsheet would read as a
    formula (a question, reply, note or name is anyone's text: ``=HYPERLINK(…)``) starts with ``'`` instead, as
    OWASP advises against CSV injection, so it opens as the text it is; ``--json`` gives every value unchanged."""
    if value is None:
        return ""
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return f"'{text}" if text.startswith(FORMULA_STARTS) else text


def audit_main(args: argparse.Namespace) -> int:
    if args.store is not None and args.target is not None and (args.target.endswith(".ipynb") or isdir(args.target)):
        raise UsageProblem(f"--store names the store a run is read from; give {args.target} without it")
    from ..app.audit import FIELDS, audit_target
    from ..render.audit_views import audit_table_text, summary_line

    found = audit_target(args.target, store=args.store)
    median = found.median_seconds()
    if args.json or args.csv:
        if args.json:
            print(json.dumps(found.answers, ensure_ascii=False, default=str))
        else:
            writer = csv.writer(sys.stdout, lineterminator="\n")
            writer.writerow(FIELDS)
            writer.writerows([_cell(row[name]) for name in FIELDS] for row in found.answers)
        for problem in found.problems:
            print(f"not read: {printable(problem)}", file=sys.stderr)
        print(summary_line(found.answers, found.pending, median), file=sys.stderr)
        return 0
    say(audit_table_text(found.answers, found.pending, found.problems, median))
    return 0
