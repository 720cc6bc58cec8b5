"""What one step of a run hands back, and what every run of one run tree shares.

:class:`_Shared` holds the run tree's oracle, options, fences and records (the answers people gave,
the model calls made); :class:`_Taint` is one run's taint bookkeeping (docs/language.md §6);
:class:`_Executed` is what executing a state, or one fan-out branch, produced.  :class:`_Asked` and
:class:`_Suspended` are the signals that end a step early: a model asked a person something, or a
called machine suspended.  :func:`_add_cost` and :func:`_unfinished_call` fill in trace steps.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..errors import MklError
from ..lang.model import Machine, State
from .options import RunOptions
from .oracle import HumanReply, JudgeAnswer, JudgeRequest, Oracle, ProduceAnswer, ProduceRequest
from .result import ModelCall, RunResult, TraceStep, cost_of
from .taint import Fences


class _Asked(MklError):
    """The model asked the person something; the run suspends until they answer."""

    def __init__(self, question: str, position: str, usage: tuple[int, int]) -> None:
        super().__init__(question)
        self.question = question
        self.position = position
        self.usage = usage


class _Suspended(MklError):
    """A nested call suspended; the whole run surfaces the innermost suspension."""

    def __init__(self, result: RunResult) -> None:
        super().__init__(result.error)
        self.result = result


@dataclass(slots=True)
class _Executed:
    """What executing a state (or one fan-out branch) produced."""

    value: Any
    reasoning: str | None = None
    usage: tuple[int, int] = (0, 0)
    sub_trace: list[Any] | None = None  # a call's trace; for a fan-out, one trace per branch that ran a sub-run
    external: bool = False
    truncated: bool = False
    route: str | None = None  # an on_error matcher sends the run here, bypassing the gates
    reasonings: list[str | None] | None = None  # a fan-out of a ``reason: true`` state: one per branch


@dataclass
class _Shared:
    """What every (sub-)run of one run tree shares."""

    oracle: Oracle
    registry: Mapping[str, Machine]
    options: RunOptions
    secret: bytes
    fences: Fences = field(init=False)
    root_trace: list[TraceStep] = field(default_factory=list)  # the root run's finished steps
    answers: list[dict[str, Any]] = field(default_factory=list)  # every person's answer, in order
    model_calls: list[ModelCall] = field(default_factory=list)  # every model answer used, as it came
    _calls_lock: threading.Lock = field(default_factory=threading.Lock)  # branches note their calls at once

    def __post_init__(self) -> None:
        self.fences = Fences(self.secret)

    def ask_model(self, request: ProduceRequest | JudgeRequest) -> Any:
        """A produce or judge answer, streamed to the observer as it arrives when there is one; noted."""
        observer = self.options.observer
        if observer is None:
            answer = self.oracle.ask(request)
        else:

            def partial(text: str) -> None:
                observer(
                    "partial",
                    {
                        "kind": request.kind,
                        "machine": request.machine,
                        "state": request.state,
                        "position": request.position,
                        "text": text,
                    },
                )

            answer = self.oracle.stream(request, partial)
        if isinstance(answer, (ProduceAnswer, JudgeAnswer)):
            call = ModelCall(
                request.position,
                request.kind,
                answer.model,
                answer.input_tokens,
                answer.output_tokens,
                answer.cost_usd,
                answer.seconds,
            )
            with self._calls_lock:
                self.model_calls.append(call)
        return answer

    def spent(self) -> float | None:
        """What the run tree's model calls cost so far, None while unknown (see :func:`cost_of`)."""
        with self._calls_lock:
            return cost_of(self.model_calls)

    def over_spend(self) -> str | None:
        """Why the run may not make another model call under ``max_cost``, or None while it may."""
        limit = self.options.max_cost
        if limit is None:
            return None
        with self._calls_lock:
            calls = list(self.model_calls)
        unpriced = next((call.model or "(unnamed)" for call in calls if call.cost_usd is None), None)
        if unpriced is not None:
            return f"spend-unknown: the price of model '{unpriced}' is not known, so a cost limit cannot be kept"
        return "spend-exhausted" if sum(call.cost_usd or 0.0 for call in calls) >= limit else None

    def answered(
        self,
        position: str,
        machine: str,
        state: str,
        question: str | None,
        reply_to: str | None,
        reply: Any,
        about: str | None = None,
    ) -> None:
        """Note a person's answer (with who, when and how, when the oracle says) for the run's result."""
        answer = reply if isinstance(reply, HumanReply) else HumanReply(reply)
        self.answers.append(
            {
                "after": len(self.root_trace),
                "position": position,
                "machine": machine,
                "state": state,
                "question": question,
                "reply_to": reply_to,
                "value": answer.value,
                "by": answer.by,
                "established": answer.established,
                "claimed": answer.claimed,
                "via": answer.via,
                "at": answer.at,
                "about": about,
                **({"note": answer.note} if answer.note is not None else {}),
            }
        )


@dataclass
class _Taint:
    """A run's tainted context keys (not the author's literals) and, of those, the external ones (§6)."""

    tainted: set[str] = field(default_factory=set)
    external: set[str] = field(default_factory=set)


def _add_cost(step: TraceStep, usage: tuple[int, int]) -> None:
    """Add ``usage`` to the tokens a trace step records (it has a ``cost`` only once that is not zero)."""
    if usage[0] or usage[1]:
        cost = step.get("cost") or {"input_tokens": 0, "output_tokens": 0}
        step["cost"] = {
            "input_tokens": cost["input_tokens"] + usage[0],
            "output_tokens": cost["output_tokens"] + usage[1],
        }


def _unfinished_call(state: State, tier: str, inner: RunResult) -> TraceStep:
    """The call step a suspension inside a called machine leaves open: what that machine did so far."""
    return {
        "step": None,
        "state": state.id,
        "tier": tier,
        "sub_trace": inner.trace_with_open_call(),
        "suspended_in": state.call,
    }
