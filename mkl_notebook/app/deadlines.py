"""Deadlines with safe defaults: the questions past their deadline decided by their run's rule, from whichever
runs first (``mkl tick``, a kernel's watch of its store); the rule itself is read in :mod:`.rules`.

The decision is journaled by :mod:`durable.policy` under the run's lease, so that however many
deciders race, one decision is recorded and the others find nothing due.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, NamedTuple

from ..checkpoints import notebook_file as nbfile
from ..checkpoints.notebook_disk import NotebookFileError
from ..durable import runs as durable
from ..durable.errors import StoreError
from ..durable.outcome import Outcome
from ..durable.policy import NotDue, due, due_at, policy_records, policy_said, reminder_due
from ..durable.records import kind_of, started_with
from ..durable.runs import Preparation
from ..durable.store_opening import close_store, open_store, store_there
from ..durable.stores import RunStore
from . import checkpoints
from .errors import USER_ERRORS
from .listing import files_under
from .settings import Settings
from .workspace import Workspace

# -- deciding ---------------------------------------------------------------------------------------


def decide_by_deadline(ws: Workspace, run_id: str, *, now: float | None = None) -> Outcome:
    """Decide the question run ``run_id`` of ``ws``'s store waits on by its deadline rule, and let the run go on
    as if that were the gate's answer (an escalation asks again). Under the run's lease: a question answered or
    decided meanwhile, or not due, raises :class:`NotDue` and nothing is journaled."""
    handle = ws.runs.get(run_id)
    if handle is not None:
        oracle = handle.oracle
    else:  # the script or model the run was started with answers what it asks next
        records = ws.store.read(run_id)
        drawn = started_with(records[0] if records else None)
        oracle = ws.equipment.oracle(drawn.get("script"), drawn.get("model"))

    def prepare(index: Any) -> Preparation:
        return Preparation(policy_records(run_id, index.journal, time.time() if now is None else now))

    with checkpoints.kernel_advance(ws.cells.file_holding(run_id), run_id, ws.store):
        return durable.advance(
            ws.store, run_id, oracle, before=prepare, known=ws.machines, endorse=ws.equipment.endorser()
        )


_REFUSED: tuple[type[Exception], ...] = (StoreError, *USER_ERRORS)  # what leaves one run undecided, said in a line


def deadline_of(store: RunStore, run_id: str) -> float | None:
    """When the deadline of the question run ``run_id`` of ``store`` waits on passes (seconds since the epoch);
    None when it waits on none, its run has no deadline, or the deadline decided it already."""
    return due_at(store.read(run_id))


def decide_shown(ws: Workspace, run_ids: Iterable[str]) -> list[str]:
    """Decide the due questions of runs ``run_ids`` a kernel shows (see :func:`decide_by_deadline`): the runs
    decided here (one another process, or a person, got to first is left as it is, and caught up as any move is)."""
    decided = []
    for run_id in run_ids:
        try:
            decide_by_deadline(ws, run_id)
        except _REFUSED:
            continue
        decided.append(run_id)
    return decided


class Decided(NamedTuple):
    """One decision a tick made: where, which run and question, what the rule decided, and where the run is now."""

    where: str
    run: str
    question: str
    action: str
    rule: str  # the rule, its digest and who set it, as audit says them
    status: str

    def line(self) -> str:
        """``nb.ipynb: run refund: question q-… decided by policy (deadline 1s, …): reject; now done``."""
        return (
            f"{self.where}: run '{self.run}': question {self.question} decided by policy ({self.rule}): "
            f"{self.action}; the run is now {self.status}"
        )


class Ticked(NamedTuple):
    """What a tick did: the decisions it journaled, and one line for each place or run it could not decide."""

    decided: list[Decided]
    problems: list[str]


def _decided(where: str, run_id: str, outcome: Outcome, at: int) -> Decided:
    """What a decision journaled at record ``at`` of the run's journal said, and where the run stands now."""
    record = next(r for r in outcome.records[at:] if kind_of(r) == "policy")
    action = str(record.get("action"))
    if record.get("escalate_to"):
        action += f" to {record['escalate_to']}"
    return Decided(where, run_id, str(record.get("question")), action, policy_said(record), str(outcome.result.status))


def _tick_store(ws: Workspace, shown: str, now: float) -> Iterator[Decided | str]:
    try:
        waiting = [run.run_id for run in ws.store.runs() if run.status == "suspended"]
    except _REFUSED as exc:
        yield f"{shown}: {exc}"
        return
    for run_id in waiting:
        try:
            records = ws.store.read(run_id)
            if due(records, now) is None:
                continue
            outcome = decide_by_deadline(ws, run_id, now=now)
        except NotDue:
            continue  # another decider (or a person) was first
        except _REFUSED as exc:
            yield f"{shown}: run '{run_id}': {exc}"
            continue
        yield _decided(shown, run_id, outcome, len(records))


