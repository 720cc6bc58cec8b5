"""The inbox: every question waiting for a person in reach, one row each, wherever its run is kept.

In reach are the notebooks and run stores under the folders given (as ``mkl runs DIR`` finds them: no link out
of a folder followed), the stores named, and the configured store. A run held in several places (a notebook's
copy and a store, two notebooks) has one history: of its copies this person trusts, the newest is the run as it
stands, and only it is asked of; the others are named beside it (``also_in``). A copy that a newer one goes past
(stale), a run whose newest copy is answered, and a copy no trusted key signed that a trusted copy holds too are
not listed as waiting. A copy this person does not trust and nothing trusted holds is listed, marked as such
(``trusted`` False), with the command that takes it up only when they say so (``--trust-file``), as ``mkl runs``
lists it.

Reading only, as a listing reads (:mod:`.listing`): stores are opened read-only, no store, key or side file is
made, and no file is written.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from ..checkpoints import notebook_file as nbfile
from ..checkpoints.notebook_disk import NotebookFileError
from ..checkpoints.seals import Seal, covering, key_fingerprint, signatures
from ..durable.chain import common_prefix
from ..durable.errors import StoreError
from ..durable.reading import approvers_of_journal, run_state
from ..durable.records import kind_of
from ..durable.store_names import public_store
from ..durable.store_opening import close_store, store_there
from ..durable.stores import RunStore
from .errors import without_secrets
from .listing import file_resume, open_once, reach_into, run_summary, store_flag, stored_resume
from .replies import answerer, not_an_approver
from .requests import InboxRequest
from .rules import parse_duration
from .trust import Keyring, Provenance

_LEFT_OUT = ("answers", "status", "cost_usd", "key")  # of a listing's row: what an inbox row does not say


@dataclass
class _Copy:
    """One copy of a run in reach: a notebook's (with its seal, and who made it as this person judges) or a
    store's (a store of ours: trusted), where it is, and the ``--store`` a command names for it."""

    run_id: str
    records: list[dict[str, Any]]
    place: str  # where, as a person reads it: "a/b.ipynb, cell 3", "store .mkl/runs.sqlite"
    file: str | None = None  # a notebook's path, as shown (relative to here)
    cell: int | None = None
    store: str | None = None  # a store's location as shown (a server's without its password)
    flag: str | None = None  # the --store that names the store in a command
    seal: Seal | None = None
    provenance: Provenance | None = None  # a notebook copy's; None: a store's

    @property
    def trusted(self) -> bool:
        return self.provenance is None or self.provenance.trusted

    def waits(self) -> bool:
        return run_state(self.records).question_id(self.run_id) is not None


def _goes_past(newer: _Copy, older: _Copy) -> bool:
    """Whether ``newer`` holds all of ``older``'s history and more."""
    size = len(older.records)
    return len(newer.records) > size and common_prefix(newer.records, older.records) == size


def _same(one: _Copy, other: _Copy) -> bool:
    size = len(one.records)
    return len(other.records) == size and common_prefix(one.records, other.records) == size


