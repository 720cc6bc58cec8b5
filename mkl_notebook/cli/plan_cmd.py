"""``mkl plan``: what resuming or re-running a run would do with the machine file as it is now."""

from __future__ import annotations

import argparse
from pathlib import Path

from ..durable import runs as durable
from ..durable.stores import DEFAULT_STORE, SQLiteStore
from ..lang.loader import load_file
from ..lang.siblings import sibling_registry
from ..render.plan_views import plan_lines
from .common import emit_status


def add_parser(commands: argparse._SubParsersAction) -> None:
    planned = commands.add_parser("plan", help="what re-running a run with the machine as it is now would do")
    planned.add_argument("file", help="the .mkl machine file, as it is now")
    planned.add_argument("--id", dest="run_id", required=True, metavar="RUN", help="the run")
    planned.add_argument("--store", metavar="PATH", help=f"the run store (default {DEFAULT_STORE})")
    planned.set_defaults(handler=plan_command)


def plan_command(args: argparse.Namespace) -> int:
    path = Path(args.file)
    machine = load_file(path)
    found = durable.plan_run(SQLiteStore(args.store or DEFAULT_STORE), args.run_id, sibling_registry(path, machine))
    print("\n".join(plan_lines(found.as_dict())))
    emit_status(found.as_dict())
    return 0
