"""``mkl inbox [DIR…] [--store URL…]``: every question waiting for a person in reach, one row each, oldest first.

A table on a terminal (every text from a file shown, never acted on), then the commands that answer each
question; ``--json``: one JSON list of the rows, each with its commands (ASCII only, so that no text of a file
reaches the terminal as anything but itself). Reading only: nothing is made or written (see :mod:`app.inbox`).
"""

from __future__ import annotations

import argparse
import json
import sys

from ..app.inbox import inbox
from ..app.requests import InboxRequest, from_flags
from ..app.settings import default_store
from ..render.common import printable
from ..render.inbox_views import inbox_text
from .common import say


def inbox_main(args: argparse.Namespace) -> int:
    request = from_flags(
        InboxRequest, args, folders=tuple(args.folders or (".",)), configured=str(default_store()), via="cli"
    )
    found = inbox(request)
    if args.json:
        print(json.dumps(found.rows, ensure_ascii=True, default=str))
        for problem in found.problems:
            print(f"not read: {printable(problem)}", file=sys.stderr)
    else:
        say(inbox_text(found.rows, found.problems, full=args.full))
    return 0
