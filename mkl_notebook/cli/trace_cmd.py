"""``mkl trace --id RUN``: a run's trace as its journal holds it, without running or asking anything.

Like ``mkl run`` and ``mkl resume`` it shows the first and last steps of a long trace; ``--all``
prints every step (and the whole result).
"""

from __future__ import annotations

import argparse
import shlex

from ..app import status
from ..app.errors import UsageProblem
from ..durable import runs as durable
from ..durable.stores import DEFAULT_STORE, SQLiteStore
from ..render import views
from .common import emit_status


def add_parser(commands: argparse._SubParsersAction) -> None:
    traced = commands.add_parser("trace", help="print a run's trace from its journal (nothing runs)")
    traced.add_argument("--id", dest="run_id", required=True, metavar="RUN", help="the run")
    traced.add_argument("--store", metavar="PATH", help=f"the run store (default {DEFAULT_STORE})")
    all_flag(traced)
    traced.set_defaults(handler=trace_command)


def all_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--all",
        dest="full",
        action="store_true",
        help=f"print every step of a long trace and the whole result (else the first {views.FIRST_ROWS} and "
        f"last {views.LAST_ROWS} of more than {views.WHOLE_ROWS} steps)",
    )


def cli_cap(run_id: str, store: str | None, full: bool) -> views.Cap:
    """How the command line caps a run's trace and result, and says how to see them whole."""
    store_flag = f" --store {shlex.quote(store)}" if store else ""
    return views.Cap(
        full=full,
        trace=f"mkl trace --id {shlex.quote(run_id)}{store_flag} --all",
        result="the status line below",
    )


def trace_command(args: argparse.Namespace) -> int:
    store = SQLiteStore(args.store or DEFAULT_STORE)
    if not store.exists(args.run_id):
        raise UsageProblem(f"no run '{args.run_id}' in {store.location}")
    records = store.read(args.run_id)
    outcome = durable.show_prefix(args.run_id, records, len(records))
    if outcome is None:
        raise UsageProblem(f"run '{args.run_id}': its journal does not hold every answer its trace needs")
    result = outcome.result
    cap = cli_cap(args.run_id, args.store, args.full)
    print(views.trace_table_text(result.trace_with_open_call(), answers=views.traced_answers(result), cap=cap))
    print()
    print(views.result_summary_text(result, None, cap))
    emit_status(status.status_line(outcome))
    return 0
