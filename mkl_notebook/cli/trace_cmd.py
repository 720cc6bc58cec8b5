"""``mkl trace --id RUN``: a run's trace as its journal holds it, without running or asking anything.

Like ``mkl run`` and ``mkl resume`` it shows the first and last steps of a long trace; ``--all``
prints every step (and the whole result).
"""

from __future__ import annotations

import argparse

from ..app.settings import printed_store
from .common import cli_cap, emit_status, say, workspace


def trace_main(args: argparse.Namespace) -> int:
    from ..app import status
    from ..render import views

    with workspace(args) as ws:
        outcome = ws.read(args.run_id)  # nothing is called or recorded
    result = outcome.result
    steps, answers = status.traced(outcome)
    cap = cli_cap(args.run_id, printed_store(args.store), args.full)
    say(views.trace_table_text(steps, answers=answers, cap=cap))
    print()
    say(views.result_summary_text(result, None, cap))
    emit_status(status.status_line(outcome))
    return 0
