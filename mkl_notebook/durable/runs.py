"""Durable runs: start, re-run, resume and settle runs whose every answer is journaled."""

from __future__ import annotations

import copy
import dataclasses
import functools
import os
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from .._version import __version__
from ..engine.options import RunOptions
from ..engine.oracle import Advanced, Oracle, OracleRequest, OutcomeUnknown, ReplyRequest, RunInterrupted
from ..engine.result import RunResult
from ..engine.runner import root_step, run_machine
from ..errors import UserError
from ..lang import stdlib
from ..lang.findings import MachineError
from ..lang.loader import load
from ..lang.model import Machine, reachable
from . import places, policy
from . import records as rec
from .chain import setup_digest
from .journaled_options import options_from_record, options_record
from .outcome import Outcome
from .places import Place
from .plan import Plan, plan
from .reading import RunState, gates_decided, trace_of, unsigned_from
from .record_types import Pin
from .replay import JOURNAL_ENDS, JournalIndex, ReplayOracle
from .stores import RunStatus, RunStore, check_run_id

Observer = Callable[[str, dict[str, Any]], None]
# Whoever advances a run signs what the advance appended: given the journal as it stands, the ``sign`` record
# that ends it (see ``checkpoints.seals.Signer.endorse``).
Endorse = Callable[[list[dict[str, Any]]], Any]


class RunStateError(UserError, ValueError):
    """A request that does not fit the run's state (resume a finished run, reply to no question, …)."""


@dataclass(frozen=True)
class Resolution:
    """A person's settlement of a tool call left in doubt: it ``completed`` (with ``value``), ``retry`` or ``abort``."""

    action: rec.ResolveAction
    value: Any = None


def not_waiting(run_id: str, state: RunState) -> str:
    """Why a reply is refused when run ``run_id`` waits for none."""
    return f"run '{run_id}' is not waiting for a reply (it is {state})"


def not_pending(run_id: str, question: str, state: RunState) -> str:
    """Why a reply to ``question`` is refused: what run ``run_id`` waits on now instead."""
    pending = state.question_id(run_id)
    if pending is None:
        return f"question {question} is not pending: run '{run_id}' waits for no reply now (it is {state})"
    return (
        f"question {question} is not pending: run '{run_id}' now waits on question {pending} "
        f"({state.shown!r}); nothing was recorded"
    )


def new_run_id() -> str:
    return f"run-{uuid.uuid4().hex[:10]}"


def pin_machines(root: Machine, registry: Mapping[str, Machine]) -> dict[str, Pin]:
    """The root and every machine it can call, transitively (the standard library's included), with hash and
    source."""
    known = stdlib.with_library(root, registry)
    return {
        name: {"sha256": machine.sha256, "source": machine.source}
        for name, machine in reachable(root, known.get).items()
    }


def machines_from_pins(
    pins: Mapping[str, Mapping[str, str]], where: str = "run", known: Mapping[str, Machine] | None = None
) -> dict[str, Machine]:
    """The pinned machines as models, reusing the ``known`` ones whose hash matches."""
    machines = {}
    for name, pin in pins.items():
        candidate = (known or {}).get(name)
        if candidate is not None and candidate.sha256 == pin.get("sha256"):
            machines[name] = candidate
            continue
        try:
            machines[name] = load(pin["source"], strict=False)
        except (MachineError, KeyError, TypeError) as exc:
            raise RunStateError(f"{where}: the pinned machine '{name}' cannot be loaded ({exc})") from None
    return machines


class Preparation(NamedTuple):
    """What an advance records before it runs (a reply, new budgets, a resolution, changed machines), the
    machines that replace the pinned ones of the same name for it (None: those given to :func:`advance`),
    and machines already loaded that stand in for pinned copies of the same hash."""

    records: list[Any]
    registry: Mapping[str, Machine] | None = None
    known: Mapping[str, Machine] | None = None  # more machines already loaded (files read under the lease)


