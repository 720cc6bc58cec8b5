"""What a run returns (docs/language.md §7)."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, NamedTuple, TypedDict

Status = Literal["done", "halt", "suspended", "in_doubt"]


class TraceStep(TypedDict, total=False):
    """One step of a run's trace (docs/language.md §7, *Trace steps*): every key the runner may set.

    At runtime a step is a plain dict; which keys it holds depends on the state and on how it ended,
    and they come in the order the runner sets them.
    """

    step: int | None  # the run's step count after the state's charge (None in a call step left open)
    state: str
    tier: str  # the state's model tier
    untrusted_control_flow: bool  # an effect tool ran (or was refused) after an externally steered decision
    branches: list[str]  # a fan-out: every branch's output as text, in branch order (instead of ``output``)
    reasonings: list[str | None]  # a fan-out of a ``reason: true`` state: every branch's reasoning
    output: str  # the value the state deposited, as text
    reasoning: str  # a ``reason: true`` state's reasoning
    # A call's steps (each a TraceStep); of a fan-out, one such list per branch that ran a sub-run.
    sub_trace: list[Any]
    suspended_in: str | None  # a call step left open by a suspension inside it: the called machine
    cost: dict[str, int]  # the state's tokens (input_tokens, output_tokens), when not zero
    truncated: bool  # the model stopped at its length limit
    gate: str | None  # the ``when`` of the gate that fired ("on_error" for an on_error route); None when none
    gate_via: str  # how the gate was chosen: hook, llm, otherwise or on_error
    hook: str  # the hook that fired the gate
    judge_model: str  # the model that judged
    judge_parse: str  # how the judge's reply was read when it was not clean JSON: bare or last-number
    judge_fallback: bool  # the judge's reply was unreadable: the otherwise gate, if any, fired
    judge_raw: str  # why the judge's reply was unreadable (first 200 characters)
    judge_none: int  # how many batches the judge answered *none*
    decision_tainted: bool  # a model judged while external values were in scope (docs/language.md §6)
    policy: str | None  # the fired gate's policy (route for an on_error route), or why the run halted here
    to: str | None  # the next state or END; None when the run halts here
    cost_usd: float  # what the state's model calls cost, nested calls and branches included, when known
    seconds: float  # how long the state's timed model calls took


class ModelCall(NamedTuple):
    """One produce or judge answer a run used, live or replayed: what it cost and how long it took."""

    position: str
    kind: str  # "produce" or "judge"
    model: str | None
    input_tokens: int
    output_tokens: int
    cost_usd: float | None  # None when the model's price is unknown
    seconds: float | None  # None when the call was not timed (scripted answers)


def cost_of(calls: Sequence[ModelCall]) -> float | None:
    """What ``calls`` cost in US dollars; None when there were none or any one's price is unknown (never a guess)."""
    if not calls or any(call.cost_usd is None for call in calls):
        return None
    return sum(call.cost_usd or 0.0 for call in calls)


def seconds_of(calls: Sequence[ModelCall]) -> float | None:
    """How long the timed ``calls`` took, one after another; None when none was timed."""
    timed = [call.seconds for call in calls if call.seconds is not None]
    return sum(timed) if timed else None


def most_visited(visits: Mapping[str, int]) -> tuple[str, int] | None:
    """The state entered most (the first of equals, in entry order) with its count, when that is twice or more."""
    if not visits:
        return None
    state, count = max(visits.items(), key=lambda item: item[1])
    return (state, count) if count >= 2 else None


NO_MODEL_REASON = "no model is configured"  # how the reason of a suspension for want of a model begins


def question_id(run_id: str, position: str, shown: str, about: str | None = None, pinned: str | None = None) -> str:
    """The identity of a question a run waits on: the run, where it asks, the text the person is shown,
    what the question is about (the output the gate decided on), when it is about one, and what the run
    was set up with (``pinned``: a digest of its machines' sources, input and context).

    A reply names it, so that it answers exactly that question, about exactly that content, in exactly
    that machine, and no other: an edit of the machine (an amount in a later step, say) makes a new question.
    """
    key = f"{run_id}\x00{position}\x00{shown}" + (f"\x00{about}" if about is not None else "")
    key += f"\x00{pinned}" if pinned is not None else ""
    key_bytes = key.encode("utf-8", "surrogatepass")
    return "q-" + hashlib.blake2b(key_bytes, digest_size=6).hexdigest()


