"""The shape of a journal read from a file someone sent: every record's fields, checked by type.

A checkpoint's digest says that its records hang together, not who wrote them: anyone can edit a
field and recompute it. So before a journal from a file is imported or replayed, each record is
checked against the shape its builder in :mod:`records` gives it, and a misshapen one is refused
in one line naming the record and the field.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import fields
from typing import Any

from ..durable.journaled_options import JOURNALED_OPTIONS
from ..durable.records import NOTE_MAX, kind_of
from ..engine.options import RunOptions
from ..engine.oracle import ESTABLISHED_BY

Check = Callable[[Any], bool]
_HEX = re.compile(r"^(?:[0-9a-f]{2})*$")


def _text(value: Any) -> bool:
    return isinstance(value, str)


def _established(value: Any) -> bool:
    """How a reply's ``by`` is established: one of the known ways (see ``engine.oracle.ESTABLISHED_BY``)."""
    return value in ESTABLISHED_BY


def _maybe_text(value: Any) -> bool:
    return value is None or isinstance(value, str)


def _note(value: Any) -> bool:
    """A person's note beside a reply: text, no longer than a note may be when it is given."""
    return isinstance(value, str) and len(value) <= NOTE_MAX


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _whole(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _mapping(value: Any) -> bool:
    return isinstance(value, dict)


def _origin(value: Any) -> bool:
    """Where a run was started from: at most the path of its machine file, and the script file, tools file
    and model it was started with, each as text."""
    keys = {"path", "script", "tools", "model"}
    return isinstance(value, dict) and set(value) <= keys and all(_text(text) for text in value.values())


def _flag(value: Any) -> bool:
    return isinstance(value, bool)


def _retry(value: Any) -> bool:
    """Which failed calls a resume makes again: ``true`` (all of them) or a list of positions."""
    return value is True or (isinstance(value, list) and all(_text(item) for item in value))


def _anything(value: Any) -> bool:
    return True


def _one_of(*allowed: str) -> Check:
    return lambda value: value in allowed


def _counts(value: Any) -> bool:
    return isinstance(value, dict) and all(isinstance(k, str) and _whole(v) for k, v in value.items())


def _pins(value: Any) -> bool:
    return isinstance(value, dict) and all(
        isinstance(name, str) and isinstance(pin, dict) and _text(pin.get("sha256")) and _text(pin.get("source"))
        for name, pin in value.items()
    )


def _usage(value: Any) -> bool:
    return isinstance(value, list) and len(value) >= 2 and all(_whole(count) for count in value[:2])


def _place(value: Any) -> bool:
    return isinstance(value, dict) and _text(value.get("cell")) and _maybe_text(value.get("request"))


def _amount(value: Any) -> bool:
    """A sum of money or a duration: a number, not below zero."""
    return _number(value) and value >= 0


def _option_check(name: str) -> Check:
    default = getattr(RunOptions(), name)
    if name == "max_cost":
        return lambda value: value is None or _amount(value)
    if name == "on_timeout":
        return lambda value: value is None or _text(value)
    if default is None:
        return lambda value: value is None or _whole(value)
    if isinstance(default, bool):
        return lambda value: isinstance(value, bool)
    if isinstance(default, int):
        return _whole
    if isinstance(default, float):
        return _number
    if isinstance(default, str):
        return _text
    if isinstance(default, frozenset):
        return lambda value: isinstance(value, list) and all(isinstance(item, str) for item in value)
    return lambda value: isinstance(value, dict) and all(isinstance(key, str) for key in value)


_OPTION_CHECKS = {name: _option_check(name) for name in JOURNALED_OPTIONS}
assert {item.name for item in fields(RunOptions)} >= set(_OPTION_CHECKS)


def _options(value: Any) -> bool:
    return isinstance(value, dict) and all(
        name in _OPTION_CHECKS and _OPTION_CHECKS[name](option) for name, option in value.items()
    )


_SETUP = {"root": _text, "machines": _pins, "input": _mapping, "context": _mapping, "options": _options}
# Per kind: (the fields it must have, the type of every field it may have).
_SHAPES: dict[str, tuple[frozenset[str], dict[str, Check]]] = {
    "start": (
        frozenset({"run", "root", "machines", "secret", "options"}),
        {
            **_SETUP,
            "run": _text,
            "secret": lambda v: isinstance(v, str) and bool(_HEX.match(v)),
            "package": _text,
            "time": _number,
            "origin": _origin,
        },
    ),
    "rerun": (frozenset(), {**_SETUP, "time": _number}),
    "answer": (
        frozenset({"pos", "fp", "kind"}),
        {
            "pos": _text,
            "fp": _text,
            "kind": _one_of("produce", "judge", "tool", "hook"),
            "answer": _mapping,
            "name": _maybe_text,
            "usage": _usage,
            "cost_usd": _amount,
            "seconds": _amount,
            "error": _text,
            "suspendable": _flag,
            "effect": _maybe_text,
            "resolved": _anything,
            "time": _number,
        },
    ),
    "intent": (frozenset({"pos", "name"}), {"pos": _text, "fp": _text, "name": _text, "time": _number}),
    "invalidated": (frozenset({"pos"}), {"pos": _text, "old": _maybe_text, "new": _text}),
    "reply": (
        frozenset({"pos"}),
        {
            "pos": _text,
            "reply_to": _maybe_text,
            "value": _anything,
            "by": _maybe_text,
            "established": _established,
            "claimed": _maybe_text,
            "via": _maybe_text,
            "question": _maybe_text,
            "time": _number,
            "about": _maybe_text,
            "note": _note,
            "approvers": lambda value: isinstance(value, list) and all(_text(name) for name in value),
        },
    ),
    "policy": (
        frozenset({"pos", "question", "action", "rule", "digest"}),
        {
            "pos": _text,
            "question": _text,
            "action": _one_of("reject", "approve", "escalate"),
            "rule": _mapping,
            "digest": _text,
            "time": _number,
            "reply_to": _maybe_text,
            "value": _one_of("reject", "approve"),
            "escalate_to": _text,
            "set_by": _text,
            "about": _maybe_text,
        },
    ),
    "resume": (
        frozenset(),
        {
            "time": _number,
            "max_steps": _whole,
            "cost_budget": _whole,
            "max_cost": _amount,
            "budgets": _counts,
            "retry": _retry,
        },
    ),
    "resolve": (
        frozenset({"action"}),
        {"pos": _maybe_text, "action": _one_of("completed", "retry", "abort"), "value": _anything, "time": _number},
    ),
    "suspend": (
        frozenset(),
        {
            "reason": _maybe_text,
            "at": _maybe_text,
            "ask": _maybe_text,
            "reply_to": _maybe_text,
            "question": _maybe_text,
            "pos": _maybe_text,
            "calls": _counts,
            "time": _number,
            "machine": _text,
            "place": _place,
            "about": _maybe_text,
            "pinned": _text,
            "failed": _text,
        },
    ),
    "finish": (
        frozenset({"status"}),
        {
            "status": _one_of("done", "halt", "in_doubt"),
            "error": _maybe_text,
            "at": _maybe_text,
            "calls": _counts,
            "time": _number,
            "pos": _text,
            "tool": _text,
            "place": _place,
            "failed": _text,
        },
    ),
    "notify": (
        frozenset({"key", "channel", "question"}),
        {"key": _text, "channel": _text, "question": _text, "time": _number},
    ),
    "notified": (
        frozenset({"key", "outcome"}),
        {"key": _text, "outcome": _one_of("sent", "failed"), "reason": _text, "time": _number},
    ),
    "trace": (
        frozenset({"trace_id", "span_id"}),
        {
            "trace_id": lambda v: isinstance(v, str) and len(v) == 32 and bool(_HEX.match(v)),
            "span_id": lambda v: isinstance(v, str) and len(v) == 16 and bool(_HEX.match(v)),
            "time": _number,
        },
    ),
    "sign": (
        frozenset({"key", "by", "sig"}),
        {
            "key": lambda v: isinstance(v, str) and len(v) <= 100,
            "by": lambda v: isinstance(v, str) and len(v) <= 200,
            "sig": lambda v: isinstance(v, str) and len(v) <= 200,
            "time": _number,
        },
    ),
}


def _answer_problem(record: Mapping[str, Any]) -> str | None:
    data = record.get("answer")
    if not isinstance(data, dict):
        return None  # a failed call records its error instead
    if record.get("kind") == "produce" and not _text(data.get("text")):
        return "answer.text"
    if record.get("kind") == "judge" and not (data.get("choice") is None or _whole(data.get("choice"))):
        return "answer.choice"
    return None


def record_problem(record: Mapping[str, Any]) -> str | None:
    """What is wrong with one record's shape ("field 'pos'"), or None when it has the shape of its kind."""
    kind = kind_of(record)
    if kind not in _SHAPES:
        return f"an unknown kind {record.get('t')!r}"
    required, checks = _SHAPES[kind]
    missing = sorted(required - set(record))
    if missing:
        return f"no field '{missing[0]}'"
    for name, value in record.items():
        if name == "t":
            continue
        check = checks.get(name)
        if check is None:
            return f"an unknown field '{name}'"
        if not check(value):
            return f"a wrongly typed field '{name}'"
    odd = _answer_problem(record) if kind == "answer" else None
    return f"a wrongly typed field '{odd}'" if odd else None


def journal_problem(records: Sequence[Mapping[str, Any]]) -> str | None:
    """The first misshapen record of a journal, said in a phrase ("record 3 (reply) has …"), or None."""
    for number, record in enumerate(records, 1):
        problem = record_problem(record)
        if problem is not None:
            return f"record {number} ({record.get('t')!r}) has {problem}"
        if number > 1 and kind_of(record) == "start":
            return f"record {number} is a second start record"
    return None


_HEADER: dict[str, Check] = {
    "format": _text,
    "package": _maybe_text,
    "run_id": _text,
    "machine": _maybe_text,
    "status": _one_of("running", "suspended", "done", "halt", "in_doubt"),
    "error": _maybe_text,
    "at": _maybe_text,
    "ask": _maybe_text,
    "reply_to": _maybe_text,
    "question": _maybe_text,
    "options": lambda value: value is None or _options(value),  # written by earlier releases only
    "machines": lambda value: (
        isinstance(value, list)
        and all(isinstance(item, dict) and _text(item.get("name")) and _text(item.get("sha256")) for item in value)
    ),
    "calls": lambda value: value is None or _counts(value),  # written by earlier releases only
}


def header_problem(header: Mapping[str, Any]) -> str | None:
    """What is wrong with an envelope header's types ("field 'calls'"), or None."""
    for name, check in _HEADER.items():
        if not check(header.get(name)):
            return f"a wrongly typed field '{name}'"
    return None
