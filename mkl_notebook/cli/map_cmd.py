"""``mkl map``: one machine over the rows of a file, a durable run per row."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..app.settings import DEFAULT_CONCURRENCY, DEFAULT_STORE, command_api_base
from .common import (
    EXIT_FAILED,
    STATUS_EXIT,
    Commands,
    emit_status,
    interrupted,
    machine_of,
    run_settings,
    say,
    workspace,
)
from .run_cmd import executor_flags

if TYPE_CHECKING:
    from ..app import batch

BATCH_EXIT = {**STATUS_EXIT, "error": EXIT_FAILED}


def add_map_parser(commands: Commands) -> None:
    mapped = commands.add_parser("map", help="run a machine once per row of a JSONL, JSON or CSV file")
    mapped.add_argument("file", help="a .mkl machine file")
    mapped.add_argument("--over", required=True, metavar="ROWS", help="the rows: a .jsonl, .json or .csv file")
    mapped.add_argument("--key", metavar="COLUMN", help="the column naming each row's run (default: its content)")
    mapped.add_argument("--id", dest="batch", metavar="BATCH", help="the batch's name, first in each run id")
    mapped.add_argument("--concurrency", type=int, default=DEFAULT_CONCURRENCY, metavar="N", help="rows run at once")
    mapped.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="a value every row gets")
    mapped.add_argument("--input", metavar="JSON", help="a JSON object of values every row gets (or @file.json)")
    mapped.add_argument("--store", metavar="PATH", help=f"the run store (default {DEFAULT_STORE})")
    mapped.add_argument("--script", metavar="FILE", help="scripted answers (each row's run reads them from the top)")
    mapped.add_argument("--model", metavar="MODEL", help="litellm model for every tier")
    mapped.add_argument("--api-base", metavar="URL", help="base URL of an OpenAI-compatible or local server")
    mapped.add_argument("--tools", metavar="FILE.py", help="a Python file of @mkl_notebook.tool / .hook functions")
    mapped.add_argument("--max-steps", metavar="N", help="step budget of each row's run")
    mapped.add_argument("--max-tokens", metavar="N", help="token budget of each row's run")
    mapped.add_argument("--max-cost", metavar="USD", help="cost limit of each row's run, in US dollars")
    mapped.add_argument("--suspend", action="store_true", help="suspend instead of halting when a budget runs out")
    mapped.add_argument("--hitl", action="store_true", help="every escalate gate suspends for a person")
    mapped.add_argument("--fresh", action="store_true", help="start every row's run over")
    executor_flags(mapped)
    mapped.add_argument("--quiet", action="store_true", help="print only the final JSON status line")
    mapped.set_defaults(handler=map_main)


def map_main(args: argparse.Namespace) -> int:
    watched = sys.stderr.isatty() and not args.quiet  # progress where a person watches; never in a pipe

    shown = [0]

    def progress(done: int, total: int) -> None:
        if watched and done != shown[0]:
            shown[0] = done
            print(f"\r{done}/{total} rows", end="", file=sys.stderr, flush=True)

    try:
        tally = _map(args, progress)
    except KeyboardInterrupt:
        said = "every row's answers journaled so far stay; the same mkl map command again (without --fresh) goes on"
        return interrupted(said)
    if watched:
        print(file=sys.stderr)
    summaries = tally.rows()
    listed = tally.left_out == 0
    if not args.quiet:
        from ..render.batch_views import batch_continue_text, batch_summary_text

        say(batch_summary_text(summaries, tally.counts, tally.spent(), args.store, listed=listed))
        waiting = tally.waiting_rows()
        if waiting:
            say("\n" + batch_continue_text(waiting, args.store, command_api_base(args.api_base), tally.waiting))
    status: dict[str, Any] = {"status": tally.status, "counts": tally.counts, **tally.spent(), "rows": summaries}
    if not listed:
        status["rows_left_out"] = tally.left_out  # done rows of a large batch: each is in the store
    emit_status(status)
    return BATCH_EXIT[tally.status]


def _map(args: argparse.Namespace, progress: Callable[[int, int], None]) -> batch.Tally:
    """Every row's run, as the flags say, each counted into the tally and dropped."""
    from ..app import batch

    with workspace(args) as ws:
        machine = machine_of(ws, args)
        running = ws.map_rows(
            machine.name,
            args.over,
            id=args.batch,
            key=args.key,
            concurrency=args.concurrency,
            progress=progress,
            **run_settings(args),
        )
        tally = batch.Tally(running.total)
        for row in running:  # each row is counted in and dropped: a batch of any size holds the rows running
            tally.add(row)
    return tally
