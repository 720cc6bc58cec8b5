"""``mkl trace --id RUN``: a run's trace as its journal holds it, without running or asking anything.

Like ``mkl run`` and ``mkl resume`` it shows the first and last steps of a long trace; ``--all``
prints every step (and the whole result).
"""

from __future__ import annotations

import argparse

from ..app.settings import DEFAULT_STORE
from .common import Commands, all_flag, cli_cap, emit_status, say, workspace


def add_trace_parser(commands: Commands) -> None:
    traced = commands.add_parser("trace", help="print a run's trace from its journal (nothing runs)")
    traced.add_argument("--id", dest="run_id", required=True, metavar="RUN", help="the run")
    traced.add_argument("--store", metavar="PATH", help=f"the run store (default {DEFAULT_STORE})")
    all_flag(traced)
    traced.set_defaults(handler=trace_main)


def trace_main(args: argparse.Namespace) -> int:
    from ..app import status
    from ..render import views

    with workspace(args) as ws:
        outcome = ws.read(args.run_id)  # nothing is called or recorded
    result = outcome.result
    steps, answers = status.traced(outcome)
    cap = cli_cap(args.run_id, args.store, args.full)
    say(views.trace_table_text(steps, answers=answers, cap=cap))
    print()
    say(views.result_summary_text(result, None, cap))
    emit_status(status.status_line(outcome))
    return 0
