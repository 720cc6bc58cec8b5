"""The kernel's workspace: a :class:`~mkl_notebook.app.workspace.Workspace` that knows notebook cells.

What it adds to the workspace is what only a notebook has: the cell a request comes from and how far its
execution got in each run (so Restart & Run All shows every run as each cell left it), the notebook's own
copies of its runs (its file, and its metadata through the ``mkl-notebook`` extension), and the forms and views
that follow a run and catch up when it moves. Every rule it follows is the workspace's; it never imports
widgets or litellm, so it is as usable from a plain script as from a notebook.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..app.checkpoints import (
    Copy,
    cell_order,
    cell_running,
    checked_copy,
    checkpoint_of,
    notebook_copy,
    notebook_run_ids,
    notebooks_running,
)
from ..app.handle import Run as WorkspaceRun
from ..app.handle import pandas_for
from ..app.settings import NOTEBOOK_SETTINGS, Settings
from ..app.terms import Oracle, Outcome, Place
from ..app.workspace import Workspace
from .metadata_link import MetadataLink

__all__ = [
    "NOTEBOOK_SETTINGS",
    "NotebookRun",
    "NotebookSession",
    "Run",
    "Session",
    "Settings",
    "current_session",
    "pandas_for",
]


class NotebookRun(WorkspaceRun):
    """A handle on one durable run in a notebook: shown as its view when it is a cell's value."""

    def _ipython_display_(self) -> None:
        """Show the run's view, unless the magic that returned this run drew it live in this very cell
        (``%mkl run …`` at the end of a cell shows one view, not two)."""
        from IPython import get_ipython
        from IPython.display import display

        shell = get_ipython()
        if shell is not None and self.drawn_in is not None and shell.execution_count == self.drawn_in:
            return
        display(self._repr_mimebundle_(), raw=True)


