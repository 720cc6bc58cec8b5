"""Deadlines: when a question a person has not answered in time is decided by the run's rule, and what says so.

A run may carry a deadline rule in its options (``deadline`` seconds after a question is asked, ``on_timeout``
reject, approve or ``escalate:NAME``, and ``remind_after`` seconds). Once a waiting question's deadline has
passed, whoever holds the run's lease first journals a ``policy`` record (:func:`records.policy_record`): the
rule, its digest and who set it, never a person's name. Reject and approve are then the gate's answer, as a
reply would be; an escalation asks the same question again with its one approver, under a fresh deadline
that rejects (the safe default: an escalation is never escalated again).

Everything here reads a journal and the clock it is given; nothing here writes.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from ..errors import UserError
from . import records as rec
from .chain import canonical
from .reading import escalated_to, run_state

REJECT = "reject"  # what a deadline decides when the rule names nothing else: the safe default
ESCALATE = "escalate:"
_UNITS = (("d", 86400), ("h", 3600), ("m", 60), ("s", 1))


def duration_text(seconds: int) -> str:
    """A whole number of seconds as the largest unit that divides it says it: ``1s``, ``30m``, ``2h``, ``1d``."""
    for unit, size in _UNITS:
        if seconds and seconds % size == 0:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


@dataclass(frozen=True)
class DeadlineRule:
    """A run's deadline rule, as its options journal it."""

    deadline: int | None = None  # seconds after a question is asked
    on_timeout: str = REJECT  # reject, approve or escalate:NAME
    remind_after: int | None = None  # seconds after a question is asked

    def as_json(self) -> dict[str, Any]:
        """The rule as a policy record holds it (what its digest is taken of)."""
        rule: dict[str, Any] = {"deadline": self.deadline, "on_timeout": self.on_timeout}
        if self.remind_after is not None:
            rule["remind_after"] = self.remind_after
        return rule

    @property
    def digest(self) -> str:
        """The sha256 of the rule's canonical JSON."""
        return hashlib.sha256(canonical(self.as_json()).encode("utf-8")).hexdigest()

    def __str__(self) -> str:
        """``deadline 1s, on timeout reject`` (with ``, remind after 30m`` when there is a reminder)."""
        said = f"deadline {duration_text(self.deadline)}, " if self.deadline is not None else ""
        said += f"on timeout {self.on_timeout}"
        return said + (f", remind after {duration_text(self.remind_after)}" if self.remind_after is not None else "")


def rule_in(options: Mapping[str, Any]) -> DeadlineRule | None:
    """The deadline rule run options hold (journaled or not); None when they set neither deadline nor reminder."""
    deadline, remind = options.get("deadline"), options.get("remind_after")
    if not isinstance(deadline, int) and not isinstance(remind, int):
        return None
    on_timeout = options.get("on_timeout")
    return DeadlineRule(
        deadline if isinstance(deadline, int) else None,
        on_timeout if isinstance(on_timeout, str) and on_timeout else REJECT,
        remind if isinstance(remind, int) else None,
    )


def rule_of_journal(records: Sequence[Mapping[str, Any]]) -> DeadlineRule | None:
    """The deadline rule in force in a journal: the options of its start, or of the latest re-run that set them."""
    for record in reversed(records):
        if rec.kind_of(record) in ("start", "rerun") and "options" in record:
            options = record.get("options")
            return rule_in(options) if isinstance(options, Mapping) else None
    return None


def set_by(records: Sequence[Mapping[str, Any]]) -> str | None:
    """Who set a run's rule: its starter, as the signature over its first records names them (None: unsigned)."""
    first = next((record for record in records if rec.is_sign(record)), None)
    by = first.get("by") if first is not None else None
    return by if isinstance(by, str) and by else None


def policy_said(record: Mapping[str, Any]) -> str:
    """What a policy record says of its rule: ``deadline 1s, on timeout reject, sha256:1a2b3c4d, set by alice``."""
    rule = record.get("rule")
    said = str(rule_in(rule) or "") if isinstance(rule, Mapping) else ""
    digest = record.get("digest")
    said += f", sha256:{str(digest)[:8]}" if digest else ""
    return said + f", set by {record.get('set_by') or 'an unsigned start'}"


