"""Durable runs: start, re-run, resume and settle runs whose every answer is journaled."""

from __future__ import annotations

import copy
import functools
import hashlib
import os
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from types import MappingProxyType
from typing import Any

from .. import __version__
from ..engine.options import RunOptions
from ..engine.oracle import InDoubt, Oracle
from ..engine.result import RunResult
from ..engine.runner import run_machine
from ..lang.findings import MachineError
from ..lang.loader import load
from ..lang.model import Machine
from . import envelope
from .records import canonical
from .replay import JournalIndex, ReplayOracle
from .stores import RunStore, check_run_id

_OPTION_FIELDS = (
    "cost_budget",
    "max_steps",
    "suspendable",
    "hitl",
    "on_untrusted_flow",
    "tool_effects",
    "trusted_keys",
    "max_workers",
    "ask_human",
    "ask_limit",
    "retry_backoff",
)
RESOLVE_ACTIONS = ("completed", "retry", "abort")


class RunStateError(ValueError):
    """A request that does not fit the run's state (resume a finished run, reply to no question, …)."""


@dataclass
class Outcome:
    """What advancing a durable run produced."""

    run_id: str
    result: RunResult
    calls: dict[str, int] = field(default_factory=lambda: {"made": 0, "replayed": 0})
    in_doubt: dict[str, str] | None = None
    records: list[dict[str, Any]] = field(default_factory=list)

    @property
    def status(self) -> str:
        return self.result.status

    def header(self) -> dict[str, Any]:
        index = JournalIndex.build(self.records)
        pins = index.machines
        result = self.result
        return {
            "run_id": self.run_id,
            "machine": index.setup.get("root"),
            "status": result.status,
            "error": result.error,
            "at": result.at,
            "ask": result.ask,
            "reply_to": result.reply_to,
            "question": result.question,
            "options": _effective_options(index),
            # The sources travel once, in the journal's start/rerun record; the header names and hashes them.
            "machines": [{"name": name, "sha256": pin["sha256"]} for name, pin in pins.items()],
            "calls": dict(self.calls),
        }

    def envelope(self) -> dict[str, Any]:
        return envelope.build(self.header(), self.records)


def new_run_id() -> str:
    return f"run-{uuid.uuid4().hex[:10]}"


def pin_machines(root: Machine, registry: Mapping[str, Machine]) -> dict[str, dict[str, str]]:
    """The root and every machine it can call, transitively, with hash and source."""
    pins: dict[str, dict[str, str]] = {}
    pending = [root]
    while pending:
        machine = pending.pop(0)
        if machine.name in pins:
            continue
        pins[machine.name] = {"sha256": machine.sha256, "source": machine.source}
        pending.extend(registry[name] for name in machine.called_machines() if name in registry)
    return pins


_PARSED: dict[str, Machine] = {}  # sha256 -> model; models are immutable, so sharing them is safe


def machines_from_pins(
    pins: Mapping[str, Mapping[str, str]], where: str = "run", known: Mapping[str, Machine] | None = None
) -> dict[str, Machine]:
    """The pinned machines as models, reusing ``known`` ones and earlier parses of the same source."""
    machines = {}
    for name, pin in pins.items():
        candidate = (known or {}).get(name)
        if candidate is not None and candidate.sha256 == pin.get("sha256"):
            machines[name] = candidate
            continue
        cached = _PARSED.get(str(pin.get("sha256")))
        if cached is not None and cached.source == pin.get("source"):
            machines[name] = cached
            continue
        try:
            machines[name] = _PARSED.setdefault(pin["sha256"], load(pin["source"], strict=False))
        except (MachineError, KeyError, TypeError) as exc:
            raise RunStateError(f"{where}: the pinned machine '{name}' cannot be loaded ({exc})") from None
    return machines


def _options_record(options: RunOptions) -> dict[str, Any]:
    record: dict[str, Any] = {}
    for name in _OPTION_FIELDS:
        value = getattr(options, name)
        if isinstance(value, (frozenset, set)):
            value = sorted(value)
        elif isinstance(value, Mapping):
            value = dict(value)
        record[name] = value
    if options.budgets:  # only when set, so that the records of runs from before it existed still match
        record["budgets"] = dict(options.budgets)
    return record


