"""Gate selection, the transition function (LANGUAGE.md §3)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..lang.interpolate import fmt
from ..lang.model import Gate, State
from .failure import StateFailure
from .oracle import HookRequest, JudgeAnswer, JudgeRequest, OracleError, RunInterrupted, context_json

if TYPE_CHECKING:
    from .runner import _MachineRun

BUILTIN_HOOKS = {"always_true": True, "always_false": False}


@dataclass(slots=True)
class GateOutcome:
    index: int = -1
    gate: Gate | None = None
    failure: str | None = None  # "no-gate-matched" or "judge-unparseable" when no gate fired
    annotations: dict[str, Any] = field(default_factory=dict)
    usage: tuple[int, int] = (0, 0)
    judged_by_llm: bool = False
    via_hook: bool = False


def _builtin_hook(name: str, ctx: dict[str, Any]) -> bool | None:
    if name in BUILTIN_HOOKS:
        return BUILTIN_HOOKS[name]
    for prefix, equal in (("eq:", True), ("neq:", False)):
        if name.startswith(prefix):
            key, sep, expected = name[len(prefix) :].partition(":")
            if not sep:
                return None
            actual = fmt(ctx.get(key)).strip()
            return (actual == expected.strip()) is equal
    return None


def _call_hook(run: _MachineRun, state: State, gate: Gate, index: int, output: str, position: str) -> bool:
    name = gate.hook or ""
    oracle = run.shared.oracle
    if oracle.has_hook(name):
        request = HookRequest(
            position=f"{position}/hook@{index}",
            machine=run.machine.name,
            state=state.id,
            name=name,
            context_json=context_json(run.ctx),
            output=output,
        )
        try:
            return bool(oracle.ask(request))
        except OracleError as exc:
            raise StateFailure(exc.error, suspendable=exc.suspendable) from None
        except RunInterrupted:
            raise
        except Exception as exc:  # the host predicate raised: its message is the halt reason
            raise StateFailure(f"state-error: {exc}") from None
    verdict = _builtin_hook(name, run.ctx)
    if verdict is None:
        raise StateFailure(f"state-error: hook: unknown hook '{name}' (register it with the run's hooks)")
    return verdict


def _judge(
    run: _MachineRun, state: State, batch: list[tuple[int, Gate]], output: str, reasoning: str | None, position: str
) -> JudgeAnswer:
    judge_position = f"{position}/judge@{batch[0][0]}"
    ctx_json = context_json(run.ctx)
    nonce = run.nonce(judge_position, (output, reasoning or "", ctx_json))
    # (position, machine, state, tier, conditions, output, reasoning, context_json, nonce)
    request = JudgeRequest(
        judge_position,
        run.machine.name,
        state.id,
        run.plans[state.id].tier,
        tuple([gate.when for _, gate in batch]),
        output,
        reasoning,
        ctx_json,
        nonce,
    )
    try:
        answer = run.shared.oracle.ask(request)
    except OracleError as exc:
        raise StateFailure(exc.error, suspendable=exc.suspendable) from None
    except RunInterrupted:
        raise
    except Exception as exc:
        raise StateFailure(f"state-error: judge: {exc}") from None
    if not isinstance(answer, JudgeAnswer):
        raise StateFailure(f"state-error: the oracle answered a judge call with {type(answer).__name__}")
    return answer


def select_gate(
    run: _MachineRun,
    state: State,
    eligible: list[tuple[int, Gate]],
    output: str,
    reasoning: str | None,
    value: Any,
    position: str,
) -> GateOutcome:
    """Scan the eligible gates left to right and return the first that fires."""
    outcome = GateOutcome()
    notes = outcome.annotations
    spent_in = spent_out = 0
    judge_none = 0
    scan = 0
    while scan < len(eligible):
        index, gate = eligible[scan]
        if gate.is_otherwise:
            notes["gate_via"] = "otherwise"
            outcome.index, outcome.gate = index, gate
            break
        if gate.hook is not None:
            if _call_hook(run, state, gate, index, output, position):
                notes["gate_via"] = "hook"
                notes["hook"] = gate.hook
                outcome.index, outcome.gate, outcome.via_hook = index, gate, True
                break
            scan += 1
            continue
        end = scan
        while end < len(eligible) and eligible[end][1].is_prose:
            end += 1
        batch = eligible[scan:end]
        answer = _judge(run, state, batch, output, reasoning, position)
        outcome.judged_by_llm = True
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
            fallback = next(((i, g) for i, g in eligible[scan:] if g.is_otherwise), None)
            if fallback is None:
                outcome.failure = "judge-unparseable"
                break
            notes["gate_via"] = "otherwise"
            outcome.index, outcome.gate = fallback
            break
        if choice == len(batch):
            judge_none += 1
            scan = end
            continue
        notes["gate_via"] = "llm"
        outcome.index, outcome.gate = batch[choice]
        break
    else:
        outcome.failure = "no-gate-matched"
    if judge_none:
        notes["judge_none"] = judge_none
    outcome.usage = (spent_in, spent_out)
    return outcome
