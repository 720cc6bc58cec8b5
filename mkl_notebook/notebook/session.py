"""The kernel's notebook, as its workspace is given it: a :class:`KernelNotebook` is the
:class:`~mkl_notebook.app.cells.Cells` of the kernel's :class:`~mkl_notebook.app.workspace.Workspace`.

It knows what only a notebook has: the cell a request comes from and how far its execution got in each run (so
Restart & Run All shows every run as each cell left it), the notebook's own copies of its runs (its file, and
its metadata through the ``mkl-notebook`` extension), and the forms and views that follow a run and catch up
when it moves. Every rule it follows is the workspace's; it never imports widgets or litellm, so it is as
usable from a plain script as from a notebook.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..app.checkpoints import cell_order, cell_running, checkpoint_of, notebook_run_ids, tidy_beside
from ..app.errors import USER_ERRORS, UsageProblem
from ..app.finding import Found, named_notebook, notebook_running
from ..app.handle import Run, RunHost, pandas_for
from ..app.reconcile import STALE, Copy, checked_copy, judge, notebook_copy
from ..app.settings import NOTEBOOK_SETTINGS, Settings
from ..app.terms import Oracle, Outcome, Place
from ..app.workspace import Workspace
from .metadata_link import MetadataLink
from .watch import StoreWatch, Wake

__all__ = [
    "NOTEBOOK_SETTINGS",
    "KernelNotebook",
    "NotebookRun",
    "Settings",
    "current_notebook",
    "current_session",
    "notebook_of",
    "notebook_session",
    "pandas_for",
]


class NotebookRun(Run):
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


class KernelNotebook:
    """What one kernel knows of the notebook it runs; :attr:`workspace` is the workspace it serves (see
    :func:`notebook_session`, which makes the two together)."""

    def __init__(self) -> None:
        self._workspace: Workspace | None = None
        self.user_ns: dict[str, Any] = {}
        # The notebook cell executing now and an id of this execution of it (None outside a notebook cell).
        self.current_cell: Callable[[], tuple[str, str] | None] = lambda: None
        self.link = MetadataLink()  # to the notebook's metadata, through the extension
        self.link.on_hello = self._page_said_hello
        self._execution: str | None = None
        self._reached: dict[str, int] = {}  # run id -> journal position this execution reached
        # Per run: what shows it (forms, views), told whenever the run moves; each says when it is done following.
        self._followers: dict[str, list[Callable[[NotebookRun], bool]]] = {}
        self._followers_lock = threading.Lock()
        # Where the kernel can be woken on its own loop (None: a shell with no kernel, which nothing watches for).
        self.wake: Wake | None = None
        self._watch: StoreWatch | None = None
        self.chosen_notebook: str | None = None  # the notebook a person named with `%mkl notebook PATH`
        self._found: Found | None = None  # the notebook this kernel runs, looked for by its cells' sources
        self._told_unclear = False  # that it cannot tell which it runs was said (once)
        self._cell_position = -1  # of the last cell found by its source: the next one executing is below it
        self._cell_found: tuple[str | None, str | None] = (None, None)  # execution -> the cell found for it
        self._program: str | None = None  # the program that started this kernel, once asked
        self._given: set[Path] = set()  # the notebooks its command line names, once the kernel looked for its own
        self._page_copies: dict[str, tuple[Any, Copy]] = {}  # run id -> (the page's checkpoint, it verified)

    @property
    def workspace(self) -> Workspace:
        """The workspace this notebook's cells belong to."""
        if self._workspace is None:
            raise UsageProblem("this notebook serves no workspace yet (make the two with notebook_session())")
        return self._workspace

    def serve(self, workspace: Workspace) -> None:
        """Belong to ``workspace``, whose cells this notebook's are."""
        self._workspace = workspace

    # -- where requests come from: notebook cells ------------------------------------------

    def run_id_for(self, machine_name: str) -> str:
        """A run started in a notebook is named by its machine: executing its cell again replays it."""
        return machine_name

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
            self._reached[run_id] = outcome.length

    def notebook_path(self, explicit: str | None = None) -> Path | None:
        """The notebook file this kernel runs (or ``explicit``), if it is known (see :meth:`notebook_found`)."""
        return self.notebook_found(explicit).path

    def notebook_found(self, explicit: str | None = None) -> Found:
        """The notebook file this kernel runs and how it knows: as Jupyter or VS Code tells it (or ``explicit``),
        else as a person named it (``%mkl notebook PATH``, ``MKL_NOTEBOOK``), else as it was found in its folder
        by the cells it executes (see :func:`~mkl_notebook.app.finding.notebook_running`)."""
        told = [
            (explicit, "named by the call"),
            (self.user_ns.get("__session__"), "named by Jupyter (__session__)"),
            (self.user_ns.get("__vsc_ipynb_file__"), "named by VS Code (__vsc_ipynb_file__)"),
            (os.environ.get("JPY_SESSION_NAME"), "named by Jupyter (JPY_SESSION_NAME)"),
        ]
        for candidate, how in told:
            if isinstance(candidate, str) and candidate.endswith(".ipynb"):
                path = Path(candidate).expanduser()
                if path.is_file():
                    return Found(path, how)
        named = named_notebook(self.chosen_notebook, Path.cwd())
        if named is not None:
            return named
        found = self._found
        if found is not None and (found.path is None or found.path.is_file()):
            return found
        return Found(None, "no client named it, and no cell of it that uses mkl has been found in its folder yet")

    def notebook_named(self) -> str | None:
        """The notebook this kernel runs as a person in its folder types it in a command (``flow.ipynb``, or
        ``out/run.ipynb`` for papermill's output written into another folder); None when it is not known."""
        path = self.notebook_path()
        if path is None:
            return None
        return path.name if path.parent.resolve() == Path.cwd().resolve() else os.path.relpath(path)

    def unattended(self) -> str | None:
        """The headless client executing this kernel's notebook, when it is known to be one: papermill,
        ``jupyter nbconvert --execute`` or ``jupyter execute`` (the program that started the kernel, or
        papermill's own metadata in the file it writes). Nobody can click a form there, and such a client saves
        the widgets it saw into the file, where a form would only be dead controls. None wherever a person may be
        looking: a Jupyter server's page (JupyterLab, Notebook 7, Voila), VS Code, or a client this cannot tell."""
        served = self.user_ns.get("__session__") or os.environ.get("JPY_SESSION_NAME")
        if served or "__vsc_ipynb_file__" in self.user_ns:
            return None
        if self._program is None:
            self._program = _client_command()[0]
        if self._program in HEADLESS_PROGRAMS:
            return HEADLESS_PROGRAMS[self._program]
        found = self._found
        return "papermill" if found is not None and found.how.startswith("papermill") else None

    def choose_notebook(self, path: str) -> Found:
        """``%mkl notebook PATH``: this kernel runs the notebook at ``path`` (a file that must exist)."""
        if not path.endswith(".ipynb") or not (Path.cwd() / Path(path).expanduser()).is_file():
            raise UsageProblem(f"%mkl notebook {path}: no such notebook file (a .ipynb, relative to {Path.cwd()})")
        self.chosen_notebook = path
        self._cell_found, self._cell_position = (None, None), -1
        return self.notebook_found()

    def cell_for(self, code: str, execution: str) -> str | None:
        """The id of the notebook cell executing ``code`` when the client does not name it (nbclient, papermill,
        nbconvert send no cell id): found by its source in the notebook this kernel runs, which is itself found,
        when no client or person says which it is, in the kernel's folder as the one holding that source that
        the files (or the command that started the kernel) single out. Where several stay, the first cell to ask
        says so once, and no cell is found."""
        if self._cell_found[0] == execution:
            return self._cell_found[1]
        found = self.notebook_found()
        path = found.path
        if path is None and named_notebook(self.chosen_notebook, Path.cwd()) is None:
            program, named = _client_command()
            self._given = named
            self._found = found = notebook_running(code, Path.cwd(), named, program)
            path = found.path
            if found.ambiguous and not self._told_unclear:
                self._told_unclear = True
                print(found.fix())  # in the output of the cell that first uses mkl
        hit = cell_running(code, path, self._cell_position) if path is not None else None
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

    def show_found(self, handle: Run) -> bool:
        """Show a run found by id as the cells above the executing one left it, when they asked for it."""
        shown = self.workspace.as_cells_left(handle.id, self._cells_from_here())
        if shown is None:
            return False
        handle.showing(shown)
        return True

    def answered_here(self) -> list[Run]:
        """The runs whose questions the executing cell's forms answered, each as those forms left it."""
        current = self.current_cell()
        if current is None:
            return []
        shown = []
        workspace = self.workspace
        for outcome in workspace.answered_in(current[0]):
            made = workspace.new_handle(outcome.run_id, "", workspace.equipment.oracle())
            handle = workspace.runs.setdefault(outcome.run_id, made)
            shown.append(handle.showing(outcome))
        return shown

    # -- what shows a run ---------------------------------------------------------------------

    def follow(self, run_id: str, follower: Callable[[NotebookRun], bool]) -> None:
        """Tell ``follower(run)`` of every change of run ``run_id`` until it returns True."""
        with self._followers_lock:
            self._followers.setdefault(run_id, []).append(follower)
            if self.wake is not None and self._watch is None:  # another process may answer it: watch the store
                self._watch = StoreWatch(self, self.wake)
                self._watch.start()

    def followed(self) -> dict[str, int]:
        """The runs something here shows, each with how far in its journal this kernel's handle shows it."""
        with self._followers_lock:
            run_ids = [run_id for run_id, followers in self._followers.items() if followers]
        runs = self.workspace.runs
        return {run_id: runs[run_id].journal_length for run_id in run_ids if run_id in runs}

    def caught_up(self, run_ids: list[str]) -> None:
        """Runs ``run_ids`` moved in the store by another process: each is read again, and what shows it
        catches up (on the kernel's loop, between cells and clicks)."""
        for run_id in run_ids:
            handle = self.workspace.runs.get(run_id)
            if handle is not None:
                handle.catch_up()

    def moved(self, handle: Run) -> None:
        """Run ``handle`` changed (by any path): the notebook's metadata keeps it as it stands now, and every form
        and view that shows it catches up. A run made from Python (``mkl_notebook.run()``, ``submit``) is kept
        there like one a magic shows, though nothing displays it."""
        if not isinstance(handle, NotebookRun):
            return
        with self._followers_lock:
            followers = list(self._followers.get(handle.id, ()))
        try:
            done = [follower for follower in followers if follower(handle)]
        finally:  # after the views: a page draws the next question first, then writes it into the metadata
            self.kept(handle)
        with self._followers_lock:
            self._followers[handle.id] = [f for f in self._followers.get(handle.id, ()) if f not in done]

    def kept(self, handle: Run) -> None:
        """The notebook's metadata keeps run ``handle`` as it stands (not as a replayed cell left it)."""
        if handle.outcome is not None and handle.outcome.as_it_stands:
            self.link.put(handle.id, handle.envelope())

    def _page_said_hello(self, runs: set[str]) -> None:
        """A page said what the notebook's metadata holds (a page opened, reloaded, or its notebook reverted from
        disk): where it holds an older copy of a run of this store than the store, or none of one this kernel
        kept there, the run as it stands goes there again. A copy that goes on past the store's stays as it is
        (the next road that reads the run takes it up when trusted), and so does one nobody here can read."""
        tidy_beside(self.notebook_path())  # a page saying hello after a save: what it saved is in the file
        workspace = self.workspace
        signer = workspace.equipment.signer()
        for run_id in sorted(runs):
            with workspace.reading() as store:  # (read only: a page saying hello writes nothing in the store)
                held = store.read(run_id) if store is not None and store.exists(run_id) else None
            if run_id in workspace.copies.forgotten or held is None:
                continue
            page = self.link.held(run_id)
            if page is not None:
                try:
                    copy = self._page_copy(run_id, page, "the notebook's metadata")
                except USER_ERRORS:
                    continue  # a damaged copy is left for whoever reads it to be told so
                if judge(held, copy, workspace.keyring).status != STALE:
                    continue
            self.link.put(run_id, checkpoint_of(workspace.read(run_id), signer))

    def carry(self, handle: Run, bundle: dict[str, Any]) -> dict[str, Any]:
        """The run's view; as it stands, its checkpoint goes to the notebook's metadata too."""
        assert handle.outcome is not None
        return self.link.carry(handle.id, bundle, as_it_stands=handle.outcome.as_it_stands)

    def new_handle(self, host: RunHost, run_id: str, machine_name: str, oracle: Oracle) -> NotebookRun:
        """A handle that shows itself as a cell's value."""
        return NotebookRun(host, run_id, machine_name, oracle)

    # -- the notebook's own copies of its runs ----------------------------------------------------

    def copies_of(self, run_id: str, notebook: str | None) -> list[Copy]:
        """The notebook's copies of ``run_id``: its metadata's as the page holds it (handed over by the extension,
        checked like a file's), and the newest the file on disk carries (``notebook``'s, else this kernel's),
        which someone may have replaced since the page opened it (an answer that came back)."""
        path = self.notebook_path(notebook)
        copies = []
        held = self.link.held(run_id) if notebook is None else None
        if held is not None:
            copies.append(self._page_copy(run_id, held, path.name if path is not None else "this notebook"))
        if path is None and notebook is None:
            self._refuse_anew(run_id)
        tidy_beside(path)  # (a mark of this kernel's that the file holds past is taken back now)
        on_disk = notebook_copy(path, run_id) if path is not None else None
        copies += [on_disk] if on_disk is not None else []
        if notebook is None and self._found is not None and self._found.path == path:
            # The notebooks the client was given besides (papermill's input, whose outputs it clears in the copy
            # it writes): copies too, so a run one carries is taken up, not made anew.
            for given in sorted(self._given - ({path.resolve()} if path is not None else set())):
                found = notebook_copy(given, run_id)
                copies += [found] if found is not None else []
        return copies

    def _page_copy(self, run_id: str, held: dict[str, Any], name: str) -> Copy:
        """The page's copy of ``run_id``, verified like a file's, once for each checkpoint the page's metadata
        holds (a put or a hello puts another object there; a click on a long run read it several times)."""
        checked = self._page_copies.get(run_id)
        if checked is not None and checked[0] is held:
            return checked[1]
        copy = checked_copy(held, f"{name}, metadata run '{run_id}'", name)
        self._page_copies[run_id] = (held, copy)
        return copy

    def _refuse_anew(self, run_id: str) -> None:
        """This kernel cannot tell which notebook it runs, and one it may run carries run ``run_id``, which its
        store lacks: a run made anew would replace that file's in its outputs, so none is made."""
        found = self._found
        if found is None or not found.ambiguous or self.workspace.store.exists(run_id):
            return
        carrying = [path.name for path in found.candidates if notebook_copy(path, run_id) is not None]
        if carrying:
            raise UsageProblem(
                f"run '{run_id}' is carried by {', '.join(carrying)}, and this kernel cannot tell which of them it "
                "runs: say which with `%mkl notebook PATH` (or MKL_NOTEBOOK=PATH); the run was not taken up, nor "
                "made anew in its place"
            )

    def file_holding(self, run_id: str) -> Path | None:
        return self.notebook_path()

    def holds_copy(self, run_id: str) -> bool:
        return self.link.held(run_id) is not None

    def kept_branch(self, run_id: str) -> None:
        """A history of a run that parted from this store's was taken up as run ``run_id``: the notebook's
        metadata keeps it under that id too, so the file carries both when its copy of the first is replaced."""
        self.link.put(
            run_id, checkpoint_of(self.workspace.read(run_id))
        )  # (before the store's copy replaces the file's)

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

    def let_go(self, run_id: str) -> None:
        """Run ``run_id`` was forgotten or starts afresh: the notebook's metadata lets its copy go (this kernel
        does not take it up from the notebook's outputs again)."""
        self.link.delete(run_id)


