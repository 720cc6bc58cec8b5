"""Produce calls (docs/language.md §2, §5): a generative state's prompt, the model's answer, and its output.

An ``ask_human`` state may answer ``ASK: …`` instead: the person's reply is added to the conversation
and the model is asked again, until it answers or the run suspends to wait for the person.
"""

from __future__ import annotations

from typing import Any

from ..lang import files
from ..lang.interpolate import fmt, render
from ..lang.model import Machine, State
from .failure import StateFailure as _Fail
from .oracle import (
    AwaitingHuman,
    HumanReply,
    OracleError,
    ProduceAnswer,
    ProduceRequest,
    ReplyRequest,
    RunInterrupted,
)
from .step import _Asked, _Executed, _Shared, _Suspended, _Taint


def produce(
    shared: _Shared,
    machine: Machine,
    state: State,
    ctx: dict[str, Any],
    taint: _Taint,
    feedback: str,
    position: str,
    *,
    sampled: bool = False,
    extra_external: bool = False,
    in_branch: bool = False,
) -> _Executed:
    """Execute the generative ``state`` of ``machine`` at ``position``: render, ask the model, parse.

    ``feedback`` is a repair gate's text for the prompt; ``sampled`` a ``sample:`` branch (a warmer
    temperature); ``extra_external`` an ``over:`` item that is external; ``in_branch`` a fan-out branch,
    which never asks a person.
    """
    call_position = position + "/produce"
    prompt = render(state.template, ctx, taint.tainted, nonce=lambda texts: shared.fences.nonce(call_position, texts))
    asking = state.ask_human or shared.options.ask_human  # the option lets every generative state ask
    request = ProduceRequest(
        position=call_position,
        machine=machine.name,
        state=state.id,
        tier=machine.tier_of(state),
        structure=state.contract,
        execution=state.execution,
        user=prompt.text + feedback,
        fenced=prompt.fenced,
        reason=state.reason,
        temperature=0.8 if sampled else 0.4,
        ask_human=asking,
    )
    answer = _ask_produce(shared, request)
    if asking:
        answer, usage, rounds = _converse(shared, machine.name, state, request, answer, position, in_branch)
    else:
        usage, rounds = (answer.input_tokens, answer.output_tokens), 0
    value: Any = answer.text
    if state.parse is not None:
        value = _parse_output(state.parse, value, usage)
    external = extra_external or rounds > 0 or not taint.external.isdisjoint(prompt.read_keys)
    return _Executed(
        value,
        reasoning=answer.reasoning if state.reason else None,
        usage=usage,
        external=external,
        truncated=answer.truncated,
    )


def _ask_produce(shared: _Shared, request: ProduceRequest) -> ProduceAnswer:
    try:
        answer = shared.ask_model(request)
    except (_Fail, _Suspended, RunInterrupted):
        raise
    except OracleError as exc:
        raise _Fail(exc.error, suspendable=exc.suspendable) from None
    except Exception as exc:  # a host callable raised: its message is the halt reason
        raise _Fail(f"state-error: {exc}") from None
    if not isinstance(answer, ProduceAnswer):
        raise _Fail(f"state-error: the oracle answered a produce call with {type(answer).__name__}")
    return answer


def _converse(
    shared: _Shared,
    machine: str,
    state: State,
    request: ProduceRequest,
    answer: ProduceAnswer,
    position: str,
    in_branch: bool,
) -> tuple[ProduceAnswer, tuple[int, int], int]:
    """An ask_human state: while the model asks (``ASK: …``), get the person's reply and ask again.

    Returns the final answer, the tokens of every round, and how many rounds a person answered.
    """
    spent_in, spent_out = answer.input_tokens, answer.output_tokens
    rounds = 0
    while True:
        question = _question(answer.text)
        if question is None:
            return answer, (spent_in, spent_out), rounds
        usage = (spent_in, spent_out)
        if in_branch:
            raise _Fail(f"state-error: ask: {question}", usage=usage)  # branches never suspend
        if rounds >= shared.options.ask_limit:
            raise _Fail("state-error: ask-limit", policy="state-error", usage=usage)
        reply = _person_answers(shared, machine, state, question, f"{position}/ask@r{rounds}", usage)
        rounds += 1
        request = request._replace(
            position=f"{position}/produce~r{rounds}",
            conversation=(*request.conversation, ("assistant", answer.text), ("user", reply)),
        )
        answer = _ask_produce(shared, request)
        spent_in += answer.input_tokens
        spent_out += answer.output_tokens


def _person_answers(
    shared: _Shared, machine: str, state: State, question: str, position: str, usage: tuple[int, int]
) -> str:
    """The person's reply to a model's question; suspends the run when none is recorded yet."""
    request = ReplyRequest(position=position, machine=machine, state=state.id, ask=None, reply_to="", question=question)
    try:
        reply = shared.oracle.ask(request)
    except AwaitingHuman:
        raise _Asked(question, position, usage) from None
    except OracleError as exc:
        raise _Fail(exc.error) from None
    shared.answered(position, machine, state.id, question, None, reply)
    return fmt(reply.value if isinstance(reply, HumanReply) else reply)


def _question(text: str) -> str | None:
    """The model's question when its reply's first line is ``ASK: …`` (ask_human states only)."""
    first = text.lstrip().split("\n", 1)[0]
    if first[:4].upper() != "ASK:":
        return None
    return first[4:].strip() or "(the model asked without saying what)"


def _strip_fence(text: str) -> str:
    text = text.strip()
    if text.startswith("```"):
        text = text[3:]
        if text.endswith("```"):
            text = text[:-3]
        if "\n" in text:
            text = text.split("\n", 1)[1]
    return text.strip()


def _parse_output(mode: str, text: str, usage: tuple[int, int]) -> Any:
    try:
        value = files.parse_json(_strip_fence(text))
    except ValueError as exc:
        raise _Fail(
            f"state-error: parse-{mode}: output is not valid JSON ({exc})", policy="state-error", usage=usage
        ) from None
    if mode == "list" and not isinstance(value, list):
        raise _Fail(
            f"state-error: parse-list: output is JSON but not an array (got {type(value).__name__})",
            policy="state-error",
            usage=usage,
        )
    return value