def _options_from_record(record: Mapping[str, Any], secret: bytes, observer: Any = None) -> RunOptions:
    values: dict[str, Any] = {name: record[name] for name in _OPTION_FIELDS if name in record}
    if "tool_effects" in values:
        values["tool_effects"] = MappingProxyType(dict(values["tool_effects"] or {}))
    if "trusted_keys" in values:
        values["trusted_keys"] = frozenset(values["trusted_keys"] or ())
    if record.get("budgets"):
        values["budgets"] = MappingProxyType({str(name): int(steps) for name, steps in record["budgets"].items()})
    return RunOptions(**values, secret=secret, observer=observer)


def _effective_options(index: JournalIndex) -> dict[str, Any]:
    return {**(index.setup.get("options") or {}), **index.overrides}


def _host_values(index: JournalIndex) -> tuple[dict[str, Any], dict[str, Any]]:
    return copy.deepcopy(index.setup.get("context") or {}), copy.deepcopy(index.setup.get("input") or {})


def _read(store: RunStore, run_id: str) -> list[dict[str, Any]]:
    return store.read(run_id)


def _result_records(outcome_result: RunResult, in_doubt: InDoubt | None, calls: dict[str, int]) -> dict[str, Any]:
    if in_doubt is not None:
        return {
            "t": "finish",
            "status": "in_doubt",
            "error": outcome_result.error,
            "at": outcome_result.at,
            "pos": in_doubt.position,
            "tool": in_doubt.tool,
            "calls": calls,
            "time": time.time(),
        }
    if outcome_result.status == "suspended":
        record = {
            "t": "suspend",
            "reason": outcome_result.error,
            "at": outcome_result.at,
            "ask": outcome_result.ask,
            "reply_to": outcome_result.reply_to,
            "question": outcome_result.question,
            "pos": outcome_result.pending,
            "calls": calls,
            "time": time.time(),
        }
        if outcome_result.machine:  # suspended inside a called machine: where more steps must go
            record["machine"] = outcome_result.machine
        return record
    return {
        "t": "finish",
        "status": outcome_result.status,
        "error": outcome_result.error,
        "at": outcome_result.at,
        "calls": calls,
        "time": time.time(),
    }


_RESULT_FIELDS = tuple(item.name for item in fields(RunResult))


def _outcome_key(records: list[dict[str, Any]]) -> str | None:
    """What a finished run's outcome depends on: this package and the journal as it stands.

    A finished run is a pure function of its journal, so while no record is added
    its outcome can be served without running it again.
    """
    last = records[-1] if records else {}
    if last.get("t") != "finish" or last.get("status") not in ("done", "halt"):
        return None
    return f"{__version__}:{len(records)}:{hashlib.sha256(canonical(last).encode()).hexdigest()[:16]}"


def _same_ending(last: dict[str, Any] | None, closing: dict[str, Any]) -> bool:
    if last is None:
        return False
    volatile = ("time", "calls")
    return {k: v for k, v in last.items() if k not in volatile} == {
        k: v for k, v in closing.items() if k not in volatile
    }


def replay(
    run_id: str,
    oracle: Oracle,
    *,
    store: RunStore,
    registry: Mapping[str, Machine] | None = None,
    observer: Callable[[str, dict[str, Any]], None] | None = None,
) -> Outcome:
    """Run again from the journal as it stands (a finished run replays with no calls)."""
    return advance(store, run_id, oracle, registry=registry, observer=observer)


def advance(
    store: RunStore,
    run_id: str,
    oracle: Oracle,
    *,
    registry: Mapping[str, Machine] | None = None,
    observer: Callable[[str, dict[str, Any]], None] | None = None,
    before: Callable[[JournalIndex], list[dict[str, Any]]] | None = None,
) -> Outcome:
    """Run ``run_id`` from the top against its journal, asking ``oracle`` only for what is missing.

    ``before`` may return records (a reply, new budgets, a resolution) to append
    first, once the run's lease is held and its journal read.
    """
    with store.lease(run_id):
        return _advance_leased(store, run_id, oracle, registry=registry, observer=observer, before=before)


