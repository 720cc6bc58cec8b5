"""Reading journal records back: the answer a record holds, who gave a reply, and where a run stands.

:mod:`durable.records` types and builds every record; what reads them back lives here, because the two
together outgrew one module: the oracle answer an ``answer`` or ``reply`` record holds, how a reply's name is
known, and what a whole journal says (the one reading of a run's status, its replies, what it cost, where its
unsigned records begin). What kind a record is (``kind_of``, ``is_ending``) is still said beside its type.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, cast

from ..engine.oracle import ESTABLISHED_BY, HumanReply, JudgeAnswer, ProduceAnswer
from ..engine.result import question_id
from .records import NOTIFYING, ReplyRecord, is_ending, is_sign, is_trace, kind_of

Status = Literal["running", "done", "halt", "suspended", "in_doubt"]


def established_how(reply: Mapping[str, Any]) -> str | None:
    """How a reply record's ``by`` is established (a key of :data:`ESTABLISHED_BY`); None when only the
    replier's word says it (every reply journaled before identities were established)."""
    how = reply.get("established")
    return how if isinstance(how, str) and how in ESTABLISHED_BY and reply.get("by") else None


def claimed_name(reply: Mapping[str, Any]) -> str | None:
    """The name a reply record holds only as the replier's claim: its ``claimed``, or, when nothing
    established its ``by`` (an older journal), that."""
    claimed = reply.get("claimed")
    if isinstance(claimed, str) and claimed:
        return claimed
    by = reply.get("by")
    return str(by) if by and established_how(reply) is None else None


def decode_answer(kind: str, record: Mapping[str, Any]) -> Any:
    """The oracle answer an ``answer`` (or ``reply``, or a deadline's ``policy``) record holds."""
    if kind == "reply" and kind_of(record) == "policy":  # decided by the run's rule: no one's name
        return HumanReply(record.get("value"), via="policy", at=record.get("time"))
    if kind == "reply":
        note = record.get("note")
        return HumanReply(
            record.get("value"),
            by=record.get("by"),
            via=record.get("via"),
            at=record.get("time"),
            note=note if isinstance(note, str) else None,
            established=established_how(record),
            claimed=claimed_name(record),
        )
    data = record.get("answer") or {}
    tokens_in, tokens_out = (record.get("usage") or [0, 0])[:2]
    if kind == "produce":
        return ProduceAnswer(
            text=data["text"],
            reasoning=data.get("reasoning"),
            input_tokens=tokens_in,
            output_tokens=tokens_out,
            truncated=bool(data.get("truncated")),
            model=data.get("model"),
            cost_usd=_number(record.get("cost_usd")),
            seconds=_number(record.get("seconds")),
        )
    if kind == "judge":
        return JudgeAnswer(
            choice=data.get("choice"),
            raw=data.get("raw"),
            parse=data.get("parse"),
            input_tokens=tokens_in,
            output_tokens=tokens_out,
            model=data.get("model"),
            cost_usd=_number(record.get("cost_usd")),
            seconds=_number(record.get("seconds")),
        )
    return data.get("value")


def spent(records: Sequence[Mapping[str, Any]]) -> float | None:
    """What every model call a journal records cost in US dollars, those whose answers an edit later
    replaced included (they were paid for); None when there was none or any one's price is unknown."""
    costs = [
        record.get("cost_usd")
        for record in records
        if record.get("t") == "answer" and record.get("kind") in ("produce", "judge") and "error" not in record
    ]
    amounts = [_number(cost) for cost in costs]
    if not amounts or any(amount is None for amount in amounts):
        return None
    return sum(amount or 0.0 for amount in amounts)


def _number(value: Any) -> float | None:
    """A recorded amount (a cost, a duration), or None where there is none."""
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


@dataclass(frozen=True)
class RunState:
    """Where a run stands, as its journal says: the one reading of a run's status."""

    status: Status
    error: str | None = None  # the halt error, the suspension's reason, or what is in doubt
    at: str | None = None
    ask: str | None = None
    reply_to: str | None = None
    question: str | None = None
    position: str | None = None  # of the awaited reply, or of the tool call in doubt
    machine: str | None = None  # the called machine a suspension sits in
    tool: str | None = None  # the tool call in doubt
    about: str | None = None  # what the awaited reply is about, as the person is shown it
    pinned: str | None = None  # a digest of the setup the question was asked in
    failed: str | None = None  # the position of the failed call the last advance stopped on

    @property
    def finished(self) -> bool:
        return self.status in ("done", "halt")

    @property
    def waits_for_reply(self) -> bool:
        """Suspended at a question a person (or a model's question) must answer."""
        return self.status == "suspended" and self.position is not None

    def __str__(self) -> str:
        """The status as a sentence's end: ``done``, ``suspended: budget-exhausted``."""
        return f"{self.status}: {self.error}" if self.error else self.status

    @property
    def shown(self) -> str:
        """The question's text as a person sees it: the author's ``ask``, or the model's question."""
        return self.ask or self.question or ""

    def question_id(self, run_id: str) -> str | None:
        """The id of the question run ``run_id`` waits on; None when it waits for no reply."""
        if not self.waits_for_reply or self.position is None:
            return None
        return question_id(run_id, self.position, self.shown, self.about, self.pinned)


