"""``mkl audit RUN | NOTEBOOK | DIR | --store PATH``: every answer a person gave, and what stands behind it.

A text table (``--json``: a list of objects; ``--csv``: a header row and one row per answer), then the summary
line (answers, pending, median time to decide; on stderr with ``--json`` and ``--csv``, so stdout stays the
tool's). Reading only: nothing is made or written (see :mod:`app.audit`). Each answer is printed as its run is
read, so memory stays flat however many answers there are.
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
from collections.abc import Iterable
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
    from ..app.audit import stream_target
    from ..render.audit_views import TextTable, summary_line

    table = TextTable()
    with stream_target(args.target, store=args.store) as found:  # each answer printed as its run is read
        if args.json:
            _json_list(found.answers())
        elif args.csv:
            _csv_rows(found.answers())
        else:
            for row in found.answers():
                for line in table.add(row):
                    say(line)
        summary = summary_line(found.count, found.marked, len(found.pending), found.median_seconds())
    if args.json or args.csv:
        for problem in found.problems:
            print(f"not read: {printable(problem)}", file=sys.stderr)
        print(summary, file=sys.stderr)
    else:
        for line in table.end(found.pending, found.problems, summary):
            say(line)
    return 0


def _json_list(answers: Iterable[dict[str, Any]]) -> None:
    """The answers as one JSON list, written an object at a time: the text ``json.dumps`` makes of the list."""
    out = sys.stdout
    out.write("[")
    for n, row in enumerate(answers):
        out.write((", " if n else "") + json.dumps(row, ensure_ascii=False, default=str))
    out.write("]\n")


def _csv_rows(answers: Iterable[dict[str, Any]]) -> None:
    from ..app.audit import FIELDS

    writer = csv.writer(sys.stdout, lineterminator="\n")
    writer.writerow(FIELDS)
    for row in answers:
        writer.writerow([_cell(row[name]) for name in FIELDS])