def advance(
    store: RunStore,
    run_id: str,
    oracle: Oracle,
    *,
    registry: Mapping[str, Machine] | None = None,
    observer: Observer | None = None,
    before: Callable[[JournalIndex], Preparation] | None = None,
    place: rec.PlaceTag | None = None,
    known: Mapping[str, Machine] | None = None,
    endorse: Endorse | None = None,
) -> Outcome:
    """Run ``run_id`` from the top against its journal, asking ``oracle`` only for what is missing.

    ``before`` is given the journal, read once the run's lease is held, and says what to record first and
    which machines to run with (see :class:`Preparation`). ``registry`` holds machines that replace the
    pinned ones of the same name (the edited machines a ``before`` recorded a re-run of). ``known`` holds
    machines already loaded (the files as they are now, those defined in a notebook): a pinned machine with
    the same hash is taken from there instead of being parsed again from its pinned source. ``endorse``
    signs what the advance appended.
    """
    with store.lease(run_id):
        return _advance_leased(
            store,
            run_id,
            oracle,
            registry=registry,
            observer=observer,
            before=before,
            place=place,
            known=known,
            endorse=endorse,
        )


def replay(
    store: RunStore,
    run_id: str,
    oracle: Oracle,
    *,
    registry: Mapping[str, Machine] | None = None,
    observer: Observer | None = None,
) -> Outcome:
    """Run again from the journal as it stands (a finished run replays with no calls)."""
    return advance(store, run_id, oracle, registry=registry, observer=observer)


def _advance_leased(
    store: RunStore,
    run_id: str,
    oracle: Oracle,
    *,
    registry: Mapping[str, Machine] | None,
    observer: Observer | None,
    before: Callable[[JournalIndex], Preparation] | None,
    place: rec.PlaceTag | None = None,
    known: Mapping[str, Machine] | None = None,
    records: list[dict[str, Any]] | None = None,
    endorse: Endorse | None = None,
) -> Outcome:
    """:func:`advance` for a caller that already holds the run's lease (and may hand over the journal it
    just wrote, ``records``, so that it is not read back)."""
    if records is None:
        records = store.read(run_id)
    since = len(records)  # where what this advance appends begins
    index = JournalIndex.build(records)
    prepared = before(index) if before else Preparation([])
    added = prepared.records
    if prepared.registry is not None:
        registry = prepared.registry
    if prepared.known:
        known = {**(known or {}), **prepared.known}
    for record in added:
        store.append(run_id, record)
        index.add(record)
    replay_oracle = ReplayOracle(oracle, index, functools.partial(store.append, run_id))
    machines = _journal_machines(run_id, index, registry, known)
    result, doubt = _run_journal(run_id, index, replay_oracle, machines, observer)
    calls = {"made": replay_oracle.counts.made, "replayed": replay_oracle.counts.replayed}
    failed = replay_oracle.stopped_on(result.error) if result.status in ("suspended", "halt") else None
    closing = rec.ending_record(result, calls, doubt, place, failed)
    if added or replay_oracle.counts.recorded or not rec.same_ending(index.last, closing):
        # A pure replay that ends as before leaves the journal untouched.
        if oracle.traced and trace_of(records) is None:
            store.append(run_id, rec.trace_record())  # every later advance exports into this trace
        store.append_ending(run_id, closing, RunStatus(result.status, result.error, result.at))
        records = records + store.read(run_id, since=len(records))  # what this advance added, as it reads back
    if oracle.traced:
        oracle.advanced(_advanced(run_id, index, records, since, result))
    if endorse is not None and unsigned_from(records) < len(records):
        # What this advance appended, or what one cut off before its signature left (or an older version wrote).
        store.append(run_id, endorse(records))
        records = records + store.read(run_id, since=len(records))
    replayed = _replayed_steps(result, replay_oracle)
    return Outcome(run_id, result, calls, doubt, records, replayed_steps=replayed, machines=machines)