def _advance_leased(
    store: RunStore,
    run_id: str,
    oracle: Oracle,
    *,
    registry: Mapping[str, Machine] | None,
    observer: Callable[[str, dict[str, Any]], None] | None,
    before: Callable[[JournalIndex], list[dict[str, Any]]] | None,
) -> Outcome:
    """:func:`advance` for a caller that already holds the run's lease."""
    records = _read(store, run_id)
    index = JournalIndex.build(records)
    added = before(index) if before else []
    for record in added:
        store.append(run_id, record)
        index.add(record)
    cache_key = _outcome_key(records) if not added else None
    if cache_key is not None:
        cached = store.cached_outcome(run_id, cache_key)
        if cached is not None:  # nothing changed since this finished run was last computed
            return Outcome(run_id, RunResult(**cached["result"]), dict(cached["calls"]), None, records)
    pins = index.machines
    machines = dict(machines_from_pins(pins, run_id, registry))
    if registry:
        machines.update({name: registry[name] for name in pins if name in registry})
        for name, machine in registry.items():
            machines.setdefault(name, machine)
    root_name = index.setup.get("root") or ""
    if root_name not in machines:
        raise RunStateError(f"run '{run_id}': its machine '{root_name}' is not pinned")
    secret = bytes.fromhex(index.start.get("secret", ""))
    options = _options_from_record(_effective_options(index), secret, observer)
    context, host_input = _host_values(index)
    replay_oracle = ReplayOracle(oracle, index, functools.partial(store.append, run_id))
    in_doubt: InDoubt | None = None
    try:
        result = run_machine(
            machines[root_name], replay_oracle, registry=machines, context=context, input=host_input, options=options
        )
    except InDoubt as doubt:
        in_doubt = doubt
        result = RunResult(status="in_doubt", error=f"in-doubt: {doubt}", at=doubt.state)
    calls = {"made": replay_oracle.made, "replayed": replay_oracle.replayed}
    closing = _result_records(result, in_doubt, calls)
    changed = bool(added or replay_oracle.recorded)
    if changed or not _same_ending(index.last, closing):
        store.append(run_id, closing)  # a pure replay that ends as before leaves the journal untouched
        store.set_status(run_id, result.status, result.error, result.at)
        records = _read(store, run_id)
    if result.status in ("done", "halt"):
        store.cache_outcome(
            run_id,
            _outcome_key(records) or "",
            {
                "result": {name: getattr(result, name) for name in _RESULT_FIELDS},
                "calls": {"made": 0, "replayed": replay_oracle.made + replay_oracle.replayed},
            },
        )
    doubt_info = {"position": in_doubt.position, "tool": in_doubt.tool, "state": in_doubt.state} if in_doubt else None
    return Outcome(run_id, result, calls, doubt_info, records)


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
    observer: Callable[[str, dict[str, Any]], None] | None = None,
    origin: Mapping[str, Any] | None = None,
) -> Outcome:
    """Start a run, or re-run an existing one of that id from its journal (replaying what is unchanged).

    A re-run with an edited machine, other host values or other options records
    the change; calls whose exact request is unchanged still replay.
    """
    run_id = check_run_id(run_id or new_run_id())
    options = options or RunOptions()
    full_registry = {**(registry or {}), machine.name: machine}
    setup = {
        "root": machine.name,
        "machines": pin_machines(machine, full_registry),
        "input": copy.deepcopy(dict(input or {})),
        "context": copy.deepcopy(dict(context or {})),
        "options": _options_record(options),
    }
    with store.lease(run_id):  # creating a run, or replacing one with fresh=True, also needs the lease
        before = None
        if fresh or not store.exists(run_id):
            store.create(
                run_id,
                {
                    "t": "start",
                    "run": run_id,
                    **setup,
                    "secret": (options.secret or os.urandom(16)).hex(),
                    "package": __version__,
                    "time": time.time(),
                    "origin": dict(origin or {}),
                },
            )
        else:
            before = functools.partial(_rerun_records, run_id, setup)
        return _advance_leased(store, run_id, oracle, registry=full_registry, observer=observer, before=before)