# The programs that execute a notebook with nobody looking (their name as the kernel's parent's command line
# shows it), and how to say them.
HEADLESS_PROGRAMS = {
    "papermill": "papermill",
    "jupyter-nbconvert": "jupyter nbconvert",
    "nbconvert": "jupyter nbconvert",
    "jupyter-execute": "jupyter execute",  # nbclient's own command
}


def served_by_voila() -> bool:
    """Whether Voila started this kernel: it draws a notebook's outputs once, then follows only its widgets."""
    return os.environ.get("SERVER_SOFTWARE", "").startswith("voila/") or "VOILA_BASE_URL" in os.environ


def _client_command() -> tuple[str, set[Path]]:
    """The program that started this kernel (its parent process: nbclient, papermill and ``jupyter nbconvert``
    start their kernels themselves) and the notebooks its command line names, resolved in its folder; nothing
    where the system does not show another process's command line (``/proc``)."""
    parent = os.getppid()
    try:
        words = [word.decode(errors="replace") for word in Path(f"/proc/{parent}/cmdline").read_bytes().split(b"\0")]
        folder = Path(os.readlink(f"/proc/{parent}/cwd"))
    except OSError:
        return "", set()
    words = [word for word in words if word]
    if not words:
        return "", set()
    program = words[1:] if Path(words[0]).name.startswith("python") else words  # python [-m] PROGRAM …
    program = program[1:] if program[:1] == ["-m"] else program
    shown = Path(program[0] if program else words[0]).name
    return shown, {(folder / word).resolve() for word in words[1:] if word.endswith(".ipynb")}