def _tick_notebook(ws: Workspace, path: Path, shown: str, now: float) -> Iterator[Decided | str]:
    """The due questions of the runs a notebook carries, each decided as ``mkl resume NOTEBOOK --run ID`` would
    continue it (taken up into ``ws``'s store when trusted, and written back into the file)."""
    try:
        embedded, _ = nbfile.scan(path)
    except NotebookFileError as exc:
        yield str(exc)
        return
    for run in embedded:
        if due(run.records, now) is None:
            continue
        try:
            outcome = checkpoints.resume_in_notebook(
                path, run.run_id, ws.store, lambda found: decide_by_deadline(ws, found, now=now), keyring=ws.keyring
            )
        except NotDue:
            continue
        except _REFUSED as exc:
            yield f"{shown}: run '{run.run_id}': {exc}"
            continue
        yield _decided(shown, run.run_id, outcome, len(run.records))


def _places(
    folders: list[str | Path], stores: list[str], base: Settings, problems: list[str]
) -> list[tuple[Path | str, str, Path | None]]:
    """Where questions are looked for: each a store (for a notebook, the one its runs go on in), as shown, and the
    notebook (None for a store's own runs); a file under a folder that is refused is a line in ``problems``."""
    places: list[tuple[Path | str, str, Path | None]] = []
    for folder in folders:
        for path, shown, refused in files_under(Path(folder)):
            if refused is not None:
                problems.append(refused)
            else:
                places.append((base.store, shown, path) if path.suffix == ".ipynb" else (path, shown, None))
    places += [(store, store, None) for store in stores]
    if not folders and not stores and store_there(base.store):
        places.append((base.store, str(base.store), None))
    return places


def tick(
    folders: Iterable[str | Path],
    stores: Iterable[str],
    *,
    settings: Settings | None = None,
    now: float | None = None,
) -> Ticked:
    """Decide every question past its deadline in reach: in the notebooks and ``.mkl/runs.sqlite`` stores under
    ``folders`` (as ``mkl runs DIR`` finds them) and in ``stores`` (files or ``postgresql://`` URLs); with
    neither, in the default store. A notebook's run goes on in ``settings``' store and is written back into the
    file. What one place or run could not do is a line; the others are decided still."""
    at = time.time() if now is None else now
    base = settings or Settings()
    decided: list[Decided] = []
    problems: list[str] = []
    for store, shown, notebook in _places(list(folders), list(stores), base, problems):
        with Workspace(dataclasses.replace(base, store=store), follow_files=True) as ws:
            found = _tick_notebook(ws, notebook, shown, at) if notebook else _tick_store(ws, shown, at)
            for item in found:
                (decided if isinstance(item, Decided) else problems).append(item)  # type: ignore[arg-type]
    return Ticked(decided, problems)


_NOT_READ: tuple[type[Exception], ...] = (NotebookFileError, *_REFUSED)


class Reminded(NamedTuple):
    """A reminder due: where the question waits, its run, the question's id, and since when it is due."""

    where: str
    run: str
    question: str
    since: float


def _journals(store: Path | str, notebook: Path | None) -> Iterator[tuple[str, list[dict[str, Any]]]]:
    """The waiting runs' journals of a place (a notebook's runs, or a store's suspended ones, read-only)."""
    if notebook is not None:
        for run in nbfile.scan(notebook)[0]:
            yield run.run_id, run.records
        return
    opened = open_store(store, read_only=True)
    try:
        for run_id in [run.run_id for run in opened.runs() if run.status == "suspended"]:
            yield run_id, opened.read(run_id)
    finally:
        close_store(opened)


def reminders_due(
    folders: Iterable[str | Path],
    stores: Iterable[str],
    *,
    settings: Settings | None = None,
    now: float | None = None,
) -> tuple[list[Reminded], list[str]]:
    """Which reminders are due at ``now`` in reach (where :func:`tick` looks): each waiting question whose run's
    ``remind_after`` has passed and that no deadline decided, and one line for each place not read. It reads
    only, and journals nothing: whoever sends reminders (a notifier) asks this, and keeps what it sent."""
    at = time.time() if now is None else now
    problems: list[str] = []
    due_now: list[Reminded] = []
    for store, shown, notebook in _places(list(folders), list(stores), settings or Settings(), problems):
        try:
            for run_id, records in _journals(store, notebook):
                reminder = reminder_due(records, at)
                if reminder is not None:
                    due_now.append(Reminded(shown, run_id, reminder.question, reminder.since))
        except _NOT_READ as exc:
            problems.append(f"{shown}: {exc}")
    return due_now, problems