@dataclass
class _Reach:
    """The copies of runs read so far, by run id, the stores opened (read-only), and what could not be read."""

    keyring: Keyring
    copies: dict[str, list[_Copy]] = field(default_factory=dict)
    stores: list[tuple[RunStore, str, str | None]] = field(default_factory=list)  # a store, as shown, its flag
    problems: list[str] = field(default_factory=list)
    _opened: set[str] = field(default_factory=set)
    _read: set[tuple[int, str]] = field(default_factory=set)  # (a store's place in ``stores``, a run) read

    def add(self, copy: _Copy) -> None:
        self.copies.setdefault(copy.run_id, []).append(copy)

    def notebook(self, path: Path, shown: str) -> None:
        """Every run a notebook carries (the newest of its copies in the file), judged by this person's keys."""
        try:
            embedded, damaged = nbfile.scan(path)
        except NotebookFileError as exc:
            self.problems.append(without_secrets(str(exc)))
            return
        self.problems += [f"{shown}, {bad.where}: {bad.reason}" for bad in damaged]
        for run in embedded:
            cell = None if run.cell_index is None else run.cell_index + 1
            place = f"{shown}, {run.where}"
            provenance = self.keyring.judge_history(run.records, run.seal)
            self.add(_Copy(run.run_id, run.records, place, shown, cell, seal=run.seal, provenance=provenance))

    def store(self, location: str | Path, shown: str, *, named: bool = False) -> None:
        """The runs waiting in the store at ``location`` (opened read-only, once however often it is reached);
        one that cannot be opened is a line of :attr:`problems`, or (``named``: a store given by name) refused."""
        opened = open_once(location, self._opened, self.problems, named=named)
        if opened is None:
            return
        place = len(self.stores)
        flag = store_flag(location)
        self.stores.append((opened, shown, flag))
        try:
            waiting = [run.run_id for run in opened.runs() if run.status == "suspended"]
        except StoreError as exc:
            self.problems.append(without_secrets(str(exc)))
            return
        for run_id in waiting:
            self._read_run(place, run_id)

    def _read_run(self, place: int, run_id: str) -> None:
        if (place, run_id) in self._read:
            return
        self._read.add((place, run_id))
        opened, shown, flag = self.stores[place]
        try:
            records = opened.read(run_id)
        except StoreError as exc:
            self.problems.append(without_secrets(str(exc)))
            return
        self.add(_Copy(run_id, records, f"store {shown}", store=shown, flag=flag))

    def other_copies(self) -> None:
        """For each run waiting in some copy, the history every opened store holds of it too, whatever its
        status: a store that holds it answered makes the waiting copy stale."""
        for run_id, copies in list(self.copies.items()):
            if not any(copy.waits() for copy in copies):
                continue
            for place, (opened, _, _) in enumerate(self.stores):
                if (place, run_id) in self._read:
                    continue
                try:
                    there = opened.exists(run_id)
                except StoreError as exc:
                    self.problems.append(without_secrets(str(exc)))
                    continue
                if there:
                    self._read_run(place, run_id)

    def close(self) -> None:
        for opened, _, _ in self.stores:
            close_store(opened)


class Inbox(NamedTuple):
    """The rows of an inbox (oldest question first) and one line for each file or store that could not be read."""

    rows: list[dict[str, Any]]
    problems: list[str]


def _heads(copies: Sequence[_Copy]) -> list[list[_Copy]]:
    """The histories no other copy among ``copies`` goes past, each as its equal copies (first found first)."""
    heads: list[list[_Copy]] = []
    for copy in copies:
        if any(_goes_past(other, copy) for other in copies):
            continue
        for group in heads:
            if _same(group[0], copy):
                group.append(copy)
                break
        else:
            heads.append([copy])
    return heads


def _standing(copies: list[_Copy]) -> Iterator[_Copy]:
    """The copies of one run whose question is the run's as it stands for this person: the newest trusted
    copies, and each copy not trusted that no trusted copy holds or goes past (listed marked)."""
    trusted = [copy for copy in copies if copy.trusted]
    for group in _heads(trusted):
        yield group[0]
    for group in _heads([copy for copy in copies if not copy.trusted]):
        suspect = group[0]
        if not any(_same(copy, suspect) or _goes_past(copy, suspect) for copy in trusted):
            yield suspect


def _asked_by(copy: _Copy, known: dict[str, str]) -> tuple[str | None, str | None]:
    """Who asked: the name signing the stretch of the run's history that ends with the question (else the run's
    starter, as its start record names one), and the name this person trusts that key under (None: not
    trusted or unsigned)."""
    records = copy.records
    asked = next((index for index in range(len(records) - 1, -1, -1) if kind_of(records[index]) == "suspend"), None)
    stretch = covering(signatures(records, copy.seal), asked) if asked is not None else None
    if stretch is not None and stretch.seal is not None:
        return stretch.seal.by, known.get(key_fingerprint(stretch.seal.key)) if stretch.seal.holds else None
    start = records[0] if records else {}
    by = start.get("by")
    return (str(by) if by else None), None


