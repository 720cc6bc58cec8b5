"""``mkl tick [DIR…] [--store PATH…]``: decide every question past its deadline by its run's rule (for cron).

One line per decision (``--json``: a JSON list of them) and one line on stderr for each place or run not decided;
a question a person or another tick got to first is left as it is (see :mod:`app.deadlines`).
"""

from __future__ import annotations

import argparse
import json
import sys

from ..render.common import printable
from .common import say


def tick_main(args: argparse.Namespace) -> int:
    from ..app.deadlines import tick

    ticked = tick(args.folders, args.stores or ())
    if args.json:
        print(json.dumps([item._asdict() for item in ticked.decided], ensure_ascii=False))
    else:
        for item in ticked.decided:
            say(item.line())
        if not ticked.decided:
            say("no question is past its deadline")
    for problem in ticked.problems:
        print(f"not decided: {printable(problem)}", file=sys.stderr)
    return 0