def _rerun_records(run_id: str, setup: dict[str, Any], index: JournalIndex) -> list[dict[str, Any]]:
    """What a re-run of an existing run records: nothing, or the changed machines, host values and options."""
    if index.setup.get("root") != setup["root"]:
        raise RunStateError(
            f"run '{run_id}' belongs to machine '{index.setup.get('root')}', not "
            f"'{setup['root']}'; pick another id or start it fresh"
        )
    if all(index.setup.get(key) == value for key, value in setup.items()):
        return []
    return [{"t": "rerun", **setup, "time": time.time()}]


def resume(
    run_id: str,
    oracle: Oracle,
    *,
    store: RunStore,
    reply: Any = None,
    has_reply: bool = False,
    max_steps: int | None = None,
    max_tokens: int | None = None,
    resolve: tuple[str, Any] | None = None,
    registry: Mapping[str, Machine] | None = None,
    observer: Callable[[str, dict[str, Any]], None] | None = None,
) -> Outcome:
    """Continue a suspended (or in-doubt) run: inject a reply, raise budgets, or settle an in-doubt tool."""

    def prepare(index: JournalIndex) -> list[dict[str, Any]]:
        last = index.last or {}
        added: list[dict[str, Any]] = []
        status = "suspended" if last.get("t") == "suspend" else last.get("status")
        if status in ("done", "halt"):
            raise RunStateError(
                f"run '{run_id}' has already finished ({status}"
                f"{': ' + str(last.get('error')) if last.get('error') else ''}); "
                "nothing to resume"
            )
        if has_reply:
            if last.get("t") != "suspend" or not last.get("pos"):
                raise RunStateError(
                    f"run '{run_id}' is not waiting for a reply{' (it is ' + str(status) + ')' if status else ''}"
                )
            added.append(
                {
                    "t": "reply",
                    "pos": last["pos"],
                    "reply_to": last.get("reply_to"),
                    "value": reply,
                    "time": time.time(),
                }
            )
        if resolve is not None:
            action, value = resolve
            if status != "in_doubt":
                raise RunStateError(f"run '{run_id}' has no in-doubt tool call to resolve")
            if action not in RESOLVE_ACTIONS:
                raise RunStateError(f"--resolve takes completed=VALUE, retry or abort, not {action!r}")
            added.append(
                {"t": "resolve", "pos": last.get("pos"), "action": action, "value": value, "time": time.time()}
            )
        elif status == "in_doubt":
            raise RunStateError(
                f"run '{run_id}' is in doubt: tool '{last.get('tool')}' at state "
                f"'{last.get('at')}' may or may not have run; resume with --resolve "
                "completed=VALUE, --resolve retry or --resolve abort"
            )
        if registry is not None:
            root = index.setup.get("root") or ""
            if root in registry:
                pins = pin_machines(registry[root], registry)
                if pins != index.machines:
                    added.append({"t": "rerun", "machines": pins, "time": time.time()})
        raised: dict[str, Any] = {}
        if max_steps is not None:
            # More steps go to the machine that ran out: the root, or a called machine out of its own budget.
            ran_out = last.get("machine") if last.get("reason") == "budget-exhausted" else None
            if ran_out:
                raised["budgets"] = {ran_out: max_steps}
            else:
                raised["max_steps"] = max_steps
        if max_tokens is not None:
            raised["cost_budget"] = max_tokens
        if raised:
            added.append({"t": "resume", **raised, "time": time.time()})
        return added

    return advance(store, run_id, oracle, registry=registry, observer=observer, before=prepare)


def import_envelope(store: RunStore, header: Mapping[str, Any], records: list[dict[str, Any]]) -> str:
    """Put a verified envelope's journal into ``store`` (replacing what it held for that run)."""
    run_id = check_run_id(str(header["run_id"]))
    with store.lease(run_id):
        store.create(run_id, records[0])
        for record in records[1:]:
            store.append(run_id, record)
    last = JournalIndex.build(records).last or {}
    status = "suspended" if last.get("t") == "suspend" else last.get("status", "running")
    store.set_status(run_id, status, last.get("reason") or last.get("error"), last.get("at"))
    return run_id