def _row(copy: _Copy, others: Sequence[_Copy], known: dict[str, str], now: float) -> dict[str, Any]:
    """What the inbox says of the question a copy of a run waits on."""
    if copy.file is not None:
        resume = file_resume(copy.run_id, copy.records, copy.file, None, copy.trusted)
    else:
        resume = stored_resume(copy.run_id, copy.records, copy.flag)
    listed = run_summary(copy.run_id, copy.records, resume, copy.provenance, known)
    for name in _LEFT_OUT:
        listed.pop(name, None)
    state = run_state(copy.records)
    asked_at = listed.pop("asked_at", None)
    by, trusted_as = _asked_by(copy, known)
    listed.update(
        kind="question" if state.error == "asked" else "approval",
        about=state.about,
        asked_by=by,
        asked_by_trusted_as=trusted_as,
        asked_at=asked_at,
        age_seconds=None if asked_at is None else round(max(0.0, now - asked_at), 3),
        deadline=listed.pop("deadline_at", None),  # when the run's rule decides it (--deadline), if it has one
        where=copy.place,
        file=copy.file,
        cell=copy.cell,
        store=copy.store,
        also_in=[other.place for other in others if other is not copy],
        approvers=list(approvers_of_journal(copy.records)),
        trusted=copy.trusted,
        made_by=copy.provenance.mark if copy.provenance is not None else None,
    )
    return listed


def _gather(request: InboxRequest, reach: _Reach) -> None:
    reach_into(request.folders, request.stores, reach, reach.problems)
    configured = request.configured
    if configured is not None and store_there(configured):
        reach.store(configured, public_store(str(configured)))


def _kept(row: dict[str, Any], request: InboxRequest, older: float | None, now: float) -> bool:
    if request.machine is not None and row.get("machine") != request.machine:
        return False
    if older is not None and (row["asked_at"] is None or now - row["asked_at"] < older):
        return False
    if request.overdue and (row["deadline"] is None or row["deadline"] > now):
        return False
    return not request.mine or row["may_answer"]


def inbox(request: InboxRequest, keyring: Keyring | None = None, *, now: float | None = None) -> Inbox:
    """Every question waiting in reach of ``request``, one row each, oldest first (see the module's words).

    Each row: the run and its machine, the question as asked (``ask``) and what it is about (``about``, whole),
    who asked (``asked_by``) and when (``asked_at``, ``age_seconds``), its ``deadline`` (None: the run has
    none), where it is (``where``; ``file`` and ``cell``, or ``store``) and where else (``also_in``), who may
    answer (``approvers``, empty: anyone) and whether this person may (``may_answer``), and the commands that
    answer it (``command``, ``commands``). A named store that cannot be opened, a folder that is not there, or a
    filter that does not parse is refused (:class:`UsageProblem`, or the store's own error), nothing listed.
    """
    older = parse_duration(request.older_than, "--older-than", zero=True)
    now = time.time() if now is None else now
    keyring = keyring or Keyring()
    reach = _Reach(keyring)
    try:
        _gather(request, reach)
        reach.other_copies()
    finally:
        reach.close()
    known = keyring.known_as()
    me = answerer(None, via=request.via)
    rows = []
    for copies in reach.copies.values():
        for copy in _standing(copies):
            if not copy.waits():
                continue
            row = _row(copy, copies, known, now)
            row["may_answer"] = not_an_approver(row["approvers"], me) is None
            rows.append(row)
    rows.sort(key=lambda row: (row["asked_at"] is None, row["asked_at"] or 0.0, row["run"]))
    return Inbox([row for row in rows if _kept(row, request, older, now)], reach.problems)
