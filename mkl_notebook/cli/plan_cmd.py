"""``mkl plan``: what resuming or re-running a run would do with the machine file as it is now."""

from __future__ import annotations

import argparse
from pathlib import Path

from ..app.settings import DEFAULT_STORE
from .common import Commands, emit_status, say, workspace


def add_plan_parser(commands: Commands) -> None:
    planned = commands.add_parser("plan", help="what re-running a run with the machine as it is now would do")
    planned.add_argument("file", help="the .mkl machine file, as it is now")
    planned.add_argument("--id", dest="run_id", required=True, metavar="RUN", help="the run")
    planned.add_argument("--store", metavar="PATH", help=f"the run store (default {DEFAULT_STORE})")
    planned.set_defaults(handler=plan_main)


def plan_main(args: argparse.Namespace) -> int:
    from ..render.plan_views import plan_lines

    with workspace(args) as ws:
        ws.shelf.load(Path(args.file))
        found = ws.plan(args.run_id)
    say("\n".join(plan_lines(found.as_dict())))
    emit_status(found.as_dict())
    return 0