def notebook_session(settings: Settings | None = None, **options: Any) -> Workspace:
    """A workspace serving a notebook: its :attr:`~Workspace.cells` are a new :class:`KernelNotebook`."""
    notebook = KernelNotebook()
    workspace = Workspace(settings, cells=notebook, **options)
    notebook.serve(workspace)
    # This person signs as the name they gave (`%mkl config user=`), else as JupyterHub's user of this server
    # (the Hub started it for them), else as the Jupyter server's user the notebook's page reported (a server
    # behind a login: the person it knows), else as the OS account (see app.replies.who).
    workspace.equipment.signing_as = lambda: (
        workspace.settings.user or os.environ.get("JUPYTERHUB_USER") or notebook.link.server_user
    )
    return workspace


_SESSION: Workspace | None = None


def current_session() -> Workspace:
    """The one workspace of this Python process (a kernel runs one notebook)."""
    global _SESSION
    if _SESSION is None:
        _SESSION = notebook_session()
    return _SESSION


def current_notebook() -> KernelNotebook:
    """The notebook the process's workspace serves (see :func:`current_session`)."""
    return notebook_of(current_session())


def notebook_of(workspace: Workspace) -> KernelNotebook:
    """The notebook ``workspace`` serves; a usage problem when it serves none (a command's workspace)."""
    cells = workspace.cells
    if not isinstance(cells, KernelNotebook):
        raise UsageProblem("this workspace serves no notebook (make it with notebook_session())")
    return cells
