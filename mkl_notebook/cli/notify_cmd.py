"""``mkl notify [DIR…] [--store URL…]``: send the notifications of waiting questions that are still due; with
``--set URL``, ``--unset URL`` or ``--list``, keep, drop or list a store's own channels instead.

The process that journals a question sends its notifications at once; this command catches up on what that
one could not (it was killed, a receiver was down): intents without an outcome are sent again with the same
idempotency key, failed sends are retried, and what was sent is never sent again (see app.notifying).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from ..app.errors import UsageProblem
from ..app.settings import Settings, default_store, printed_store
from ..render.common import printable
from .common import emit_status
from .parser import EXIT_FAILED, EXIT_OK


def notify_main(args: argparse.Namespace) -> int:
    from ..app.channels import parse_channels
    from ..app.notifying import send_from, store_in_reach, stores_under
    from ..app.settings import store_location
    from ..app.workspace import Workspace

    if args.set or args.unset or args.list:
        return _store_channels(args)
    channels = parse_channels(args.notify, "--notify")
    locations: list[Path | str] = [store_location(given) for given in args.store or ()]
    refused: list[str] = []
    for folder in args.folders:
        if not Path(folder).is_dir():
            raise UsageProblem(f"{folder}: not a folder (name stores with --store)")
        found, problems = stores_under(Path(folder))
        locations += found
        refused += problems
    if not locations:
        locations = [default_store()]
    done: list[dict[str, Any]] = []
    for location in dict.fromkeys(locations):
        shown = printed_store(str(location)) or str(location)
        if not store_in_reach(location):  # (nothing waits there, and sending makes no store)
            print(printable(f"{shown}: no run store"))
            continue
        with Workspace(Settings(store=location)) as ws:
            report = send_from(ws, channels)
        for run_id, channel in report.sent:
            print(printable(f"{shown}: run {run_id}: notified {channel}"))
        for run_id, channel, why in report.failed:
            print(printable(f"{shown}: run {run_id}: notification failed: {channel}: {why}"))
        for run_id, channel, why in report.skipped:
            print(printable(f"{shown}: run {run_id}: not sent{f' to {channel}' if channel else ''}: {why}"))
        done.append(
            {
                "store": shown,
                "sent": [{"run": run, "channel": channel} for run, channel in report.sent],
                "failed": [{"run": run, "channel": channel, "reason": why} for run, channel, why in report.failed],
                "skipped": [{"run": run, "channel": channel, "reason": why} for run, channel, why in report.skipped],
            }
        )
        if not (report.sent or report.failed or report.skipped):
            print(printable(f"{shown}: nothing due"))
    for problem in refused:
        print(f"not read: {printable(problem)}")
    emit_status({"notified": done, "not_read": refused})
    failed = any(item["failed"] for item in done)
    return EXIT_FAILED if failed or refused else EXIT_OK


def _store_channels(args: argparse.Namespace) -> int:
    """``mkl notify [--store S] --set URL | --unset URL | --list``: the store's channels, changed, then listed
    (redacted, with the digest ``--unset`` takes), one a line, then a JSON status line."""
    from ..app.channel_places import kept_in_store
    from ..app.settings import store_location

    if args.folders or len(args.store or ()) > 1 or args.notify:
        raise UsageProblem("--set, --unset and --list name one store (--store, else the default) and nothing else")
    location = store_location(args.store[0]) if args.store else default_store()
    shown = printed_store(str(location)) or str(location)
    channels = kept_in_store(location, args.set or (), args.unset or ())
    for channel in channels:
        print(printable(f"{shown}: {channel.digest} {channel.redacted}"))
    if not channels:
        print(printable(f"{shown}: no channels"))
    listed = [{"digest": channel.digest, "channel": channel.redacted} for channel in channels]
    emit_status({"store": shown, "channels": listed})
    return EXIT_OK