def state_of(ending: Mapping[str, Any] | None) -> RunState:
    """The run state an ending (``suspend`` / ``finish``) record describes; none yet: running."""
    if ending is None:
        return RunState("running")
    if ending.get("t") == "suspend":
        return RunState(
            "suspended",
            error=ending.get("reason"),
            at=ending.get("at"),
            ask=ending.get("ask"),
            reply_to=ending.get("reply_to"),
            question=ending.get("question"),
            position=ending.get("pos"),
            machine=ending.get("machine"),
            about=ending.get("about") if isinstance(ending.get("about"), str) else None,
            pinned=ending.get("pinned") if isinstance(ending.get("pinned"), str) else None,
            failed=ending.get("failed") if isinstance(ending.get("failed"), str) else None,
        )
    status = ending.get("status")
    return RunState(
        cast(Status, status if status in ("done", "halt", "in_doubt") else "halt"),
        error=ending.get("error"),
        at=ending.get("at"),
        position=ending.get("pos"),
        tool=ending.get("tool"),
        failed=ending.get("failed") if isinstance(ending.get("failed"), str) else None,
    )


def unsigned_from(records: Sequence[Mapping[str, Any]]) -> int:
    """Where the records no ``sign`` record vouches for begin (``len(records)``: every one is signed)."""
    for position in range(len(records) - 1, -1, -1):
        if is_sign(records[position]):
            return position + 1
    return 0


def replies(records: Iterable[Mapping[str, Any]]) -> list[ReplyRecord]:
    """The person's answers among ``records``, in order."""
    return [cast(ReplyRecord, record) for record in records if kind_of(record) == "reply"]


def decisions(records: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The answers among ``records``, in order: each person's reply, and each decision a deadline made by the
    run's rule (a ``policy`` record that gives the gate its value, marked ``via`` policy, with no one's name)."""
    return [
        dict(record) if kind_of(record) == "reply" else {**record, "via": "policy"}
        for record in records
        if kind_of(record) == "reply" or (kind_of(record) == "policy" and "value" in record)
    ]


def trace_of(records: Iterable[Mapping[str, Any]]) -> tuple[str, str] | None:
    """The run's trace id and the id of its own span (hex), as its ``trace`` record names them; None when its
    journal has none (a run never advanced with trace export on, or journaled before traces were)."""
    for record in records:
        if is_trace(record) and isinstance(record.get("trace_id"), str) and isinstance(record.get("span_id"), str):
            return record["trace_id"], record["span_id"]
    return None


def gates_decided(records: Sequence[Mapping[str, Any]], since: int) -> list[dict[str, Any]]:
    """Each human gate decided by the records from ``since`` on, told as a trace's approval span tells it: the
    question, who answered and how that is established, the name claimed, the decision, whether a note was
    written (never the note), the sha256 of what the person was shown, when it was asked and decided, and
    whether a person or the run's deadline rule (``policy``) decided."""
    asked: dict[tuple[Any, Any], float] = {}  # when the run first waited at a position, about what it showed
    for record in records[:since]:
        if kind_of(record) == "suspend" and isinstance(record.get("time"), (int, float)):
            asked.setdefault((record.get("pos"), record.get("about")), record["time"])
    decided = []
    for record in records[since:]:
        kind = kind_of(record)
        if kind not in ("reply", "policy"):
            continue
        question = record.get("question")
        about = record.get("about")
        person = kind == "reply"
        decided.append(
            {
                "question": question,
                "position": record.get("pos"),
                "decided_by": "person" if person else "policy",
                "answerer": record.get("by") if person else None,
                "established": (established_how(record) or "claimed") if person and record.get("by") else None,
                "claimed": claimed_name(record) if person else None,
                "decision": record.get("value") if person else record.get("value", record.get("action")),
                "note": bool(record.get("note")),
                "subject_sha256": hashlib.sha256(about.encode()).hexdigest() if isinstance(about, str) else None,
                "asked_at": asked.get((record.get("pos"), about)),
                "decided_at": record.get("time"),
                "rule": record.get("digest") if not person else None,
            }
        )
    return decided


