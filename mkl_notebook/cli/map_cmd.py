"""``mkl map``: one machine over the rows of a file, a durable run per row."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..app.settings import command_api_base, printed_store
from .common import (
    STATUS_EXIT,
    emit_status,
    host_values,
    interrupted,
    machine_of,
    say,
    workspace,
)
from .parser import EXIT_FAILED

if TYPE_CHECKING:
    from ..app import batch
    from ..app.notifying import Report

BATCH_EXIT = {**STATUS_EXIT, "error": EXIT_FAILED}


def map_main(args: argparse.Namespace) -> int:
    watched = sys.stderr.isatty() and not args.quiet  # progress where a person watches; never in a pipe

    shown = [0]

    def progress(done: int, total: int) -> None:
        if watched and done != shown[0]:
            shown[0] = done
            print(f"\r{done}/{total} rows", end="", file=sys.stderr, flush=True)

    try:
        tally, report = _map(args, progress)
    except KeyboardInterrupt:
        said = "every row's answers journaled so far stay; the same mkl map command again (without --fresh) goes on"
        return interrupted(said)
    if watched:
        print(file=sys.stderr)
    summaries = tally.rows()
    listed = tally.left_out == 0
    if not args.quiet:
        from ..render.batch_views import batch_continue_text, batch_summary_text

        say(batch_summary_text(summaries, tally.counts, tally.spent(), printed_store(args.store), listed=listed))
        waiting = tally.waiting_rows()
        if waiting:
            say(
                "\n"
                + batch_continue_text(
                    waiting, printed_store(args.store), command_api_base(args.api_base), tally.waiting
                )
            )
    status: dict[str, Any] = {"status": tally.status, "counts": tally.counts, **tally.spent(), "rows": summaries}
    if report is not None and (report.sent or report.failed):
        status["notified"] = len(report.sent)
        if report.failed:
            status["notifications_failed"] = len(report.failed)
            say(f"{len(report.failed)} notifications failed (`mkl runs` says why; `mkl notify` tries again)")
    if not listed:
        status["rows_left_out"] = tally.left_out  # done rows of a large batch: each is in the store
    emit_status(status)
    return BATCH_EXIT[tally.status]


def _map(args: argparse.Namespace, progress: Callable[[int, int], None]) -> tuple[batch.Tally, Report | None]:
    """Every row's run, as the flags say, each counted into the tally and dropped; then the notifications of
    the questions the rows left waiting, sent (each row's suspension is durable by then)."""
    from ..app import batch
    from ..app.notifying import send_from
    from ..app.requests import MapRequest, from_flags

    with workspace(args) as ws:
        machine = machine_of(ws, args)
        request = from_flags(MapRequest, args, id=args.batch, input=host_values(args), progress=progress)
        running = ws.map_rows(machine.name, args.over, request)
        tally = batch.Tally(running.total)
        for row in running:  # each row is counted in and dropped: a batch of any size holds the rows running
            tally.add(row)
        report = send_from(ws) if tally.counts.get("suspended") else None
    return tally, report