def _advanced(
    run_id: str, index: JournalIndex, records: list[dict[str, Any]], since: int, result: RunResult
) -> Advanced:
    """What the advance that appended ``records[since:]`` (none: a pure replay) did, as a traced oracle is told it."""
    reruns = [record for record in records if rec.kind_of(record) == "rerun"]
    started = float((reruns[-1] if reruns else index.start).get("time") or 0.0)  # (a re-run starts afresh)
    root, decided, ended = str(index.setup.get("root") or ""), tuple(gates_decided(records, since)), time.time()
    new = any(rec.kind_of(record) in ("trace", "rerun") for record in records[since:])
    trace = trace_of(records)
    wrote = len(records) > since
    return Advanced(run_id, root, trace, started, result.status, result.error, ended, decided, new, len(reruns), wrote)


def _replayed_steps(result: RunResult, oracle: ReplayOracle) -> int:
    """How many leading steps took their answers from the journal: those before the first call made."""
    if oracle.counts.made:
        step = root_step(oracle.counts.first_call or "")
        return step - 1 if step else 0
    if not oracle.counts.replayed:
        return 0  # nothing was recorded to replay: the steps asked no one
    return max((number for step in result.trace if isinstance(number := step.get("step"), int)), default=0)


def _journal_machines(
    run_id: str, index: JournalIndex, registry: Mapping[str, Machine] | None, known: Mapping[str, Machine] | None
) -> dict[str, Machine]:
    """The machines a run of the journal uses: ``registry``'s, and the pinned ones it does not replace."""
    given = dict(registry or {})
    pinned = {name: pin for name, pin in index.machines.items() if name not in given}
    return {**machines_from_pins(pinned, run_id, known=known), **given}


def _run_journal(
    run_id: str,
    index: JournalIndex,
    oracle: ReplayOracle,
    machines: Mapping[str, Machine],
    observer: Observer | None,
) -> tuple[RunResult, rec.Doubt | None]:
    """Run the journal's machine from the top with ``oracle`` and ``machines`` (see :func:`_journal_machines`):
    its result, and the tool call left in doubt."""
    root_name = index.setup.get("root") or ""
    if root_name not in machines:
        raise RunStateError(f"run '{run_id}': its machine '{root_name}' is not pinned")
    secret = bytes.fromhex(index.start.get("secret", ""))
    options = options_from_record(index.options, secret, observer)
    try:
        result = run_machine(
            machines[root_name],
            oracle,
            registry=machines,
            context=copy.deepcopy(index.setup.get("context") or {}),
            input=copy.deepcopy(index.setup.get("input") or {}),
            options=options,
        )
    except OutcomeUnknown as interrupted:  # a tool call started and never recorded as finished
        doubt = rec.Doubt(interrupted.position, interrupted.tool, interrupted.state)
        in_doubt = RunResult(status="in_doubt", error=f"in-doubt: {interrupted}", at=doubt.state)
        in_doubt.started_with = rec.started_with(index.start)
        return in_doubt, doubt
    result.started_with = rec.started_with(index.start)
    result.asked_again = list(oracle.asked_again)
    last = index.last or {}
    same_question = rec.kind_of(last) == "suspend" and last.get("pos") == result.pending
    if same_question and "about" not in last:  # asked before replies were bound to what they answer
        result.about = None  # the question stays as it was
    result.setup = setup_digest(index.setup)
    if result.pending is not None and not (same_question and "pinned" not in last and not index.set_up_again):
        result.pinned = result.setup  # (a question asked before questions named their setup stays as it was)
    return result, None


class _NotInPrefix(RunInterrupted):
    """Showing a journal prefix needed an answer the prefix does not hold."""


class _PrefixOnly(Oracle):
    """Answers nothing: a journal prefix is shown from its own records alone (``told`` hears what it held)."""

    def __init__(self, told: Callable[[OracleRequest], None] | None = None) -> None:
        self.told = told

    def replayed(self, request: OracleRequest) -> None:
        if self.told is not None:
            self.told(request)

    def ask(self, request: OracleRequest) -> Any:
        if isinstance(request, ReplyRequest):
            return None  # the reply came later: the run waits here, as it did
        raise _NotInPrefix(request.position)

    @property
    def waits(self) -> bool:
        return False


