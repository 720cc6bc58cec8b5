"""Journal records: one typed shape and one builder per kind, and what kind a record is.

A journal is an append-only list of JSON objects, each with a kind ``t``:

- ``start``: run id, the setup (root machine, pinned machines, host values, options) and
  the per-run fence secret.
- ``answer``: an oracle answer at a position, with the fingerprint of its request (or the
  error a host tool or hook raised there).
- ``intent``: a non-idempotent tool is about to be called at a position.
- ``invalidated``: a recorded answer no longer matches its request (the machine or its
  input changed); the call is made anew.
- ``reply``: a person's answer at a gate's position.
- ``policy``: a question's deadline passed and the run's rule decided it (reject, approve, or escalate to
  another approver): never a person's answer, and kept apart from them.
- ``suspend`` / ``finish``: how the latest advance of the run ended.
- ``resume``: budgets raised for the next advance.
- ``resolve``: a person settled a tool call left in doubt (or, as a ``retry`` valued ``NOT_SENT``, the run
  withdrew the intent of a call that never left it).
- ``rerun``: the run was started again with a changed setup.
- ``notify`` / ``notified``: a notification of the run's question is about to be sent on a channel (its
  idempotency key, the channel's digest, the question), and how that send ended (``sent`` or ``failed``).
  Neither changes the run: a replay reads past them.
- ``trace``: the run's trace id and the id of its own span, written the first time the run is advanced with
  trace export on, so that every later advance (a resume, another process) exports into the same trace.
  The run reads past it.
- ``sign``: whoever appended the records since the previous ``sign`` (or the start) vouches for
  them: their key, the name they sign as, and a signature over the history up to here.

Every record a journal gets is built here, in the shape :mod:`durable.record_types` gives its kind.
The keys are those the journals already on disk use, so old stores and notebooks read and replay unchanged.
What records say is read back in :mod:`durable.reading` (answers, replies, a run's status); their canonical
JSON and chain digests are in :mod:`durable.chain`, and a start record's options are written and read in
:mod:`durable.journaled_options`.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

from ..engine.oracle import ESTABLISHED_BY, JudgeAnswer, ProduceAnswer
from ..engine.result import RunResult
from .record_types import (
    AnswerRecord,
    FinishRecord,
    IntentRecord,
    InvalidatedRecord,
    NotifiedRecord,
    NotifyRecord,
    PlaceTag,
    PolicyRecord,
    ReplyRecord,
    RerunRecord,
    ResolveAction,
    ResolveRecord,
    ResumeRecord,
    Setup,
    SignRecord,
    StartRecord,
    SuspendRecord,
    TraceRecord,
)

FORMAT = "mkl-run/1"
NOTE_MAX = 4000  # characters of a person's note beside a reply: a longer one is refused, and nothing journaled

ENDINGS = ("suspend", "finish")  # the kinds that end an advance
# The kinds no one can give again if a power cut took them: a person's answer, a person's settlement of a call
# in doubt, and the intent written before a non-idempotent tool runs (lost, the tool could run twice).
PRECIOUS = ("reply", "resolve", "intent", "policy")
SETUP_KEYS = ("root", "machines", "input", "context", "options")
NOTIFYING = ("notify", "notified")  # the kinds a notification of a question journals: the run reads past them


# -- builders -------------------------------------------------------------------------------


def start_record(run_id: str, setup: Setup, *, secret: bytes, package: str, origin: Mapping[str, Any]) -> StartRecord:
    return {
        "t": "start",
        "run": run_id,
        **setup,
        "secret": secret.hex(),
        "package": package,
        "time": time.time(),
        "origin": dict(origin),
    }


STARTED_WITH = ("script", "tools", "model")  # what a start record's origin keeps of the answers a run drew on


def started_with(start: Mapping[str, Any] | None) -> dict[str, str]:
    """The script file, tools file and model a run was started with, as its start record's ``origin`` keeps
    them (each only when given): what a command continuing the run names."""
    origin = (start or {}).get("origin")
    if not isinstance(origin, Mapping):
        return {}
    return {key: origin[key] for key in STARTED_WITH if isinstance(origin.get(key), str) and origin[key]}


def rerun_record(changes: Mapping[str, Any]) -> RerunRecord:
    """The parts of the setup that changed (all of it, or only the pinned machines)."""
    changed = {key: changes[key] for key in SETUP_KEYS if key in changes}
    return cast(RerunRecord, {"t": "rerun", **changed, "time": time.time()})


def encode_answer(answer: ProduceAnswer | JudgeAnswer) -> dict[str, Any]:
    """A model's answer as the JSON an ``answer`` record carries (its tokens go in ``usage``)."""
    if isinstance(answer, ProduceAnswer):
        data: dict[str, Any] = {"text": answer.text}
        if answer.reasoning is not None:
            data["reasoning"] = answer.reasoning
        if answer.truncated:
            data["truncated"] = True
        if answer.model:
            data["model"] = answer.model
        return data
    data = {"choice": answer.choice}
    for key in ("raw", "parse", "model"):
        value = getattr(answer, key)
        if value is not None:
            data[key] = value
    return data