def approvers_in(options: Mapping[str, Any]) -> tuple[str, ...]:
    """Who may answer a run's questions, as the options in force in its journal say (empty: anyone)."""
    names = options.get("approvers")
    return tuple(sorted(name for name in names if isinstance(name, str))) if isinstance(names, list) else ()


def escalated_to(records: Sequence[Mapping[str, Any]]) -> str | None:
    """The one approver the question a journal waits on was escalated to by its deadline (None: it was not)."""
    if not records:
        return None
    question = run_state(records).question_id(str(records[0].get("run")))
    escalation = next(
        (
            r
            for r in reversed(records)
            if kind_of(r) == "policy" and r.get("question") == question and r.get("action") == "escalate"
        ),
        None,
    )
    name = escalation.get("escalate_to") if question is not None and escalation is not None else None
    return name if isinstance(name, str) else None


def approvers_of_journal(records: Sequence[Mapping[str, Any]]) -> tuple[str, ...]:
    """Who may answer the questions of the run a journal holds: the one approver its deadline escalated the
    waiting question to, else the options of its start, or of the latest re-run that set them anew (empty:
    anyone)."""
    escalated = escalated_to(records)
    if escalated is not None:
        return (escalated,)
    for record in reversed(records):
        if kind_of(record) in ("start", "rerun") and "options" in record:
            options = record.get("options")
            return approvers_in(options) if isinstance(options, Mapping) else ()
    return ()


def root_of(records: Sequence[Mapping[str, Any]]) -> str:
    """The name of the machine of the run a journal holds (its start record says; a re-run keeps it)."""
    return str(records[0].get("root") or "") if records else ""


def run_state(records: Sequence[Mapping[str, Any]]) -> RunState:
    """Where the run a journal holds stands: its latest ``suspend`` or ``finish`` record says."""
    ending = next((r for r in reversed(records) if is_ending(r)), None)
    return state_of(ending)


# -- notifications of a question (sent by app.notifying) ---------------------------------------

MAX_FAILURES = 5  # failed sends of one notification before senders give up on it (the runs list says so)


def notification_key(question: str, channel_digest: str) -> str:
    """The idempotency key of the notification of ``question`` on the channel named by ``channel_digest``."""
    return "mkl-" + hashlib.sha256(f"{question}\n{channel_digest}".encode()).hexdigest()[:40]


def channels_of_journal(records: Sequence[Mapping[str, Any]]) -> tuple[str, ...]:
    """The channels (journaled entries: digest and redacted form) a run's options name, as its start or its
    latest re-run that set options says."""
    for record in reversed(records):
        if kind_of(record) in ("start", "rerun") and isinstance(record.get("options"), Mapping):
            entries = record["options"].get("notify")
            return tuple(sorted(e for e in entries if isinstance(e, str))) if isinstance(entries, list) else ()
    return ()


@dataclass
class Sending:
    """What the journal says of one notification (by key): intents, failures, and whether it was sent."""

    intents: int = 0
    failures: list[str] = field(default_factory=list)
    sent: bool = False


def sendings(records: Iterable[Mapping[str, Any]]) -> dict[str, Sending]:
    """Every notification a journal tells of, by key."""
    found: dict[str, Sending] = {}
    for record in records:
        kind = kind_of(record)
        if kind not in NOTIFYING:
            continue
        one = found.setdefault(str(record.get("key")), Sending())
        if kind == "notify":
            one.intents += 1
        elif record.get("outcome") == "sent":
            one.sent = True
        else:
            one.failures.append(str(record.get("reason") or "failed"))
    return found


def notification_failed(records: Sequence[Mapping[str, Any]]) -> str | None:
    """Why a notification of the question a run waits on failed (its latest failure), when one is not sent."""
    run_id = str(records[0].get("run")) if records else ""
    question = run_state(records).question_id(run_id)
    if question is None:
        return None
    known = sendings(records)
    for entry in channels_of_journal(records):
        now = known.get(notification_key(question, entry.partition(" ")[0]))
        if now is not None and not now.sent and now.failures:
            gave_up = " (given up)" if len(now.failures) >= MAX_FAILURES else ""
            shown = entry.partition(" ")[2]
            return f"{shown}: {now.failures[-1]}{gave_up}"
    return None
