"""Two runs side by side: where they part, every decision and output that differs, and what each spent.

``mkl diff RUN_A RUN_B`` and ``%mkl diff`` both come here. A run is named as a store's (its id) or as a
notebook file's (``NOTEBOOK.ipynb:RUN``), so a run someone sent in a notebook can be held against one of the
store. Each is read by the roads every reader takes, writing nothing: a store's run as ``mkl trace`` reads it
(in a kernel, with the notebook's own copies reconciled first), a notebook's as ``mkl runs NOTEBOOK`` does (its
copies reconciled, and a copy no trusted key signed marked as such, never silently taken for one that is).

The comparison is of what a person would call the run's behaviour: the path of states, each gate that fired,
each output, each answer a person gave (the value and who gave it), and how the run ended. Tokens, cost and
time are shown for each run, never counted as a difference (a replayed run spends nothing).
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from itertools import zip_longest
from pathlib import Path
from typing import Any

from ..checkpoints import notebook_file as nbfile
from ..durable import runs as durable
from ..durable.reading import root_of
from ..durable.replay import JournalIndex
from ..durable.runs import Outcome
from ..durable.store_names import public_store
from ..durable.store_opening import reading_store
from ..durable.stores import UnknownRun
from ..engine.result import seconds_of
from .errors import UsageProblem, without_secrets
from .settings import default_store, store_location
from .trust import Keyring
from .workspace import Workspace

NOTEBOOK_SUFFIX = ".ipynb:"  # what parts a notebook's name from its run's in a RUN spec
_GATE_KEYS = ("gate", "to", "gate_via", "hook", "policy")  # what a step's decision is
Event = tuple[str, int, dict[str, Any]]  # a step ("step", its number, what counts) or an answer ("answer", after)


@dataclass(frozen=True)
class RunRef:
    """Where a run of a diff is read: a notebook file (``notebook``), else a store (``store``; None: the
    default, or in a kernel the kernel's own)."""

    run_id: str
    notebook: str | None = None
    store: str | None = None

    @property
    def shown(self) -> str:
        """How a person names it: ``F.ipynb:RUN``, or the run's id."""
        return f"{self.notebook}:{self.run_id}" if self.notebook is not None else self.run_id


def run_ref(spec: str, store: str | None = None) -> RunRef:
    """The run a RUN spec names: ``NOTEBOOK.ipynb:RUN`` (a run the notebook carries) or ``RUN`` (one of
    ``store``, which a notebook's run is not read from). A spec that names no run is refused in one line."""
    notebook, found, run_id = spec.partition(NOTEBOOK_SUFFIX)
    if not found:
        if not spec.strip():
            raise UsageProblem("name a run: RUN, or NOTEBOOK.ipynb:RUN for one a notebook carries")
        return RunRef(spec, store=store)
    if not notebook or not run_id:
        raise UsageProblem(f"{spec!r}: name a notebook and a run in it, as NOTEBOOK.ipynb:RUN")
    return RunRef(run_id, notebook=notebook + NOTEBOOK_SUFFIX[:-1])


@dataclass(frozen=True)
class Side:
    """One run of a diff as it was read: its outcome, where it is, and (a notebook's) who made it."""

    ref: RunRef
    outcome: Outcome
    where: str
    trusted: bool | None = None  # a file's copy: whether a key this person trusts signed it (None: a store's)
    made_by: str | None = None


def read_side(ref: RunRef, ws: Workspace | None = None) -> Side:
    """Run ``ref`` as its journal stands, reading only. ``ws`` is the workspace whose store a run named without
    one is read from (a kernel's: its notebook's copies reconciled first); without it, the default store."""
    if ref.notebook is not None:
        return _notebook_side(ref, ws.keyring if ws is not None else Keyring())
    if ref.store is None and ws is not None:
        return Side(ref, ws.read(ref.run_id), public_store(str(ws.settings.store)))
    location = store_location(ref.store) if ref.store is not None else default_store()
    shown = public_store(str(location))
    with reading_store(None, location) as store:
        if store is None or not store.exists(ref.run_id):
            raise UnknownRun(ref.run_id, shown)
        records = store.read(ref.run_id)
    return Side(ref, durable.read_run(ref.run_id, records), shown)


def _notebook_side(ref: RunRef, keyring: Keyring) -> Side:
    """A run a notebook file carries: its newest copy there (as ``mkl runs NOTEBOOK`` reads it), judged."""
    path = Path(str(ref.notebook))
    if not path.is_file():
        raise UsageProblem(f"{ref.notebook}: no such notebook")
    found = nbfile.find_run(path, ref.run_id)
    provenance = keyring.judge_history(found.records, found.seal)
    outcome = durable.read_run(ref.run_id, found.records)
    return Side(ref, outcome, f"{ref.notebook} ({found.where})", provenance.trusted, provenance.mark)


@dataclass
class RunDiff:
    """What :func:`diff_runs` found: each run's facts (``a``, ``b``), where they part, and what differs."""

    a: dict[str, Any]
    b: dict[str, Any]
    parted: dict[str, Any] | None = None  # the first step where they part (None: they never do)
    given: list[dict[str, Any]] = field(default_factory=list)  # what they were started with that differs
    decisions: list[dict[str, Any]] = field(default_factory=list)
    outputs: list[dict[str, Any]] = field(default_factory=list)

    @property
    def identical(self) -> bool:
        """Whether the runs were given the same and took the same path with the same decisions, outputs, answers
        and ending."""
        return self.parted is None and not self.given

    def as_dict(self) -> dict[str, Any]:
        """The diff as ``--json`` prints it and the views draw it."""
        return {
            "identical": self.identical,
            "a": self.a,
            "b": self.b,
            "parted": self.parted,
            "given": self.given,
            "decisions": self.decisions,
            "outputs": self.outputs,
        }


def diff_runs(a: RunRef, b: RunRef, ws: Workspace | None = None) -> RunDiff:
    """Runs ``a`` and ``b`` compared (each read by :func:`read_side`); nothing is called or written."""
    return compare(read_side(a, ws), read_side(b, ws))


def compare(a: Side, b: Side) -> RunDiff:
    """Two runs read, compared step by step (aligned by their paths of states, as ``difflib`` aligns lines)."""
    steps_a, steps_b = a.outcome.result.trace_with_open_call(), b.outcome.result.trace_with_open_call()
    answers_a, answers_b = a.outcome.result.answers, b.outcome.result.answers
    found = RunDiff(_facts(a), _facts(b))
    found.parted = _parting(a, b)
    found.given = _given(a, b)
    path_a, path_b = ([str(s.get("state")) for s in steps] for steps in (steps_a, steps_b))
    matcher = difflib.SequenceMatcher(None, path_a, path_b, autojunk=False)
    for op, a0, a1, b0, b1 in matcher.get_opcodes():
        if op != "equal":
            found.decisions.append(_path(steps_a, steps_b, a0, a1, b0, b1))
            continue
        for i, j in zip(range(a0, a1), range(b0, b1), strict=True):
            _step_differences(found, (steps_a[i], steps_b[j]), (i, j), (a.ref.shown, b.ref.shown))
    for answer_a, answer_b in zip(answers_a, answers_b, strict=False):
        found.decisions.extend(_answer_differences(answer_a, answer_b, steps_a))
    for extra, side, steps in (
        (answers_a[len(answers_b) :], "a", steps_a),
        (answers_b[len(answers_a) :], "b", steps_b),
    ):
        for answer in extra:
            other = "b" if side == "a" else "a"
            found.decisions.append(
                {**_at_answer(answer, steps), "what": "reply", side: _answer_text(answer), other: "(no answer)"}
            )
    found.decisions.sort(key=lambda d: (d.get("step_a") or d.get("step_b") or 0, d["what"] == "path"))
    if _value(a.outcome.result.result) != _value(b.outcome.result.result):
        found.outputs.append(_result_diff(a, b))
    return found


def _facts(side: Side) -> dict[str, Any]:
    """What the diff says of one run beside the other: where it is, how it ended, what it spent."""
    result = side.outcome.result
    times = [r["time"] for r in side.outcome.records if isinstance(r.get("time"), (int, float))]
    cost = result.cost_usd
    facts: dict[str, Any] = {
        "run": side.ref.run_id,
        "spec": side.ref.shown,
        "where": side.where,
        "machine": root_of(side.outcome.records) or None,
        "status": result.status,
        "error": without_secrets(result.error) if result.error else None,
        "at": result.at,
        "steps": len(result.trace),
        "answers": len(result.answers),
        "input_tokens": int(result.usage.get("input_tokens", 0)),
        "output_tokens": int(result.usage.get("output_tokens", 0)),
        "cost_usd": None if cost is None else round(cost, 8),
        "model_seconds": seconds_of(result.model_calls),
        "elapsed_seconds": round(max(times) - min(times), 3) if times else None,
    }
    if side.trusted is not None:
        facts.update(trusted=side.trusted, made_by=side.made_by)
    return facts


def _given(a: Side, b: Side) -> list[dict[str, Any]]:
    """What the runs were started with that differs: each value of their input and context (as last set, a
    resume may change them), and the version of the machine they ran (its source's sha256)."""
    setups = [JournalIndex.build(side.outcome.records) for side in (a, b)]
    found = []
    for part in ("input", "context"):
        values_a, values_b = (dict(index.setup.get(part) or {}) for index in setups)
        for key in sorted(set(values_a) | set(values_b), key=str):
            shown = [_value(values[key]) if key in values else "(not given)" for values in (values_a, values_b)]
            if shown[0] != shown[1]:
                found.append({"what": f"{part} {key}", "a": shown[0], "b": shown[1]})
    versions = [index.machines.get(str(index.setup.get("root")), {}).get("sha256") for index in setups]
    if versions[0] != versions[1]:
        shown = [f"sha256 {version[:12]}" if version else "(unknown)" for version in versions]
        found.append({"what": "machine version", "a": shown[0], "b": shown[1]})
    return found


def _events(side: Side) -> list[Event]:
    """A run's steps and answers in the order they happened: ("step", n, what) and ("answer", n, what), n the
    steps finished before it."""
    result = side.outcome.result
    events: list[Event] = []
    answers = list(result.answers)
    for n, step in enumerate(result.trace_with_open_call()):
        while answers and int(answers[0].get("after") or 0) <= n:
            events.append(("answer", n, _answer_key(answers.pop(0))))
        events.append(("step", n + 1, _step_key(step)))
    events.extend(("answer", int(answer.get("after") or 0), _answer_key(answer)) for answer in answers)
    return events


def _parting(a: Side, b: Side) -> dict[str, Any] | None:
    """The first step where the runs part, and what parts them there (None: they never do)."""
    steps_a, steps_b = a.outcome.result.trace_with_open_call(), b.outcome.result.trace_with_open_call()
    for event_a, event_b in zip_longest(_events(a), _events(b)):
        if event_a != event_b:
            n_a, n_b, what = _what_parts(event_a, event_b)
            return _parted_at(steps_a, steps_b, n_a, n_b, what)
    ends = [(s.outcome.result.status, s.outcome.result.at, _value(s.outcome.result.result)) for s in (a, b)]
    if ends[0] != ends[1]:
        return _parted_at(steps_a, steps_b, len(steps_a), len(steps_b), "ending")
    return None


def _what_parts(event_a: Event | None, event_b: Event | None) -> tuple[int, int, str]:
    """Of the first events of two runs that differ (None: the run has no more), the step of each where they part
    and what parts them: an answer given in one run and not the other, or given otherwise (its value, who gave
    it, the note beside it); a gate's decision or an output at the same state; else the path."""
    answers = [event for event in (event_a, event_b) if event is not None and event[0] == "answer"]
    if answers:
        n = answers[0][1]
        if len(answers) == 1:
            return n, n, "reply"
        key_a, key_b = answers[0][2], answers[1][2]
        what = "reply" if key_a["value"] != key_b["value"] else "answerer" if key_a["by"] != key_b["by"] else "note"
        return n, n, what
    if event_a is not None and event_b is not None and event_a[2]["state"] == event_b[2]["state"]:
        key_a, key_b = event_a[2], event_b[2]
        what = "gate" if any(key_a[k] != key_b[k] for k in _GATE_KEYS) else "output"
        return event_a[1], event_b[1], what
    n = min(event[1] for event in (event_a, event_b) if event is not None)
    return n, n, "path"


def _parted_at(steps_a: Sequence[Any], steps_b: Sequence[Any], n_a: int, n_b: int, what: str) -> dict[str, Any]:
    """Where the runs part: the step (1-based) of each, its state in each (None: the run had ended), and what."""

    def state(steps: Sequence[Any], n: int) -> str | None:
        return str(steps[n - 1].get("state")) if 0 < n <= len(steps) else None

    return {"step": min(n_a, n_b) or 1, "state_a": state(steps_a, n_a), "state_b": state(steps_b, n_b), "what": what}


def _step_key(step: Mapping[str, Any]) -> dict[str, Any]:
    """What of a step counts as the run's behaviour: its state, output (or branches), and the gate's decision."""
    return {
        "state": step.get("state"),
        "output": _value(step.get("branches", step.get("output"))),
        "sub": _behaviour(step.get("sub_trace")),
        **{key: step.get(key) for key in _GATE_KEYS},
    }


def _behaviour(sub_trace: Any) -> Any:
    """A call's steps as they count for the diff (each step's :func:`_step_key`, nothing of its cost or time);
    a fan-out's, one list per branch."""
    if isinstance(sub_trace, list):
        return [_behaviour(each) for each in sub_trace]
    return _step_key(sub_trace) if isinstance(sub_trace, Mapping) else sub_trace


def _answer_key(answer: Mapping[str, Any]) -> dict[str, Any]:
    return {"value": _value(answer.get("value")), "by": answer.get("by"), "note": answer.get("note")}


def _value(value: Any) -> str:
    """A value as text, to compare and to show: a string as it is, anything else as JSON."""
    if value is None:
        return ""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)


