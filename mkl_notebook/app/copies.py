"""A workspace's copies of runs in reach besides its store, and what became of each it met.

Every road that reads or advances a run first reconciles the store's history with the copies in reach
(:func:`~.reconcile.reconcile`): a command's are the files it names; a notebook kernel's, its notebook's (the
page's metadata and the file on disk), which it says through :class:`Reach`. This room keeps what those
meetings decided for the rest of the session: runs taken up though not trusted, histories that parted, runs of
this person's own made in place of a copy that could not be used, and runs forgotten here.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any, Protocol

from ..checkpoints.envelope import checkpoint_of
from ..durable import runs as durable
from ..durable.chain import common_prefix
from ..durable.stores import RunStore
from ..lang.model import Machine
from .errors import UsageProblem
from .reconcile import Copy, notebook_copy, parted_note, reconcile
from .trust import Keyring, Untrusted


class Reach(Protocol):
    """Where copies of runs are besides the store, and what keeps a branch taken up from them."""

    def copies_of(self, run_id: str, notebook: str | None) -> list[Copy]: ...

    def file_holding(self, run_id: str) -> Path | None: ...

    def holds_copy(self, run_id: str) -> bool: ...

    def kept_branch(self, run_id: str) -> None: ...

    def carried_runs(self) -> set[str]: ...

    def carried_waiting(self) -> list[str]: ...


class NamedFiles:
    """A command's reach: only the notebook file it names, if any."""

    def copies_of(self, run_id: str, notebook: str | None) -> list[Copy]:
        """The copy of ``run_id`` that ``notebook``'s file carries, if it names one."""
        found = notebook_copy(Path(notebook), run_id) if notebook else None
        return [found] if found is not None else []

    def file_holding(self, run_id: str) -> Path | None:
        """The notebook file that may hold ``run_id`` while it is advanced from this store (a kernel's
        notebook; a command has none): see :func:`~.checkpoints.kernel_advance`."""
        return None

    def holds_copy(self, run_id: str) -> bool:
        """Whether a copy in reach holds ``run_id`` (besides the store)."""
        return False

    def kept_branch(self, run_id: str) -> None:
        """A copy of a run whose history parted from the store's was taken up as run ``run_id``."""

    def carried_runs(self) -> set[str]:
        """The runs the copies in reach carry."""
        return set()

    def carried_waiting(self) -> list[str]:
        """The runs the copies in reach carry that wait for a person."""
        return []


class Copies:
    """What a workspace's meetings with copies of its runs decided: ``taken_up`` (run id -> why it is not trusted,
    though taken up), ``parted`` (run id -> what a copy whose history parts from it became), ``own_runs`` (a run
    id whose copy could not be used -> the run of this person's own made in its place: asking for the id means
    that run, and the copy keeps its id, to be taken up later), ``carried`` (runs the next view of a run carries
    along unchanged: run id -> [(run id, checkpoint)]) and ``forgotten`` (never taken up from a copy again)."""

    def __init__(
        self,
        store: Callable[[], RunStore],
        keyring: Keyring,
        machines: Mapping[str, Machine],
        reach: Reach,
        reading: Callable[[], AbstractContextManager[RunStore | None]] | None = None,
    ) -> None:
        self._store = store
        self._reading = reading  # the store read-only for one read while it is not open to be written (else None)
        self.keyring = keyring
        self.machines = machines
        self.reach = reach
        self.taken_up: dict[str, str] = {}
        self.parted: dict[str, str] = {}
        self.own_runs: dict[str, str] = {}
        self.carried: dict[str, list[tuple[str, dict[str, Any]]]] = {}
        self.forgotten: set[str] = set()

    def take_up(self, run_id: str, notebook: str | None = None, trust_file: bool = False) -> bool:
        """Reconcile run ``run_id`` of the store with every copy in reach (``notebook``'s file, or the reach's: see
        :func:`~.reconcile.reconcile`); whether the run's history was extended from them. What a trusted copy
        holds past the store's history is taken up; an untrusted one only when ``trust_file`` says to take it up
        anyway (:class:`Untrusted` says whose it is otherwise), and it then stays marked as such. A copy whose
        history parts from the store's is kept beside it under another id (:attr:`parted` says so); one older
        than a history of the run the store dropped is refused when the store holds none of it."""
        if run_id in self.forgotten:
            return False
        copies = self.reach.copies_of(run_id, notebook)
        if not copies or self._held_already(run_id, copies):
            return False
        store = self._store()
        reconciled = reconcile(store, run_id, copies, self.keyring, trust_file=trust_file)
        for judged in reconciled.taken:
            provenance = judged.provenance
            if provenance is not None and not provenance.trusted:
                taken = judged.branch or run_id
                self.taken_up[taken] = f"taken up from {judged.copy.source} by your choice; it is {provenance.mark}"
        for judged in reconciled.parted:
            self.parted[run_id] = parted_note(run_id, judged)
            if judged.branch is not None:
                self.reach.kept_branch(judged.branch)
                branch = durable.read_run(judged.branch, store.read(judged.branch), known=self.machines)
                self.carried[run_id] = [(judged.branch, checkpoint_of(branch))]
        marked = run_id in self.taken_up and store.exists(run_id)  # taken up by choice: trusted since?
        if marked and self.keyring.judge_history(store.read(run_id)).trusted:
            del self.taken_up[run_id]
        problem = reconciled.untrusted or (None if store.exists(run_id) else reconciled.older)
        if problem is not None:
            raise problem
        return any(judged.branch is None for judged in reconciled.taken)

    def _held_already(self, run_id: str, copies: list[Copy]) -> bool:
        """Whether the store, read while it is not open to be written, holds each copy's records already (the
        copy is its history, or an older part of it): reconciling would write nothing, so the store is not
        opened to be written (a reading command writes nothing, wherever the store is)."""
        if self._reading is None:
            return False
        with self._reading() as store:
            held = store.read(run_id) if store is not None and store.exists(run_id) else None
        return held is not None and all(common_prefix(held, copy.records) == len(copy.records) for copy in copies)

    def meant(self, run_id: str) -> str:
        """The run asking for ``run_id`` means: this person's own run made in its place while the copy of
        ``run_id`` in reach could not be used (see :meth:`Workspace.start`), else (and once it can: trusted
        since, say) ``run_id`` itself. Decided again each time: trust and the files in reach change."""
        mine = self.own_runs.get(run_id)
        if mine is None:
            return run_id
        try:
            self.take_up(run_id)
        except Untrusted:
            return mine
        if not self._store().exists(run_id):
            return mine
        del self.own_runs[run_id]
        return run_id

    def abreast(self, run_id: str) -> None:
        """Before a run is advanced here, the newest history in reach is taken up: a kernel never goes on from
        a copy older than one a file holds (an answer that came back in it). One that goes on past this store's
        history but that no key this person trusts signed stops the advance: going on here would fork the run."""
        try:
            self.take_up(run_id)  # (its handle, being advanced, takes the outcome)
        except Untrusted as problem:
            if problem.added is None:
                return  # the store holds none of that run: nothing here to fork
            raise UsageProblem(
                f"{problem}; nothing was recorded here, so that the run's history does not fork"
            ) from None