class NotebookSession(Workspace):
    """Everything one kernel knows about machines and runs, and the notebook it runs."""

    def __init__(self, settings: Settings | None = None, **options: Any) -> None:
        super().__init__(settings, **options)
        self.user_ns: dict[str, Any] = {}
        # The notebook cell executing now and an id of this execution of it (None outside a notebook cell).
        self.current_cell: Callable[[], tuple[str, str] | None] = lambda: None
        self.link = MetadataLink()  # to the notebook's metadata, through the extension
        self._execution: str | None = None
        self._reached: dict[str, int] = {}  # run id -> journal position this execution reached
        # Per run: what shows it (forms, views), told whenever the run moves; each says when it is done following.
        self._followers: dict[str, list[Callable[[NotebookRun], bool]]] = {}
        self._followers_lock = threading.Lock()
        self._found_notebook: Path | None = None  # the notebook this kernel runs, found by its cells' sources
        self._cell_position = -1  # of the last cell found by its source: the next one executing is below it
        self._cell_found: tuple[str | None, str | None] = (None, None)  # execution -> the cell found for it

    # -- where requests come from: notebook cells ------------------------------------------

    def place(self, run_id: str) -> Place | None:
        """The cell a request made now comes from, and how far in the run's journal its execution got."""
        current = self.current_cell()
        if current is None:
            return None
        cell, execution = current
        if execution != self._execution:
            self._execution, self._reached = execution, {}
        return Place(cell, self._reached.get(run_id, 0))

    def reached(self, run_id: str, outcome: Outcome) -> None:
        """This cell's execution has shown run ``run_id`` up to where ``outcome`` stands."""
        if self.current_cell() is not None:
            self._reached[run_id] = len(outcome.records)

    def notebook_path(self, explicit: str | None = None) -> Path | None:
        """The notebook file this kernel runs, as Jupyter or VS Code tells it (or ``explicit``), if it tells."""
        candidates = [
            explicit,
            self.user_ns.get("__session__"),
            self.user_ns.get("__vsc_ipynb_file__"),
            os.environ.get("JPY_SESSION_NAME"),
        ]
        for candidate in candidates:
            if isinstance(candidate, str) and candidate.endswith(".ipynb"):
                path = Path(candidate).expanduser()
                if path.is_file():
                    return path
        found = self._found_notebook
        return found if found is not None and found.is_file() else None

    def cell_for(self, code: str, execution: str) -> str | None:
        """The id of the notebook cell executing ``code`` when the client does not name it (nbclient, papermill,
        nbconvert send no cell id): found by its source in the notebook this kernel runs, which is itself found,
        when no client says which it is, as the one in the kernel's folder holding that source (the oldest of
        several: papermill's input, not the output it is writing)."""
        if self._cell_found[0] == execution:
            return self._cell_found[1]
        path = self.notebook_path()
        if path is None:
            running = notebooks_running(code, Path.cwd())
            if not running:
                return None
            path = self._found_notebook = running[0].resolve()
        hit = cell_running(code, path, self._cell_position)
        if hit is not None:
            self._cell_position = hit[0]
        self._cell_found = (execution, hit[1] if hit is not None else None)
        return self._cell_found[1]

    def _cells_from_here(self) -> list[str]:
        """The executing cell and every cell below it in the saved notebook (just it, when the file is unknown)."""
        current = self.current_cell()
        if current is None:
            return []
        cell = current[0]
        order = cell_order(self.notebook_path())
        return order[order.index(cell) :] if cell in order else [cell]

    def show_found(self, handle: WorkspaceRun) -> bool:
        """Show a run found by id as the cells above the executing one left it, when they asked for it."""
        shown = self.as_cells_left(handle.id, self._cells_from_here())
        if shown is None:
            return False
        handle.showing(shown)
        return True

    def answered_here(self) -> list[WorkspaceRun]:
        """The runs whose questions the executing cell's forms answered, each as those forms left it."""
        current = self.current_cell()
        if current is None:
            return []
        shown = []
        for outcome in self.answered_in(current[0]):
            handle = self.runs.setdefault(outcome.run_id, self.new_handle(outcome.run_id, "", self.oracle()))
            shown.append(handle.showing(outcome))
        return shown

    # -- what shows a run ---------------------------------------------------------------------

    def follow(self, run_id: str, follower: Callable[[NotebookRun], bool]) -> None:
        """Tell ``follower(run)`` of every change of run ``run_id`` until it returns True."""
        with self._followers_lock:
            self._followers.setdefault(run_id, []).append(follower)

    def moved(self, handle: WorkspaceRun) -> None:
        """Run ``handle`` changed (by any path): every form and view that shows it catches up."""
        if not isinstance(handle, NotebookRun):
            return
        with self._followers_lock:
            followers = list(self._followers.get(handle.id, ()))
        done = [follower for follower in followers if follower(handle)]
        with self._followers_lock:
            self._followers[handle.id] = [f for f in self._followers.get(handle.id, ()) if f not in done]

    def output_bundle(self, handle: WorkspaceRun) -> dict[str, Any]:
        """The run's view; as it stands, its checkpoint goes to the notebook's metadata too."""
        assert handle.outcome is not None
        bundle = super().output_bundle(handle)
        return self.link.carry(handle.id, bundle, as_it_stands=handle.outcome.latest is None)

    def new_handle(self, run_id: str, machine_name: str, oracle: Oracle) -> NotebookRun:
        return NotebookRun(self, run_id, machine_name, oracle)

    # -- the notebook's own copies of its runs ----------------------------------------------------

    def copy_of(self, run_id: str, notebook: str | None) -> Copy | None:
        """The notebook's copy of ``run_id``: its metadata's, as the extension handed it over (checked like a
        file's), else the newest its file carries (``notebook``'s, else this kernel's)."""
        path = self.notebook_path(notebook)
        held = self.link.held(run_id) if notebook is None else None
        if held is not None:
            name = path.name if path is not None else "this notebook"
            return checked_copy(held, f"{name}, metadata run '{run_id}'", name)
        return notebook_copy(path, run_id) if path is not None else None

    def file_holding(self, run_id: str) -> Path | None:
        return self.notebook_path()

    def holds_copy(self, run_id: str) -> bool:
        return self.link.held(run_id) is not None

    def kept_branch(self, run_id: str) -> None:
        """A history of a run that parted from this store's was taken up as run ``run_id``: the notebook's
        metadata keeps it under that id too, so the file carries both when its copy of the first is replaced."""
        self.link.put(run_id, checkpoint_of(self.read(run_id)))  # (before the store's copy replaces the file's)

    def carried_runs(self) -> set[str]:
        """The runs the notebook carries, as the extension handed them over or as its file holds them."""
        path = self.notebook_path()
        return set(self.link.runs) | set(notebook_run_ids(path) if path is not None else [])

    def carried_waiting(self) -> list[str]:
        """The runs the notebook carries that wait for a person: its metadata's, then its file's."""
        waiting = [
            run_id
            for run_id, held in sorted(self.link.runs.items())
            if held.get("status") == "suspended" and held.get("run_id") == run_id
        ]
        path = self.notebook_path()
        return waiting + (notebook_run_ids(path, waiting_only=True) if path is not None else [])

    # -- runs --------------------------------------------------------------------------------------

    def start(self, name: str, *, id: str | None = None, fresh: bool = False, **options: Any) -> NotebookRun:
        """Run (or replay) machine ``name`` as run ``id`` (default: the machine's name); see
        :meth:`Workspace.start`. A fresh run's checkpoint replaces the old one in the notebook's metadata."""
        run_id = id or name
        if fresh:
            self.link.delete(run_id)
            self.taken_up.pop(run_id, None)  # the new run is this person's own
        handle = super().start(name, id=run_id, fresh=fresh, **options)
        assert isinstance(handle, NotebookRun)
        return handle

    run = start  # the name this method had before the workspace

    def get_run(
        self, run_id: str, notebook: str | None = None, script: Any = None, *, trust_file: bool = False
    ) -> NotebookRun:
        handle = super().get_run(run_id, notebook, script, trust_file=trust_file)
        assert isinstance(handle, NotebookRun)
        return handle

    def forget(self, run_id: str) -> None:
        """Delete run ``run_id`` from this store and the notebook's metadata; this kernel will not take it up
        from the notebook's outputs again (a new run of that id starts afresh)."""
        super().forget(run_id)
        self.link.delete(run_id)


Session = NotebookSession  # the names these had before the workspace, kept for one release
Run = NotebookRun

_SESSION: NotebookSession | None = None


def current_session() -> NotebookSession:
    """The one session of this Python process (a kernel runs one notebook)."""
    global _SESSION
    if _SESSION is None:
        _SESSION = NotebookSession()
    return _SESSION
