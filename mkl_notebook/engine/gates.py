"""Gate selection, the transition function (docs/language.md §3)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from ..lang import builtin_hooks
from ..lang.model import Gate, State
from .failure import StateFailure
from .oracle import HookRequest, JudgeAnswer, JudgeRequest, Oracle, OracleError, RunInterrupted, context_json
from .result import TraceStep


@dataclass(frozen=True, slots=True)
class GateScan:
    """What choosing a gate needs to know of the (sub-)run it happens in."""

    oracle: Oracle
    machine: str  # the running machine's name
    ctx: Mapping[str, Any]  # the run's context (read after each state's deposit)
    nonce: Callable[[str, Sequence[str]], str]  # a fence nonce for a position, never found in the given texts
    ask_model: Callable[[JudgeRequest], Any]  # asks a judge through the run, which notes what it cost


class GateOutcome(NamedTuple):
    """The gate that fired (its index in the full list), or why none did, with what the scan noted and spent."""

    position: int  # of the gate in the state's full gate list; -1 when none fired
    gate: Gate | None
    failure: str | None  # "no-gate-matched" or "judge-unparseable" when no gate fired
    annotations: TraceStep  # the trace keys the scan noted: gate_via, hook, judge_model, judge_none, …
    usage: tuple[int, int]
    judged_by_llm: bool
    via_hook: bool


def _ask(ask: Callable[[Any], Any], request: HookRequest | JudgeRequest, what: str) -> Any:
    """The answer ``ask`` gives; a failure of the host or the provider becomes the state's failure."""
    try:
        return ask(request)
    except OracleError as exc:
        raise StateFailure(exc.error, suspendable=exc.suspendable) from None
    except RunInterrupted:
        raise
    except Exception as exc:  # the host predicate (or the model client) raised: its message is the halt reason
        raise StateFailure(f"state-error: {what}{exc}") from None


def _call_hook(scan: GateScan, state: State, position: str, gate: Gate, index: int, output: str) -> bool:
    name = gate.hook or ""
    if scan.oracle.has_hook(name):
        request = HookRequest(
            position=f"{position}/hook@{index}",
            machine=scan.machine,
            state=state.id,
            name=name,
            context_json=context_json(scan.ctx),
            output=output,
        )
        return bool(_ask(scan.oracle.ask, request, ""))
    verdict = builtin_hooks.decide(name, scan.ctx, output)
    if verdict is None:
        raise StateFailure(f"state-error: hook: unknown hook '{name}' (register it with the run's hooks)")
    return verdict


def _judge(
    scan: GateScan,
    state: State,
    tier: str,
    position: str,
    batch: Sequence[tuple[int, Gate]],
    output: str,
    reasoning: str | None,
) -> JudgeAnswer:
    position = f"{position}/judge@{batch[0][0]}"
    ctx_json = context_json(scan.ctx)
    request = JudgeRequest(
        position=position,
        machine=scan.machine,
        state=state.id,
        tier=tier,
        conditions=tuple(gate.when for _, gate in batch),
        output=output,
        reasoning=reasoning,
        context_json=ctx_json,
        nonce=scan.nonce(position, (output, reasoning or "", ctx_json)),
    )
    answer = _ask(scan.ask_model, request, "judge: ")
    if not isinstance(answer, JudgeAnswer):
        raise StateFailure(f"state-error: the oracle answered a judge call with {type(answer).__name__}")
    return answer


def select_gate(
    scan: GateScan,
    state: State,
    tier: str,
    position: str,
    eligible: Sequence[tuple[int, Gate]],
    output: str,
    reasoning: str | None,
) -> GateOutcome:
    """Scan the eligible gates (index in the full list, gate) left to right and return the first that fires.

    ``position`` is the state's visit: hook and judge calls sit below it.
    """
    notes: TraceStep = {}
    spent_in = spent_out = judge_none = 0
    judged = False
    cursor = 0
    while cursor < len(eligible):
        index, gate = eligible[cursor]
        if gate.is_otherwise:
            notes["gate_via"] = "otherwise"
            break
        if gate.hook is not None:
            if _call_hook(scan, state, position, gate, index, output):
                notes["gate_via"] = "hook"
                notes["hook"] = gate.hook
                return _outcome(index, gate, None, notes, (spent_in, spent_out), judged, judge_none, via_hook=True)
            cursor += 1
            continue
        end = cursor
        while end < len(eligible) and eligible[end][1].is_prose:
            end += 1
        batch = eligible[cursor:end]
        answer = _judge(scan, state, tier, position, batch, output, reasoning)
        judged = True
        spent_in += answer.input_tokens
        spent_out += answer.output_tokens
        if answer.model:
            notes["judge_model"] = answer.model
        if answer.parse:
            notes["judge_parse"] = answer.parse
        choice = answer.choice
        if choice is not None and not 0 <= choice <= len(batch):
            answer_raw = f"out-of-range choice {choice} for n={len(batch) + 1}"
            choice = None
        else:
            answer_raw = answer.raw or "unparseable judge reply"
        if choice is None:
            notes["judge_fallback"] = True
            notes["judge_raw"] = answer_raw[:200]
            fallback = next(((i, g) for i, g in eligible[cursor:] if g.is_otherwise), None)
            if fallback is None:
                return _outcome(-1, None, "judge-unparseable", notes, (spent_in, spent_out), judged, judge_none)
            notes["gate_via"] = "otherwise"
            index, gate = fallback
            break
        if choice == len(batch):
            judge_none += 1
            cursor = end
            continue
        notes["gate_via"] = "llm"
        index, gate = batch[choice]
        break
    else:
        return _outcome(-1, None, "no-gate-matched", notes, (spent_in, spent_out), judged, judge_none)
    return _outcome(index, gate, None, notes, (spent_in, spent_out), judged, judge_none)


def _outcome(
    index: int,
    gate: Gate | None,
    failure: str | None,
    notes: TraceStep,
    usage: tuple[int, int],
    judged: bool,
    judge_none: int,
    *,
    via_hook: bool = False,
) -> GateOutcome:
    if judge_none:
        notes["judge_none"] = judge_none
    return GateOutcome(index, gate, failure, notes, usage, judged, via_hook)