def _refuse_append(record: dict[str, Any]) -> None:
    raise _NotInPrefix("showing a journal prefix records nothing")


def show_prefix(
    run_id: str,
    records: list[dict[str, Any]],
    cut: int,
    *,
    known: Mapping[str, Machine] | None = None,
    observer: Observer | None = None,
) -> Outcome | None:
    """Run ``run_id`` as its first ``cut`` records left it, asking and recording nothing.

    None when those records do not hold every answer it needs (a journal from another
    version of the language, say): then the caller carries the request out instead.
    """
    shown = records[:cut]
    index = JournalIndex.build(shown)
    pinned = machines_from_pins(index.machines, run_id, known=known)
    replay_oracle = ReplayOracle(_PrefixOnly(), index, _refuse_append)
    try:
        result, doubt = _run_journal(run_id, index, replay_oracle, pinned, observer)
    except _NotInPrefix:
        return None
    calls = {"made": 0, "replayed": replay_oracle.counts.replayed}
    latest = records if cut < len(records) else None
    return Outcome(run_id, result, calls, doubt, shown, latest, _replayed_steps(result, replay_oracle), pinned)


def read_run(
    run_id: str,
    records: list[dict[str, Any]],
    *,
    known: Mapping[str, Machine] | None = None,
    told: Callable[[OracleRequest], None] | None = None,
) -> Outcome:
    """The run as its journal shows it, asking and recording nothing (a trace, a listing, a late answer's check);
    ``told`` hears each request the journal answered, in the order the run asked it (freezing a run).

    A run whose journal was cut off in the middle of an advance (a crash, an interrupt) shows its steps so far,
    suspended where the journal ends ("interrupted"); one whose last advance ended at a call the journal does not
    hold (a provider outage, no model configured) shows how that advance ended.
    """
    index = JournalIndex.build(records)
    pinned = machines_from_pins(index.machines, run_id, known=known)
    replay_oracle = ReplayOracle(_PrefixOnly(told), index, _refuse_append, read_only=True)
    result, doubt = _run_journal(run_id, index, replay_oracle, pinned, None)
    ended = index.state
    status = ended.status
    if result.status == "suspended" and result.error == JOURNAL_ENDS and index.settled and status != "running":
        # The advance ended there, and its ending record says how.
        result = dataclasses.replace(result, status=status, error=ended.error, at=ended.at)
    calls = {"made": 0, "replayed": replay_oracle.counts.replayed}
    return Outcome(run_id, result, calls, doubt, records, None, _replayed_steps(result, replay_oracle), pinned)


def replay_cell(
    store: RunStore,
    run_id: str,
    place: Place | None,
    request: str,
    *,
    known: Mapping[str, Machine] | None = None,
    observer: Observer | None = None,
) -> Outcome | None:
    """The run as ``place``'s cell left it, when that cell already asked for exactly ``request``; else None."""
    if place is None or place.form or not store.exists(run_id):
        return None
    records = store.read(run_id)
    cut = places.replayed_cut(records, place, request)
    if cut is None:
        return None
    return show_prefix(run_id, records, cut, known=known, observer=observer)