def _gate_text(step: Mapping[str, Any]) -> str:
    """A step's decision in a phrase: "the reply promises a refund → send" (the gate's ``when``, where it went)."""
    gate = step.get("gate")
    to = step.get("to")
    return f"{gate if gate is not None else 'no gate'} → {to if to is not None else 'halt'}"


def _step_differences(
    found: RunDiff, steps: tuple[Mapping[str, Any], Mapping[str, Any]], at: tuple[int, int], names: tuple[str, str]
) -> None:
    """What differs between two steps at the same state: the gate's decision, the output (with its diff)."""
    (step_a, step_b), (i, j) = steps, at
    where = {"step_a": i + 1, "step_b": j + 1, "state": step_a.get("state")}
    if any(step_a.get(key) != step_b.get(key) for key in _GATE_KEYS):
        found.decisions.append({**where, "what": "gate", "a": _gate_text(step_a), "b": _gate_text(step_b)})
    out_a, out_b = (_value(s.get("branches", s.get("output"))) for s in (step_a, step_b))
    if out_a != out_b:
        found.outputs.append({**where, "a": out_a, "b": out_b, "diff": unified(out_a, out_b, *names)})


def _path(steps_a: Sequence[Any], steps_b: Sequence[Any], a0: int, a1: int, b0: int, b1: int) -> dict[str, Any]:
    """Steps one run took and the other did not, at this point of their paths."""
    return {
        "step_a": a0 + 1 if a1 > a0 else None,
        "step_b": b0 + 1 if b1 > b0 else None,
        "state": None,
        "what": "path",
        "a": " → ".join(str(s.get("state")) for s in steps_a[a0:a1]) or "(no step)",
        "b": " → ".join(str(s.get("state")) for s in steps_b[b0:b1]) or "(no step)",
    }


