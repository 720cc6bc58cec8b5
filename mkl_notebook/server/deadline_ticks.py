"""Deadlines and reminders fired by the Jupyter server: every ``$MKL_TICK_SECONDS`` (default 30) it decides the
questions past their deadline under its folder and in the configured store, as ``mkl tick`` does, and sends the
notifications and reminders due there, as ``mkl notify`` does, in a thread of its own.

Whichever decides first (this server, a kernel holding the run, a ``mkl tick`` from cron) journals the one policy
decision under the run's lease; the others find nothing due.
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

from tornado.ioloop import PeriodicCallback

from ..app.deadlines import notify_served, tick_served
from ..app.errors import without_secrets

TICK_ENV = "MKL_TICK_SECONDS"
DEFAULT_TICK_SECONDS = 30.0


def tick_seconds() -> float:
    """How often the server looks for questions past their deadline (``$MKL_TICK_SECONDS``; 0: never)."""
    given = os.environ.get(TICK_ENV, "").strip()
    try:
        seconds = float(given) if given else DEFAULT_TICK_SECONDS
    except ValueError:
        return DEFAULT_TICK_SECONDS
    return max(seconds, 0.0)


def start_ticking(root: str, log: Any) -> PeriodicCallback | None:
    """Decide due questions under ``root`` every :func:`tick_seconds`, telling ``log`` of each decision and of
    what could not be decided; one look at a time."""
    seconds = tick_seconds()
    if seconds <= 0:
        return None
    busy = asyncio.Lock()

    async def look() -> None:
        if busy.locked():
            return  # the last look is still going on (a folder of many notebooks)
        async with busy:
            try:
                ticked = await asyncio.to_thread(tick_served, root)
                notified = await asyncio.to_thread(notify_served, root)
            except Exception as exc:  # a look that fails must not stop the next: the server goes on
                said = without_secrets(str(exc)).splitlines() or [type(exc).__name__]
                log.warning("mkl: deadlines not looked at: %s", said[0])
                return
        for decided in ticked.decided:
            log.info("mkl: %s", decided.line())
        for problem in ticked.problems:
            log.warning("mkl: not decided: %s", problem)
        for run_id, channel in notified.sent:
            log.info("mkl: run %s: notified %s", run_id, channel)
        for run_id, channel, why in notified.failed:
            log.warning("mkl: run %s: notification to %s failed: %s", run_id, channel, why)

    ticking = PeriodicCallback(look, seconds * 1000)
    ticking.start()
    return ticking