def model_answer_record(position: str, fingerprint: str, answer: ProduceAnswer | JudgeAnswer) -> AnswerRecord:
    """A produce or judge answer, with the tokens it cost when it cost any."""
    kind = "produce" if isinstance(answer, ProduceAnswer) else "judge"
    record: AnswerRecord = {
        "t": "answer",
        "pos": position,
        "fp": fingerprint,
        "kind": kind,
        "answer": encode_answer(answer),
    }
    if answer.input_tokens or answer.output_tokens:
        record["usage"] = [answer.input_tokens, answer.output_tokens]
    if answer.cost_usd is not None:
        record["cost_usd"] = answer.cost_usd
    if answer.seconds is not None:
        record["seconds"] = round(answer.seconds, 3)
    return record


def host_answer_record(
    position: str,
    fingerprint: str,
    kind: str,
    value: Any,
    *,
    name: str,
    effect: str | None = None,
    resolved: bool = False,
) -> AnswerRecord:
    """A hook's verdict or a tool's observation (``resolved``: the value a person gave for an in-doubt call)."""
    record: AnswerRecord = {
        "t": "answer",
        "pos": position,
        "fp": fingerprint,
        "kind": kind,
        "answer": {"value": value},
        "name": name,
    }
    if effect is not None:
        record["effect"] = effect
    if resolved:
        record["resolved"] = True
    return record


def failed_answer_record(
    position: str, fingerprint: str, kind: str, *, name: str, error: str, effect: str | None = None
) -> AnswerRecord:
    """A host tool or hook raised: the failure is the answer, replayed as that failure."""
    record: AnswerRecord = {"t": "answer", "pos": position, "fp": fingerprint, "kind": kind, "name": name}
    record["error"] = error
    if effect is not None:
        record["effect"] = effect
    return record


def failed_call_record(position: str, fingerprint: str, kind: str, error: str, *, suspendable: bool) -> AnswerRecord:
    """A model call that was made and failed (a provider's error): replayed as that failure, with no call."""
    record: AnswerRecord = {"t": "answer", "pos": position, "fp": fingerprint, "kind": kind, "error": error}
    if suspendable:
        record["suspendable"] = True
    return record


def intent_record(position: str, fingerprint: str, name: str) -> IntentRecord:
    return {"t": "intent", "pos": position, "fp": fingerprint, "name": name}


def invalidated_record(position: str, old: str | None, new: str) -> InvalidatedRecord:
    return {"t": "invalidated", "pos": position, "old": old, "new": new}


