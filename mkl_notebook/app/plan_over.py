"""What running every saved run of a machine again, with the machine as it is now, would do (``mkl plan MACHINE
--over DIR``, ``--store S``; ``%mkl plan NAME --over DIR``): a gate for an edit that invalidates approvals.

Each run of that machine in reach (the notebooks and ``.mkl/runs.sqlite`` stores under the folders, as ``mkl runs
DIR`` finds them, and the stores named) is planned as ``mkl plan`` plans one (:mod:`~mkl_notebook.durable.plan`):
how many calls replay, which calls are made anew (where, and why), and which answers a person gave are asked
again (the edit changed what they answered) or may be (they come after a call made anew). A run held in several
places is planned once, from its newest copy this person trusts; the others are named beside it. A copy no
trusted key signed, that no trusted copy holds, is planned and marked: its answers are nobody's this person
knows, so they do not count against the edit. Runs of other machines are counted as skipped.

Reading only: stores are opened read-only, no file is written, no model or tool is called.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..checkpoints import notebook_file as nbfile
from ..checkpoints.notebook_disk import NotebookFileError
from ..durable.chain import common_prefix
from ..durable.errors import StoreError
from ..durable.reading import claimed_name, decisions, established_how, run_state
from ..durable.records import kind_of
from ..durable.replay import JournalIndex
from ..durable.runs import plan_journal
from ..durable.store_opening import close_store
from ..errors import MklError
from ..lang import stdlib
from ..lang.model import Machine
from .errors import UsageProblem, without_secrets
from .listing import open_once, reach_into
from .settings import Settings
from .shelf import Shelf
from .trust import Keyring, Provenance

_POSITION = re.compile(r"(?:^|/)\d+:([^#/]+)#\d+/([a-z_]+)[^/]*$")  # root/1:draft#1/produce: state, kind


@dataclass(frozen=True)
class PlanOverRequest:
    """Which runs to plan: those of machine ``machine`` in the notebooks and stores under ``folders`` and in the
    ``stores`` named (a file or a postgresql:// URL)."""

    machine: str
    folders: Sequence[str] = ()
    stores: Sequence[str] = ()


@dataclass
class PlanOver:
    """The rows (one per run planned, ``where`` order) and what was not: runs of other machines (``skipped``),
    files and stores that could not be read (``problems``)."""

    machine: str
    rows: list[dict[str, Any]] = field(default_factory=list)
    skipped: int = 0
    problems: list[str] = field(default_factory=list)

    @property
    def invalidating(self) -> list[dict[str, Any]]:
        """The rows whose answers a person gave the edit puts at stake (trusted copies only; a deadline's
        decision by the run's rule is listed, but is no one's approval)."""
        return [row for row in self.rows if row["invalidates"]]

    def summary(self) -> dict[str, Any]:
        """The counts a status line says: ``status`` "invalidates" when a trusted run's answers are at stake."""
        return {
            "status": "invalidates" if self.invalidating else "ok",
            "machine": self.machine,
            "runs": len(self.rows),
            "invalidating": [row["run"] for row in self.invalidating],
            "untrusted": sum(not row["trusted"] for row in self.rows),
            "skipped": self.skipped,
            "problems": len(self.problems),
        }

    def as_dict(self) -> dict[str, Any]:
        """Everything: the summary's counts, the rows and what could not be read."""
        return {**self.summary(), "rows": self.rows, "skipped": self.skipped, "problems": self.problems}


@dataclass
class _Copy:
    run_id: str
    records: list[dict[str, Any]]
    place: str
    provenance: Provenance | None = None  # a notebook copy's; None: a store's (ours: trusted)

    @property
    def trusted(self) -> bool:
        return self.provenance is None or self.provenance.trusted


def machines_to_plan(target: str, settings: Settings | None = None) -> tuple[str, dict[str, Machine]]:
    """The machine ``target`` names, as ``mkl run`` takes one (a ``.mkl`` file, with the files beside it that it
    calls; else a machine of the library by name), and every machine a run of it may call."""
    settings = settings or Settings.from_flags()
    shelf = Shelf(settings)
    path = Path(target)
    if path.suffix == ".mkl" or path.exists() or "/" in target:
        root = shelf.load(path)
        return root.name, shelf.callees(root)
    found = stdlib.find(target, settings.library_folders())
    if found is None:
        raise UsageProblem(f"{target}: no such .mkl file, and no machine of the library by that name")
    return found.name, shelf.callees(found)


def _newest(copies: list[_Copy]) -> Iterator[tuple[_Copy, list[_Copy]]]:
    """The copies of one run to plan, each with the others it stands for: of the trusted copies, each that no
    other goes past (equal ones once); of those not trusted, each that no trusted copy holds or goes past."""

    def holds(one: _Copy, other: _Copy) -> bool:
        return len(one.records) >= len(other.records) and common_prefix(one.records, other.records) == len(
            other.records
        )

    chosen: list[_Copy] = []
    for copy in sorted(copies, key=lambda copy: not copy.trusted):  # (stable: trusted copies first, as found)
        pool = [other for other in copies if other.trusted] if copy.trusted else copies
        if any(holds(other, copy) and len(other.records) > len(copy.records) for other in pool):
            continue
        if any(holds(kept, copy) for kept in chosen):
            continue
        chosen.append(copy)
    for copy in chosen:
        yield copy, [other for other in copies if other is not copy and holds(copy, other)]


def _state_and_kind(position: str) -> tuple[str | None, str | None]:
    found = _POSITION.search(position)
    return (found.group(1), found.group(2)) if found else (None, None)


def _answer(given: Mapping[str, Any], why: str, *, certain: bool, index: JournalIndex) -> dict[str, Any]:
    """An answer a person gave that running again asks again (``certain``) or may, as a row says it."""
    position = str(given.get("position"))
    reply = (index.replies.get(position) or [dict(given)])[-1]
    decided = kind_of(reply) == "policy" or given.get("via") == "policy"  # a deadline's rule, not a person
    return {
        "position": position,
        "value": given.get("value"),
        "by": given.get("by"),
        "established": established_how(reply),
        "claimed": claimed_name(reply),
        "via": "policy" if decided else reply.get("via"),
        "time": reply.get("time"),
        "person": not decided,
        "certain": certain,
        "why": why,
    }


def plan_row(copy: _Copy, machines: Mapping[str, Machine], others: Sequence[_Copy] = ()) -> dict[str, Any]:
    """What running one copy of a run again would do, as a row: where it is, replays, calls anew, answers at
    stake, and ``invalidates`` (a trusted copy with an answer a person gave at stake)."""
    state = run_state(copy.records)
    row: dict[str, Any] = {
        "run": copy.run_id,
        "where": copy.place,
        "also_in": [other.place for other in others],
        "status": state.status,
        "trusted": copy.trusted,
        "made_by": copy.provenance.mark if copy.provenance is not None else None,
    }
    index = JournalIndex.build(copy.records)
    try:
        found = plan_journal(copy.run_id, copy.records, machines)
    except MklError as exc:  # (an edit the journal cannot be run with: every answer's fate is unknown)
        why = "the run cannot be planned"
        given = [{**answer, "position": answer.get("pos")} for answer in decisions(copy.records)]
        again = [_answer(answer, why, certain=False, index=index) for answer in given]
        row.update(error=without_secrets(str(exc)), replays=0, calls_anew=[], answers_kept=0, asked_again=again)
        row["invalidates"] = copy.trusted and any(answer["person"] for answer in again)
        return row
    anew: list[dict[str, Any]] = []
    if found.first_call is not None:
        first = found.first_call
        why = "an edit changed its request" if first["position"] in index.answers else "the run never came this far"
        anew.append({**first, "why": why})
        for position in found.may_rerun:
            state_name, kind = _state_and_kind(position)
            after = f"it comes after the call made anew at {first['state']}, and may depend on its answer"
            anew.append({"position": position, "kind": kind, "state": state_name, "why": after})
    again = [
        _answer(given, "it answered an earlier version of what it asks about", certain=True, index=index)
        for given in found.asked_again
    ]
    again += [
        _answer(given, "it comes after a call made anew, and may be about its answer", certain=False, index=index)
        for given in found.may_ask_again
    ]
    row.update(replays=len(found.replays), calls_anew=anew, answers_kept=len(found.answers_kept), asked_again=again)
    row["invalidates"] = copy.trusted and any(answer["person"] for answer in again)
    return row


@dataclass
class _Reach:
    """The copies of the machine's runs read so far, by run id."""

    machine: str
    keyring: Keyring
    found: PlanOver
    copies: dict[str, list[_Copy]] = field(default_factory=dict)
    opened: set[str] = field(default_factory=set)
    skipped: set[str] = field(default_factory=set)  # the runs of other machines (a run once, however many copies)

    def add(self, copy: _Copy) -> None:
        if JournalIndex.build(copy.records).setup.get("root") != self.machine:
            self.skipped.add(copy.run_id)
            return
        self.copies.setdefault(copy.run_id, []).append(copy)

    def notebook(self, path: Path, shown: str) -> None:
        try:
            embedded, damaged = nbfile.scan(path)
        except NotebookFileError as exc:
            self.found.problems.append(without_secrets(str(exc)))
            return
        self.found.problems += [f"{shown}, {bad.where}: {bad.reason}" for bad in damaged]
        for run in embedded:
            provenance = self.keyring.judge_history(run.records, run.seal)
            self.add(_Copy(run.run_id, run.records, f"{shown}, {run.where}", provenance))

    def store(self, location: str | Path, shown: str, *, named: bool = False) -> None:
        opened = open_once(location, self.opened, self.found.problems, named=named)
        if opened is None:
            return
        try:
            for summary in opened.runs():
                if summary.machine != self.machine:
                    self.skipped.add(summary.run_id)
                    continue
                self.add(_Copy(summary.run_id, opened.read(summary.run_id), f"store {shown}"))
        except StoreError as exc:
            self.found.problems.append(without_secrets(str(exc)))
        finally:
            close_store(opened)


def plan_over(request: PlanOverRequest, machines: Mapping[str, Machine], keyring: Keyring | None = None) -> PlanOver:
    """Every run of ``request.machine`` in reach, planned with ``machines`` as they are now (see the module's
    words). A folder that is not there, or a named store that cannot be opened, is refused."""
    if request.machine not in machines:
        raise UsageProblem(f"no machine named '{request.machine}' is defined")
    if not request.folders and not request.stores:
        raise UsageProblem("name where the runs are: --over DIR (a folder) or --store S (a run store)")
    found = PlanOver(request.machine)
    reach = _Reach(request.machine, keyring or Keyring(), found)
    reach_into(request.folders, request.stores, reach, found.problems)
    found.skipped = len(reach.skipped)
    for copies in reach.copies.values():
        found.rows += [plan_row(copy, machines, others) for copy, others in _newest(copies)]
    found.rows.sort(key=lambda row: (row["where"], row["run"]))
    return found