def start(
    machine: Machine,
    oracle: Oracle,
    *,
    store: RunStore,
    run_id: str | None = None,
    registry: Mapping[str, Machine] | None = None,
    input: Mapping[str, Any] | None = None,
    context: Mapping[str, Any] | None = None,
    options: RunOptions | None = None,
    fresh: bool = False,
    observer: Observer | None = None,
    origin: Mapping[str, Any] | None = None,
    place: Place | None = None,
    retry: bool = False,
    endorse: Endorse | None = None,
) -> Outcome:
    """Start a run, or re-run an existing one of that id from its journal (replaying what is unchanged).

    A re-run with an edited machine, other host values or other options records
    the change; calls whose exact request is unchanged still replay, and so do calls that failed (a
    provider's error), unless ``retry`` says to make them again. A notebook cell (``place``) that already
    started the run exactly so is shown the run as it left it.
    """
    run_id = check_run_id(run_id or new_run_id())
    options = options or RunOptions()
    full_registry = {**(registry or {}), machine.name: machine}
    setup: rec.Setup = {
        "root": machine.name,
        "machines": pin_machines(machine, full_registry),
        "input": copy.deepcopy(dict(input or {})),
        "context": copy.deepcopy(dict(context or {})),
        "options": options_record(options),
    }
    request = places.request_digest("start", {**setup, **({"retry": True} if retry else {})})
    if not fresh:
        shown = replay_cell(store, run_id, place, request, known=full_registry, observer=observer)
        if shown is not None:
            return shown
    with store.lease(run_id):  # creating a run, or replacing one with fresh=True, also needs the lease
        before = None
        records = None
        if fresh or not store.exists(run_id):
            secret = options.secret or os.urandom(16)
            start_record = rec.start_record(run_id, setup, secret=secret, package=__version__, origin=origin or {})
            records = [store.create(run_id, dict(start_record))]
        else:
            before = functools.partial(_rerun_records, run_id, setup, retry)
        return _advance_leased(
            store,
            run_id,
            oracle,
            registry=full_registry,
            observer=observer,
            before=before,
            place=places.tag(place, request),
            records=records,
            endorse=endorse,
        )


def _rerun_records(run_id: str, setup: rec.Setup, retry: bool, index: JournalIndex) -> Preparation:
    """What a re-run of an existing run records: the changed machines, host values and options, and (``retry``)
    that the calls that failed are made again."""
    if index.setup.get("root") != setup["root"]:
        raise RunStateError(
            f"run '{run_id}' belongs to machine '{index.setup.get('root')}', not "
            f"'{setup['root']}'; pick another id or start it fresh"
        )
    changed = [] if all(index.setup.get(key) == value for key, value in setup.items()) else [rec.rerun_record(setup)]
    again = [rec.resume_record(retry=True)] if retry and index.failed_calls else []
    return Preparation([*changed, *again])