def reply_record(
    position: str,
    reply_to: str | None,
    value: Any,
    *,
    by: str | None = None,
    via: str | None = None,
    question: str | None = None,
    about: str | None = None,
    note: str | None = None,
    established: str | None = None,
    claimed: str | None = None,
    approvers: Sequence[str] = (),
) -> ReplyRecord:
    """A person's answer at ``position``, with who gave it, through what, to which question, about what
    (the content they were shown: their answer replays only while it is unchanged), and the ``note`` they
    wrote beside it (kept apart from the value, which stays exactly the decision).

    ``established`` says how ``by`` is known (a key of :data:`ESTABLISHED_BY`; None: ``by`` is only claimed);
    ``claimed`` is a name the replier gave beside an established one (it never replaces it); ``approvers`` is
    the rule the reply was taken under (who the run let answer; none: anyone)."""
    if established is not None and established not in ESTABLISHED_BY:
        raise ValueError(f"unknown way a name is established: {established!r}")
    record: ReplyRecord = {"t": "reply", "pos": position, "reply_to": reply_to, "value": value}
    if about is not None:
        record["about"] = about
    if note is not None:
        record["note"] = note
    if by:
        record["by"] = by
    if by and established:
        record["established"] = established
    if claimed and (claimed != by or not established):
        record["claimed"] = claimed
    if via:
        record["via"] = via
    if question:
        record["question"] = question
    if approvers:
        record["approvers"] = sorted(approvers)
    record["time"] = time.time()
    return record


def policy_record(
    position: str,
    question: str,
    action: str,
    rule: Mapping[str, Any],
    digest: str,
    *,
    reply_to: str | None = None,
    set_by: str | None = None,
    about: str | None = None,
    escalate_to: str | None = None,
) -> PolicyRecord:
    """A deadline's decision of ``question`` (at ``position``) under the run's ``rule`` (with its ``digest``):
    ``action`` reject or approve gives the gate that value; escalate asks again with ``escalate_to`` as the one
    approver. ``set_by`` is who set the rule (the run's starter)."""
    record: PolicyRecord = {
        "t": "policy",
        "pos": position,
        "question": question,
        "action": action,
        "rule": dict(rule),
        "digest": digest,
        "time": time.time(),
    }
    if action in ("approve", "reject"):
        record["value"] = action
        record["reply_to"] = reply_to
    if escalate_to:
        record["escalate_to"] = escalate_to
    if set_by:
        record["set_by"] = set_by
    if about is not None:
        record["about"] = about
    return record


def sign_record(key: str, by: str, signature: str, at: float) -> SignRecord:
    """The signature of whoever appended the records since the previous ``sign`` record (built by a signer,
    :meth:`checkpoints.seals.Signer.endorse`, over the chain digest of every record before it)."""
    return {"t": "sign", "key": key, "by": by, "sig": signature, "time": at}


def trace_record() -> TraceRecord:
    """A new trace for the run: a random W3C trace id and the id of the run's own span."""
    return {"t": "trace", "trace_id": os.urandom(16).hex(), "span_id": os.urandom(8).hex(), "time": time.time()}


def notify_record(key: str, channel: str, question: str) -> NotifyRecord:
    """The intent to send notification ``key`` of ``question`` on the channel whose digest is ``channel``."""
    return {"t": "notify", "key": key, "channel": channel, "question": question, "time": time.time()}


def notified_record(key: str, reason: str | None = None) -> NotifiedRecord:
    """How sending notification ``key`` ended: sent (the receiver accepted it), or failed for ``reason``."""
    record: NotifiedRecord = {
        "t": "notified",
        "key": key,
        "outcome": "sent" if reason is None else "failed",
        "time": time.time(),
    }
    if reason is not None:
        record["reason"] = reason
    return record


def resume_record(
    *,
    max_steps: int | None = None,
    cost_budget: int | None = None,
    max_cost: float | None = None,
    budgets: Mapping[str, int] | None = None,
    retry: Sequence[str] | bool = False,
) -> ResumeRecord:
    """What a resume (or a re-run) changes before the run goes on: budgets, and the failed calls to make again."""
    record: ResumeRecord = {"t": "resume", "time": time.time()}
    if max_steps is not None:
        record["max_steps"] = max_steps
    if cost_budget is not None:
        record["cost_budget"] = cost_budget
    if max_cost is not None:
        record["max_cost"] = max_cost
    if budgets:
        record["budgets"] = dict(budgets)
    if retry:
        record["retry"] = True if retry is True else list(retry)
    return record


