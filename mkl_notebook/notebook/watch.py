"""A kernel's watch of its store: when another process answers a run this notebook shows (a terminal's
``mkl resume``, a colleague's kernel on the same store), the cell that shows it redraws with no click in the page.

A thread looks at the store every :data:`EVERY` seconds, cheaply (the store file's size and time first, then only
the records past those the notebook shows); when a run the notebook follows went on past what it shows, the kernel
is woken on its own loop (never on the thread), where the run is read again and its views and forms catch up as
they do for any move.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, Protocol

from ..app.watching import journal_past, store_stamp
from ..app.workspace import Workspace

EVERY = 0.5  # seconds between looks: a person sees the answer land within about this
Wake = Callable[[Callable[[], None]], None]  # run a function on the kernel's own loop (tornado's add_callback)


class Watched(Protocol):
    """What the watch needs of the notebook: the workspace, the runs it follows and how far each is shown."""

    @property
    def workspace(self) -> Workspace: ...

    def followed(self) -> dict[str, int]: ...

    def caught_up(self, run_ids: list[str]) -> None: ...


class StoreWatch:
    """Looks for runs the notebook follows that moved in the store, and wakes the kernel to catch them up."""

    def __init__(self, notebook: Watched, wake: Wake, every: float = EVERY) -> None:
        self._notebook = notebook
        self._wake = wake
        self._every = every
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._stamp: Any = None

    def start(self) -> None:
        """Start looking (once)."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._watch, name="mkl-store-watch", daemon=True)
            self._thread.start()

    def stop(self) -> None:
        """Look no more."""
        self._stop.set()

    def _watch(self) -> None:
        while not self._stop.wait(self._every):
            try:
                self.look()
            except Exception:  # a store closed or replaced meanwhile (%mkl config store=): the next look sees
                continue

    def look(self) -> list[str]:
        """One look: the followed runs whose journals in the store went on past what the notebook shows (the
        kernel is woken to catch them up)."""
        followed = self._notebook.followed()
        store = self._notebook.workspace.store_opened()
        if not followed or store is None:
            return []
        stamp = store_stamp(store)
        if stamp is not None and stamp == self._stamp:
            return []  # nothing written since the last look
        self._stamp = stamp
        moved = [run_id for run_id, shown in followed.items() if journal_past(store, run_id, shown)]
        if moved:
            self._wake(lambda: self._notebook.caught_up(moved))
        return moved
