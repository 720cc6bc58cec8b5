"""Deadlines and reminders fired by the Jupyter server: every ``$MKL_TICK_SECONDS`` (default 30) it decides the
questions past their deadline under its folder and in the configured store, as ``mkl tick`` does, and sends the
notifications and reminders due there, as ``mkl notify`` does, in a thread of its own.

Whichever decides first (this server, a kernel holding the run, a ``mkl tick`` from cron) journals the one policy
decision under the run's lease; the others find nothing due.
"""

from __future__ import annotations

import asyncio
import os
import time
from typing import Any

from ..app.errors import without_secrets
from ..app.served import notify_served, tick_served

TICK_ENV = "MKL_TICK_SECONDS"
DEFAULT_TICK_SECONDS = 30.0
LOOK_SHARE = 10  # a look waits at least this many times what the last one took
_LOOKING: set[asyncio.Task[None]] = set()


def tick_seconds() -> float:
    """How often the server looks for questions past their deadline (``$MKL_TICK_SECONDS``; 0: never)."""
    given = os.environ.get(TICK_ENV, "").strip()
    try:
        seconds = float(given) if given else DEFAULT_TICK_SECONDS
    except ValueError:
        return DEFAULT_TICK_SECONDS
    return max(seconds, 0.0)


def start_ticking(root: str, log: Any) -> asyncio.Task[None] | None:
    """Decide due questions and send due notifications under ``root``, telling ``log`` of each, one look at a
    time: the next look comes :func:`tick_seconds` after the last, or ten times what the last took if longer
    (a folder of many notebooks takes seconds to read: the server then spends a tenth of a core on it at most)."""
    seconds = tick_seconds()
    if seconds <= 0:
        return None

    async def looking() -> None:
        while True:
            await asyncio.sleep(seconds)
            started = time.monotonic()
            await _look(root, log)
            await asyncio.sleep(max(0.0, LOOK_SHARE * (time.monotonic() - started) - seconds))

    from tornado.ioloop import IOLoop

    task = IOLoop.current().asyncio_loop.create_task(looking())  # type: ignore[attr-defined]
    _LOOKING.add(task)  # (held: the event loop keeps only a weak reference to a task)
    return task


async def _look(root: str, log: Any) -> None:
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