NOT_SENT = "not sent"  # the value of the retry journaled for an effect's call that never left this process


def resolve_record(position: str | None, action: ResolveAction, value: Any) -> ResolveRecord:
    return {"t": "resolve", "pos": position, "action": action, "value": value, "time": time.time()}


@dataclass(frozen=True)
class Doubt:
    """A non-idempotent tool call that was started and never recorded as finished."""

    position: str
    tool: str
    state: str


def ending_record(
    result: RunResult,
    calls: Mapping[str, int],
    doubt: Doubt | None = None,
    place: PlaceTag | None = None,
    failed: str | None = None,
) -> SuspendRecord | FinishRecord:
    """How this advance of the run ended: a suspension, a finish, or a finish in doubt; ``place`` is the
    notebook cell it was asked for from, ``failed`` the position of the failed call it stopped on."""
    record: SuspendRecord | FinishRecord
    if doubt is not None:
        record = {
            "t": "finish",
            "status": "in_doubt",
            "error": result.error,
            "at": result.at,
            "pos": doubt.position,
            "tool": doubt.tool,
            "calls": dict(calls),
            "time": time.time(),
        }
    elif result.status == "suspended":
        record = {
            "t": "suspend",
            "reason": result.error,
            "at": result.at,
            "ask": result.ask,
            "reply_to": result.reply_to,
            "question": result.question,
            "pos": result.pending,
            "calls": dict(calls),
            "time": time.time(),
        }
        if result.machine:  # suspended inside a called machine: where more steps must go
            record["machine"] = result.machine
        if result.about is not None:  # what the question is about: part of its identity
            record["about"] = result.about
        if result.pinned is not None:  # what the run was set up with: part of its identity too
            record["pinned"] = result.pinned
    else:
        record = {
            "t": "finish",
            "status": result.status,
            "error": result.error,
            "at": result.at,
            "calls": dict(calls),
            "time": time.time(),
        }
    if failed is not None and doubt is None:
        record["failed"] = failed
    if place is not None:
        record["place"] = place
    return record


def same_ending(last: Mapping[str, Any] | None, closing: Mapping[str, Any]) -> bool:
    """Whether two ending records say the same, apart from when and with how many calls."""
    if last is None:
        return False
    volatile = ("time", "calls", "place")
    return {k: v for k, v in last.items() if k not in volatile} == {
        k: v for k, v in closing.items() if k not in volatile
    }


# -- kinds ---------------------------------------------------------------------------------


def kind_of(record: Mapping[str, Any]) -> str | None:
    """A record's kind (``start``, ``answer``, ``reply``, ``suspend``, …); None when it names none."""
    kind = record.get("t")
    return kind if isinstance(kind, str) else None


def is_ending(record: Mapping[str, Any]) -> bool:
    """Whether ``record`` ends an advance of the run (a ``suspend`` or ``finish``)."""
    return kind_of(record) in ENDINGS


def is_precious(record: Mapping[str, Any]) -> bool:
    """Whether ``record`` is synced to disk before it is used, whatever the store's durability (:data:`PRECIOUS`)."""
    return kind_of(record) in PRECIOUS


def is_notifying(record: Mapping[str, Any]) -> bool:
    """Whether ``record`` is about a notification of a question (:data:`NOTIFYING`): it changes nothing in the run."""
    return kind_of(record) in NOTIFYING


def is_trace(record: Mapping[str, Any]) -> bool:
    """Whether ``record`` names the run's trace (it changes nothing in the run)."""
    return kind_of(record) == "trace"


def is_sign(record: Mapping[str, Any]) -> bool:
    """Whether ``record`` is a signature (it vouches for the records before it and changes nothing in the run)."""
    return kind_of(record) == "sign"
