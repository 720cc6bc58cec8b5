"""One reconcile: the copies of a run in reach, held against the history a store holds.

A run has one history, its append-only journal. Its copies (a store's journal, a notebook's metadata as a page
holds it, the notebook file on disk, a checkpoint file, someone else's file) are each a prefix of that history
or a branch of it. :func:`judge` says which one copy is, reading only; :func:`reconcile` judges every copy in
reach and takes up what a trusted one holds past the store's history, like a fast-forward:

- ``same``: the copy holds exactly what the store holds;
- ``stale``: the copy is older, a prefix of the store's history (a signature proves who made it, not that it
  is the newest);
- ``extends``: the copy goes on past the store's history (or the store holds none of it), and every stretch it
  adds is signed by this person or a key they trust: it is taken up, with no call;
- ``untrusted``: it goes on past the store's history, signed by a key not trusted (or not signed): shown, with
  whose it is, never used unless the person chooses to (``trust_file``); or it holds an answer from someone
  the run does not let answer (:meth:`~.trust.Keyring.refused_replies`): shown, and never used;
- ``parted``: it and the store's history go on differently from where they last agree. Both are kept: the
  store's under the run's id, the copy's (when trusted) under :func:`branch_id`, which names its origin.

Every road that reads a run calls this each time it reads (nothing decided is kept across a change of a file
or of trust), so a kernel never goes on from a copy older than one in reach.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, NamedTuple

from ..checkpoints import envelope
from ..checkpoints import notebook_file as nbfile
from ..checkpoints.notebook_disk import NotebookFileError
from ..checkpoints.seals import Seal
from ..durable.chain import chain_digest, common_prefix
from ..durable.forgotten import ForgottenHistory
from ..durable.reading import claimed_name, established_how, replies, run_state
from ..durable.stores import RunStore
from ..durable.taken_up import extend_run, import_envelope
from ..lang.interpolate import fmt
from ..render.common import answer_time, who_answered
from .errors import UsageProblem
from .trust import Keyring, Provenance, Untrusted

SAME, STALE, EXTENDS, UNTRUSTED, PARTED = "same", "stale", "extends", "untrusted", "parted"
branch_id = nbfile.branch_id


class Copy(NamedTuple):
    """A verified copy of a run from a file (a notebook's metadata or output, a checkpoint file): its header and
    journal, its seal (None: unsigned), and where it came from, as a person would name it."""

    header: dict[str, Any]
    records: list[dict[str, Any]]
    seal: Seal | None
    source: str
    raw: Any = None  # the checkpoint as the file holds it, when it is to be carried on unchanged

    @property
    def run_id(self) -> str:
        return str(self.header["run_id"])


class Judged(NamedTuple):
    """What one copy is to the history held: its status (``same``, ``stale``, ``extends``, ``untrusted``,
    ``parted``), how many records the two share, who made what it adds (None: it adds nothing), and for a
    parted copy the id it is kept under (None: not kept, as it is not trusted)."""

    copy: Copy
    status: str
    shared: int
    provenance: Provenance | None
    held: int  # records of the history it was held against
    branch: str | None = None
    taken: bool = False  # what it adds was taken up into the store
    forgotten: ForgottenHistory | None = None  # (stale) the history the store dropped that it stops short of

    @property
    def adds(self) -> str:
        """What the copy holds past the shared records, in a phrase."""
        return added_answers(self.copy.records[self.shared :])


class Reconciled(NamedTuple):
    """Every copy of run ``run_id`` in reach, judged in turn against the store's history as it grew."""

    run_id: str
    judged: list[Judged]

    @property
    def taken(self) -> list[Judged]:
        """The copies whose records were taken up (into the run, or kept as a branch of it)."""
        return [judged for judged in self.judged if judged.taken]

    @property
    def parted(self) -> list[Judged]:
        return [judged for judged in self.judged if judged.status == PARTED]

    @property
    def older(self) -> OlderCopy | None:
        """Why a copy was not taken up though the store holds none of the run: it is older than a history of it
        the store held and dropped (the first such), or None."""
        for judged in self.judged:
            if judged.forgotten is not None:
                return OlderCopy(older_note(self.run_id, judged))
        return None

    @property
    def untrusted(self) -> Untrusted | None:
        """Why a copy that goes on past the store's history was not used (the first such), or None."""
        for judged in self.judged:
            if judged.status == UNTRUSTED and not judged.taken:
                return untrusted(judged)
        return None


def judge(held: list[dict[str, Any]] | None, copy: Copy, keyring: Keyring) -> Judged:
    """What ``copy`` is to the history ``held`` (None: none is held), reading only."""
    if held is None:
        provenance = keyring.judge_history(copy.records, copy.seal)
        return Judged(copy, EXTENDS if provenance.trusted else UNTRUSTED, 0, provenance, 0)
    shared = common_prefix(held, copy.records)
    if shared == len(copy.records):
        return Judged(copy, SAME if shared == len(held) else STALE, shared, None, len(held))
    provenance = keyring.judge_history(copy.records, copy.seal, shared)
    if shared == len(held):
        return Judged(copy, EXTENDS if provenance.trusted else UNTRUSTED, shared, provenance, len(held))
    branch = branch_id(copy.run_id, copy.records, shared) if provenance.trusted else None
    return Judged(copy, PARTED, shared, provenance, len(held), branch)


def reconcile(
    store: RunStore, run_id: str, copies: list[Copy], keyring: Keyring, *, trust_file: bool = False
) -> Reconciled:
    """Judge each copy of run ``run_id`` in reach against the history ``store`` holds, shortest first (a copy
    that extends another is judged after it), and take up what the trusted ones add: a copy that goes on past
    the store's history extends it; one whose history parts from it is kept as a run of its own under
    :func:`branch_id`. ``trust_file`` takes up what a copy adds though no key this person trusts signed it."""
    unique: dict[str, Copy] = {}
    for copy in copies:
        unique.setdefault(chain_digest(copy.records).hex(), copy)  # one judgement per history
    ordered = sorted(unique.values(), key=lambda copy: len(copy.records))
    judged = []
    for copy in ordered:
        gone = older_than_forgotten(store, run_id, copy.records)
        if gone is not None:  # a rollback: taken up, it would redo what the dropped history did
            judged.append(Judged(copy, STALE, gone.shared(copy.records), None, gone.records, forgotten=gone))
            continue
        held = store.read(run_id) if store.exists(run_id) else None
        found = judge(held, copy, keyring)
        provenance = found.provenance
        # (an answer from someone the run does not let answer is never taken up, not even by choice)
        chosen = provenance is not None and provenance.refused is None and (provenance.trusted or trust_file)
        if found.status in (EXTENDS, UNTRUSTED) and chosen:
            if held is None:
                import_envelope(store, {**copy.header, "run_id": run_id}, copy.records)
            else:
                extend_run(store, run_id, found.shared, copy.records)
            found = found._replace(taken=True)
        elif found.status == PARTED and chosen:
            branch = found.branch or branch_id(run_id, copy.records, found.shared)
            kept = copy._replace(header={**copy.header, "run_id": branch})
            inner = reconcile(store, branch, [kept], keyring, trust_file=True)
            found = found._replace(branch=branch, taken=bool(inner.taken))
        judged.append(found)
    return Reconciled(run_id, judged)


class OlderCopy(UsageProblem):
    """A copy of a run is older than a history of it its store held and dropped (forgotten, or started over):
    nothing of it is taken up or answered."""


def older_than_forgotten(store: RunStore, run_id: str, records: list[dict[str, Any]]) -> ForgottenHistory | None:
    """The history of ``run_id`` that ``store`` held and dropped which the copy ``records`` shares a start with
    but does not hold all of, or None (see :mod:`~mkl_notebook.durable.forgotten`)."""
    for gone in store.forgotten(run_id):
        if not gone.outgrown_by(records):
            return gone
    return None


def forgotten_phrase(gone: ForgottenHistory) -> str:
    """The history a store dropped, in a phrase."""
    when = answer_time(gone.at)
    return f"{gone.records} records, {gone.status or 'status unknown'}, forgotten at {when}"


def older_note(run_id: str, judged: Judged) -> str:
    """Why a copy older than a history the store dropped is not taken up, naming both."""
    assert judged.forgotten is not None
    return (
        f"{judged.copy.source} holds an older copy of run '{run_id}' ({len(judged.copy.records)} records) than the "
        f"history this store held and forgot ({forgotten_phrase(judged.forgotten)}): nothing of it is taken up "
        "or answered, so that nothing that history did is done again (a run of that id started with --fresh "
        "begins a new history)"
    )


def untrusted(judged: Judged) -> Untrusted:
    """Why a copy's records are not taken up: whose they are, what they add, the copy as the file holds it."""
    copy = judged.copy
    assert judged.provenance is not None
    added = judged.adds if judged.held else None
    problem = Untrusted(copy.run_id, copy.source, judged.provenance, run_state(copy.records), added)
    problem.checkpoint = copy.raw  # so that what shows the refusal can keep the file's run as it was
    return problem


def parted_note(run_id: str, judged: Judged) -> str:
    """What became of a copy whose history parts from the store's, in a sentence or two."""
    said = (
        f"{judged.copy.source} holds another history of run '{run_id}', which parts from this one after record "
        f"{judged.shared}"
    )
    if judged.branch is not None:
        return f"{said} ({judged.adds}). Both are kept: that one as run '{judged.branch}'."
    problem = untrusted(judged)
    problem.run_id = branch_id(run_id, judged.copy.records, judged.shared)
    return f"{said}. {problem}"


def stale_note(held: list[dict[str, Any]] | None, records: list[dict[str, Any]]) -> str | None:
    """What makes a copy of a run (``records``) stale, when the history in reach (``held``: a store's) goes on
    past it: a signed copy proves who made it, not that it is the newest. None when it is not older."""
    if not held or len(held) <= len(records) or common_prefix(held, records) != len(records):
        return None
    return (
        "an older copy: your store holds a newer history of this run "
        f"({added_answers(held[len(records) :])}; now {run_state(held)})"
    )


def added_answers(records: list[dict[str, Any]]) -> str:
    """What records past a held history say a person answered, in a phrase for a message."""
    said = [
        f"{fmt(reply.get('value'))!r}"
        + (
            f" by {who_answered(reply.get('by'), established_how(reply), claimed_name(reply))[:80]!r}"
            if reply.get("by")
            else ""
        )
        for reply in replies(records)
    ]
    return ("answered " + ", then ".join(said)) if said else f"{len(records)} more records, no answer of a person"


def checked_copy(data: Any, where: str, source: str) -> Copy:
    """A checkpoint handed over unverified (the notebook's metadata, through the extension), checked like a
    file's before anything of it is used."""
    header, records, seal = envelope.verify_checkpoint(data, where)
    return Copy(header, records, seal, source, data)


def notebook_copy(notebook: Path, run_id: str) -> Copy | None:
    """The newest verified copy of ``run_id`` a notebook file carries (metadata or outputs) as the file is on
    disk now, None when it has none or cannot be read."""
    try:
        found = nbfile.find_run(notebook, run_id)
    except NotebookFileError:
        return None
    return Copy(found.header, found.records, found.seal, notebook.name, found.raw)