@dataclass
class RunResult:
    status: Status
    error: str | None = None
    result: Any = None
    at: str | None = None
    usage: dict[str, int] = field(default_factory=lambda: {"input_tokens": 0, "output_tokens": 0})
    trace: list[TraceStep] = field(default_factory=list)
    context: dict[str, Any] = field(default_factory=dict)
    diagnosis: dict[str, Any] | None = None
    ask: str | None = None
    reply_to: str | None = None
    question: str | None = None  # a model-initiated question (suspension reason "asked")
    visits: dict[str, int] = field(default_factory=dict)  # entries per state of the root run
    pending: str | None = None  # position of the awaited reply, for hosts that answer it
    machine: str | None = None  # of a suspension inside a called machine: that machine (``at`` is its state)
    # Of a suspension inside a called machine: the call step left open, with the steps the called machine
    # took so far as its sub_trace (not part of ``trace``, which holds finished steps only).
    pending_step: TraceStep | None = None
    # Every person's answer the run used, in order: after (finished root steps before it), position (of the
    # question), machine, state, question (the text shown), reply_to, value, by, via, at, about (what it answered).
    answers: list[dict[str, Any]] = field(default_factory=list)
    # Every model answer the whole run tree used, in the order they came.
    model_calls: list[ModelCall] = field(default_factory=list)
    # Of a suspension at an escalate gate: what the gate decided on, as the person is shown it (the output).
    about: str | None = None
    # Answers a person gave before that replay no longer answers, because what they answered changed: each
    # {position, value, by, via, time, before, now} (set by the journal that replays the run).
    asked_again: list[dict[str, Any]] = field(default_factory=list)
    # Of a suspension at a question: a digest of what the run was set up with (machines, input, context),
    # part of the question's identity (set by the journal that replays the run).
    pinned: str | None = None
    # A digest of the setup the run went on in (whether or not it waits): what the questions it asked and had
    # answered since the last edit were named by.
    setup: str | None = None
    # The flags the run was started with that a command continuing it names (script, tools, model: the paths
    # and model as given), from its start record (set by the journal that replays the run).
    started_with: dict[str, str] = field(default_factory=dict)

    @property
    def cost_usd(self) -> float | None:
        """What the run's model calls cost in US dollars, None when unknown (see :func:`cost_of`)."""
        return cost_of(self.model_calls)

    @property
    def waits_for_model(self) -> bool:
        """Suspended because no model is configured where it was advanced (it goes on where one is, or with a
        script): not a question for a person, nor a reason of the machine's."""
        return self.status == "suspended" and (self.error or "").startswith(NO_MODEL_REASON)

    @property
    def waits_for_person(self) -> bool:
        """Suspended at a question (an escalate gate's, or a model's) that a person must answer."""
        return self.status == "suspended" and self.pending is not None

    def question_id(self, run_id: str) -> str | None:
        """The id of the question this run (of id ``run_id``) waits on, None when it waits for no person."""
        if not self.waits_for_person or self.pending is None:
            return None
        return question_id(run_id, self.pending, self.ask or self.question or "", self.about, self.pinned)

    def trace_with_open_call(self) -> list[TraceStep]:
        """The finished steps, then the call a suspension inside a called machine left open, if any."""
        return [*self.trace, *([self.pending_step] if self.pending_step else [])]

    def as_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "status": self.status,
            "error": self.error,
            "result": self.result,
            "at": self.at,
            "usage": dict(self.usage),
            "trace": self.trace,
            "context": self.context,
        }
        for key in ("diagnosis", "ask", "reply_to", "question"):
            value = getattr(self, key)
            if value is not None:
                data[key] = value
        return data