def _policies(records: Sequence[Mapping[str, Any]], question: str) -> list[Mapping[str, Any]]:
    return [r for r in records if rec.kind_of(r) == "policy" and r.get("question") == question]


def decided(records: Sequence[Mapping[str, Any]], question: str | None) -> Mapping[str, Any] | None:
    """The policy record that decided ``question`` (approve or reject), or None when no deadline decided it."""
    if question is None:
        return None
    return next((r for r in _policies(records, question) if r.get("action") != "escalate"), None)


def asked_at(records: Sequence[Mapping[str, Any]], question: str) -> float | None:
    """When ``question`` was asked: the time of the first suspension on it (an escalation asks it again: then
    the escalation's time)."""
    escalations = [r for r in _policies(records, question) if r.get("action") == "escalate"]
    if escalations:
        return _time(escalations[-1])
    run_id = str(records[0].get("run")) if records else ""
    for record in records:
        if rec.kind_of(record) == "suspend" and run_state([dict(record)]).question_id(run_id) == question:
            return _time(record)
    return None


def _time(record: Mapping[str, Any]) -> float | None:
    at = record.get("time")
    return float(at) if isinstance(at, (int, float)) and not isinstance(at, bool) else None


class Due(NamedTuple):
    """A waiting question whose deadline has passed: what the rule decides, and since when it is due."""

    question: str
    position: str
    action: str  # reject, approve or escalate
    escalate_to: str | None
    rule: DeadlineRule
    since: float


def due_at(records: Sequence[Mapping[str, Any]]) -> float | None:
    """When the deadline of the question a journal waits on passes (None: it waits on none, has no deadline,
    or a deadline decided it already)."""
    if not records:
        return None
    question = run_state(records).question_id(str(records[0].get("run")))
    rule = rule_of_journal(records)
    if question is None or rule is None or rule.deadline is None or decided(records, question) is not None:
        return None
    asked = asked_at(records, question)
    return None if asked is None else asked + rule.deadline


def due(records: Sequence[Mapping[str, Any]], now: float) -> Due | None:
    """The decision the deadline of the question a journal waits on makes at ``now``; None when none is due."""
    at = due_at(records)
    rule = rule_of_journal(records)
    if at is None or rule is None or now < at:
        return None
    state = run_state(records)
    question = str(state.question_id(str(records[0].get("run"))))
    action, name = rule.on_timeout, None
    if escalated_to(records) is not None:
        action = REJECT  # an escalated question is not escalated again
    elif action.startswith(ESCALATE):
        action, name = "escalate", action[len(ESCALATE) :]
    return Due(question, str(state.position), action, name, rule, at)


class Reminder(NamedTuple):
    """A reminder that fell due: of which question, and since when (sending it is the notifier's work)."""

    question: str
    since: float


def reminder_due(records: Sequence[Mapping[str, Any]], now: float) -> Reminder | None:
    """The reminder of the question a journal waits on, when its ``remind_after`` has passed by ``now`` and no
    deadline decided it; None otherwise. Nothing is journaled for it: whoever sends reminders asks this."""
    if not records:
        return None
    question = run_state(records).question_id(str(records[0].get("run")))
    rule = rule_of_journal(records)
    if question is None or rule is None or rule.remind_after is None or decided(records, question) is not None:
        return None
    asked = asked_at(records, question)
    if asked is None or now < asked + rule.remind_after:
        return None
    return Reminder(question, asked + rule.remind_after)


class NotDue(UserError, ValueError):
    """The question's deadline has not passed, or it no longer waits (answered, or decided already): nothing
    is journaled."""


def policy_records(run_id: str, records: Sequence[Mapping[str, Any]], now: float) -> list[rec.PolicyRecord]:
    """What deciding run ``run_id``'s due question journals (read under its lease, so that two deciders record
    one decision): its policy record; :class:`NotDue` when nothing is due."""
    decision = due(records, now)
    if decision is None:
        raise NotDue(f"run '{run_id}' has no question past its deadline: nothing was recorded")
    state = run_state(records)
    return [
        rec.policy_record(
            decision.position,
            decision.question,
            decision.action,
            decision.rule.as_json(),
            decision.rule.digest,
            reply_to=state.reply_to,
            set_by=set_by(records),
            about=state.about,
            escalate_to=decision.escalate_to,
        )
    ]