def resume_records(
    run_id: str,
    index: JournalIndex,
    *,
    reply: Any = None,
    has_reply: bool = False,
    question: str | None = None,
    by: str | None = None,
    established: str | None = None,
    claimed: str | None = None,
    via: str | None = None,
    note: str | None = None,
    max_steps: int | None = None,
    max_tokens: int | None = None,
    max_cost: float | None = None,
    resolution: Resolution | None = None,
    registry: Mapping[str, Machine] | None = None,
    approvers: Sequence[str] = (),
) -> list[Any]:
    """What continuing a suspended (or in-doubt) run records before it runs again: a reply, the machines that
    changed, new budgets, or a person's settlement of a tool call in doubt.

    Made under the run's lease from its journal (``index``), so that a request that does not fit the run's
    state records nothing. A ``reply`` (``has_reply``) is journaled at the position the run waits on, bound
    to the ``question`` it answers, with who gave it (``by``, how that is ``established``, a name ``claimed``
    beside it), through what (``via``) and the ``note`` written
    beside it: it is refused, and nothing recorded, unless the run waits on exactly that question now. The
    reply keeps the rule it was taken under (``approvers``: who the run lets answer; checked by the caller).
    """
    state = index.state
    added: list[Any] = []
    if has_reply:
        if not state.waits_for_reply:
            raise RunStateError(not_waiting(run_id, state))
        pending = state.question_id(run_id)
        if (question is not None and question != pending) or policy.decided(index.journal, pending):
            raise RunStateError(not_pending(run_id, question or str(pending), state))  # (or its deadline decided it)
        question = pending
        added.append(
            rec.reply_record(
                str(state.position),
                state.reply_to,
                reply,
                by=by,
                via=via,
                question=question,
                about=state.about,
                note=note,
                established=established,
                claimed=claimed,
                approvers=approvers,
            )
        )
    if state.finished:
        reason = f": {state.error}" if state.error else ""
        raise RunStateError(f"run '{run_id}' has already finished ({state.status}{reason}); nothing to resume")
    if resolution is not None:
        if state.status == "in_doubt" and not index.doubt_open:
            raise RunStateError(
                f"run '{run_id}': the in-doubt call of tool '{state.tool}' at state '{state.at}' is settled "
                "already; resume it without --resolve"
            )
        if state.status != "in_doubt":
            raise RunStateError(f"run '{run_id}' has no in-doubt tool call to resolve")
        added.append(rec.resolve_record(state.position, resolution.action, resolution.value))
    elif index.doubt_open:
        again = " (the retry chosen for it was started and stopped too)" if state.position in index.retried else ""
        raise RunStateError(
            f"run '{run_id}' is in doubt: tool '{state.tool}' at state '{state.at}' may or may not have "
            f"run{again}; resume with --resolve completed=VALUE, --resolve retry or --resolve abort"
        )
    if registry is not None:
        root = index.setup.get("root") or ""
        if root in registry:
            # Machines ``registry`` lacks (a file that no longer loads) keep the copies the run pinned.
            kept = {name: pin for name, pin in index.machines.items() if name not in registry}
            known = {**machines_from_pins(kept, run_id), **registry}  # not the library's: what it pinned from one
            pins = {**kept, **pin_machines(registry[root], known)}
            if pins != index.machines:
                added.append(rec.rerun_record({"machines": pins}))
    # A run that stopped on a failed call makes that call again: resuming it is the person's choice to retry.
    retry = [state.failed] if state.status == "suspended" and state.failed else []
    if max_steps is not None or max_tokens is not None or max_cost is not None or retry:
        # More steps go to the machine that ran out: the root, or a called machine out of its own budget.
        ran_out = state.machine if state.error == "budget-exhausted" else None
        added.append(
            rec.resume_record(
                max_steps=max_steps if not ran_out else None,
                cost_budget=max_tokens,
                max_cost=max_cost,
                budgets={ran_out: max_steps} if ran_out and max_steps is not None else None,
                retry=retry,
            )
        )
    return added


def resume_journal(
    store: RunStore,
    run_id: str,
    oracle: Oracle,
    *,
    registry: Mapping[str, Machine] | None = None,
    observer: Observer | None = None,
    place: rec.PlaceTag | None = None,
    known: Mapping[str, Machine] | None = None,
    endorse: Endorse | None = None,
    **asked: Any,
) -> Outcome:
    """Continue a suspended (or in-doubt) run: record what :func:`resume_records` says for ``asked`` (a reply,
    budgets, a resolution) under the run's lease, then run it on from the top against its journal."""
    return advance(
        store,
        run_id,
        oracle,
        registry=registry,
        observer=observer,
        before=lambda index: Preparation(resume_records(run_id, index, registry=registry, **asked)),
        place=place,
        known=known,
        endorse=endorse,
    )


def plan_run(store: RunStore, run_id: str, registry: Mapping[str, Machine] | None = None) -> Plan:
    """What running ``run_id`` again with ``registry`` (the machines as they are now; default: the copies it
    pinned) would replay, call anew and ask again; nothing is called or journaled."""
    return plan_journal(run_id, store.read(run_id), registry)


def plan_journal(run_id: str, records: list[dict[str, Any]], registry: Mapping[str, Machine] | None = None) -> Plan:
    """:func:`plan_run` of a journal read from anywhere (a store's, or a notebook's copy)."""

    def run(index: JournalIndex, oracle: ReplayOracle, machines: Mapping[str, Machine]) -> None:
        _run_journal(run_id, index, oracle, _journal_machines(run_id, index, machines, None), None)

    return plan(run_id, records, registry or {}, run)
