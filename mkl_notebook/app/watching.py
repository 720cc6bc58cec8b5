"""Whether runs moved in their store while a kernel was not looking (another process answered them: a terminal's
``mkl resume``, a colleague's kernel on the same store): what a waiting notebook watches so that its cells
redraw with no click in its page."""

from __future__ import annotations

import os
from typing import Any, Protocol

from ..durable.stores import RunStore


def store_stamp(store: RunStore) -> tuple[Any, ...] | None:
    """A cheap sign that a store's file changed (its size and time, and its write-ahead log's): equal stamps mean
    nothing was written since; None for a store that has no such file (every look then asks the store)."""
    path = getattr(store, "path", None)
    if path is None:
        return None
    stamp: list[Any] = []
    for name in (str(path), f"{path}-wal"):
        try:
            found = os.stat(name)
        except OSError:
            stamp.append(None)
            continue
        stamp.append((found.st_size, found.st_mtime_ns))
    return tuple(stamp)


def journal_past(store: RunStore, run_id: str, length: int) -> bool:
    """Whether the store's journal of ``run_id`` holds more than ``length`` records (what a view shows); never
    while this process is advancing the run (what it does there, it shows itself when the advance ends)."""
    leased_here = getattr(store, "leased_here", None)
    if callable(leased_here) and leased_here(run_id):
        return False
    return bool(store.read(run_id, since=length)) if store.exists(run_id) else False


class Changes(Protocol):
    """What a store's server says moved (:class:`~..durable.server_changes.RunChanges`)."""

    def wait(self, timeout: float) -> set[str] | None: ...

    def close(self) -> None: ...


def store_changes(store: RunStore) -> Changes | None:
    """A listener to the runs other processes move in ``store``, on a connection of its own, for a store whose
    server tells (PostgreSQL's NOTIFY); None for a store that must be looked at again and again (SQLite's file:
    :func:`store_stamp`), or holds no runs of other processes (memory)."""
    changes = getattr(store, "changes", None)
    return changes() if callable(changes) else None
