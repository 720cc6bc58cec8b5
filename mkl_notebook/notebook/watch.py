"""A kernel's watch of its store: when another process answers a run this notebook shows (a terminal's
``mkl resume``, a colleague's kernel on the same store), the cell that shows it redraws with no click in the page.

A thread waits for the store to change. A store on a PostgreSQL server tells it (a ``NOTIFY`` with the run's id
when an advance ends, heard on a connection of the thread's own: :func:`~..app.watching.store_changes`); a SQLite
store is looked at every :data:`EVERY` seconds, cheaply (its file's size and time first, then only the records
past those the notebook shows). When a run the notebook follows went on past what it shows, the kernel is woken
on its own loop (never on the thread), where the run is read again and its views and forms catch up as they do
for any move. So is it when the deadline of a question a followed run waits on passes: on its loop the kernel
decides the question by the run's rule (unless another process did first) and the cell redraws.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any, Protocol

from ..app.deadlines import deadline_of, decide_shown
from ..app.watching import Changes, journal_past, store_changes, store_stamp
from ..app.workspace import Workspace

EVERY = 0.5  # seconds between looks at a SQLite store: a person sees the answer land within about this
_NONE = object()  # (no store seen yet)
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
        self._listened: Any = _NONE  # the store self._changes listens to (None when it tells nothing)
        self._changes: Changes | None = None
        self._deadlines: dict[str, tuple[int, float | None]] = {}  # by run: how far it was shown, and its deadline

    def start(self) -> None:
        """Start looking (once)."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._watch, name="mkl-store-watch", daemon=True)
            self._thread.start()

    def stop(self) -> None:
        """Look no more."""
        self._stop.set()

    def _watch(self) -> None:
        while not self._stop.is_set():
            try:
                self._turn()
            except Exception:  # a store closed or replaced meanwhile (%mkl config store=), a server gone: the next
                self._listen_to(_NONE)  # turn sees (listening again on a new connection, after a look at all)
                self._stop.wait(self._every)
        self._listen_to(_NONE)

    def _turn(self) -> None:
        """Wait for the store to change (told by its server, or a while between looks), and look."""
        changes = self._listen_to(self._notebook.workspace.store_opened())
        self.decide_due()
        if changes is None:
            if not self._stop.wait(self._every):
                self.look()
            return
        moved = changes.wait(self._every)  # (back every so often to see whether to stop, or the store changed)
        if moved is None:  # the first wait, or a connection made again: what moved unheard is looked for
            self.look(everything=True)
        elif moved:
            self.look(only=moved)

    def _listen_to(self, store: Any) -> Changes | None:
        """A listener to ``store``'s server (the one kept while the store is the same), None for a store that
        tells nothing (looked at again and again)."""
        if store is self._listened:
            return self._changes
        if self._changes is not None:
            self._changes.close()
        self._listened, self._changes = store, None
        if store is not None and store is not _NONE:
            self._changes = store_changes(store)
        return self._changes

    def look(self, *, only: set[str] | None = None, everything: bool = False) -> list[str]:
        """One look: the followed runs whose journals in the store went on past what the notebook shows (the
        kernel is woken to catch them up). ``only``: the runs the store's server said moved (the others are not
        read); ``everything``: every followed run is read, however the store's file looks."""
        followed = self._notebook.followed()
        if not followed:
            return []
        with self._notebook.workspace.reading() as store:  # (a kernel that has only read its store reads it so)
            return self._look(store, followed, only, everything) if store is not None else []

    def _look(self, store: Any, followed: dict[str, int], only: set[str] | None, everything: bool) -> list[str]:
        if only is not None:
            followed = {run_id: shown for run_id, shown in followed.items() if run_id in only}
        elif not everything:
            stamp = store_stamp(store)
            if stamp is not None and stamp == self._stamp:
                return []  # nothing written since the last look
            self._stamp = stamp
        moved = [run_id for run_id, shown in followed.items() if journal_past(store, run_id, shown)]
        if moved:
            self._wake(lambda: self._notebook.caught_up(moved))
        return moved

    def decide_due(self, now: float | None = None) -> list[str]:
        """The followed runs whose question's deadline has passed by ``now``: the kernel is woken to decide each by
        its rule, and the cells that show them redraw (each is woken for once per journal length shown)."""
        followed = self._notebook.followed()
        store = self._notebook.workspace.store_opened()
        if not followed or store is None:
            return []
        at = time.time() if now is None else now
        due = []
        for run_id, shown in followed.items():
            known = self._deadlines.get(run_id)
            if known is None or known[0] != shown:
                known = self._deadlines[run_id] = (shown, deadline_of(store, run_id))
            if known[1] is not None and at >= known[1]:
                due.append(run_id)
                self._deadlines[run_id] = (shown, None)  # (woken once; what it shows next says again)
        if due:
            self._wake(lambda: self._decide(due))
        return due

    def _decide(self, run_ids: list[str]) -> None:
        """On the kernel's loop: decide the due questions, and catch up what shows the runs decided."""
        decided = decide_shown(self._notebook.workspace, run_ids)
        if decided:
            self._notebook.caught_up(decided)