def _at_answer(answer: Mapping[str, Any], steps: Sequence[Any]) -> dict[str, Any]:
    """Where an answer was given: after the step whose gate asked (its number in both runs, and its state)."""
    after = int(answer.get("after") or 0)
    asked = steps[after - 1].get("state") if 0 < after <= len(steps) else answer.get("state")
    return {"step_a": after or None, "step_b": after or None, "state": asked}


def _answer_text(answer: Mapping[str, Any]) -> str:
    return _value(answer.get("value"))


def _answer_differences(
    answer_a: Mapping[str, Any], answer_b: Mapping[str, Any], steps_a: Sequence[Any]
) -> list[dict[str, Any]]:
    """What differs between the n-th answers of the two runs: the reply, who gave it (and the note beside it)."""
    where = {**_at_answer(answer_a, steps_a), "step_b": int(answer_b.get("after") or 0) or None}
    found = []
    if _value(answer_a.get("value")) != _value(answer_b.get("value")):
        found.append({**where, "what": "reply", "a": _answer_text(answer_a), "b": _answer_text(answer_b)})
    if answer_a.get("by") != answer_b.get("by"):
        found.append({**where, "what": "answerer", "a": answer_a.get("by"), "b": answer_b.get("by")})
    if answer_a.get("note") != answer_b.get("note"):
        found.append({**where, "what": "note", "a": answer_a.get("note"), "b": answer_b.get("note")})
    return found


def unified(a: str, b: str, name_a: str, name_b: str) -> str:
    """A readable diff of two texts, line by line (``difflib``'s unified form, no context lost to size)."""
    lines = difflib.unified_diff(a.splitlines(), b.splitlines(), fromfile=name_a, tofile=name_b, lineterm="", n=2)
    return "\n".join(lines)


def _result_diff(a: Side, b: Side) -> dict[str, Any]:
    """The runs' results, when they differ, as an output of their own."""
    text_a, text_b = _value(a.outcome.result.result), _value(b.outcome.result.result)
    return {
        "step_a": None,
        "step_b": None,
        "state": "result",
        "a": text_a,
        "b": text_b,
        "diff": unified(text_a, text_b, a.ref.shown, b.ref.shown),
    }
