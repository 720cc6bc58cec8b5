"""A run's deadline rule as flags and settings give it: ``deadline`` (a duration: ``30s``, ``30m``, ``2h``,
``1d``), ``on_timeout`` (``reject``, the safe default; ``approve``; ``escalate:NAME``) and ``remind_after``. A run
journals its rule in its options, as it does its approvers; what decides by it is :mod:`.deadlines`."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..durable.policy import ESCALATE
from ..engine.options import RunOptions
from .errors import UsageProblem

if TYPE_CHECKING:
    from .requests import StartRequest

_DURATION = re.compile(r"^\s*(\d+)\s*([smhdw]?)\s*$")
_UNIT = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
_SETTING_NAMES = {"deadline": "--deadline", "on_timeout": "--on-timeout", "remind_after": "--remind-after"}


def parse_duration(value: Any, flag: str, *, zero: bool = False) -> int | None:
    """Seconds from a duration (``30s``, ``30m``, ``2h``, ``1d``, ``1w``, or a whole number of seconds); None for
    none. Anything else (and no time at all, unless ``zero``) is refused, naming ``flag``."""
    if value is None or value == "":
        return None
    if isinstance(value, int) and not isinstance(value, bool) and (value > 0 or (zero and value == 0)):
        return value
    found = _DURATION.match(value) if isinstance(value, str) else None
    seconds = int(found.group(1)) * _UNIT[found.group(2)] if found else -1
    if seconds < 0 or (seconds == 0 and not zero):
        raise UsageProblem(f"{flag} takes a duration such as 30s, 30m, 2h or 1d, not {value!r}")
    return seconds


def parse_on_timeout(value: Any, flag: str) -> str | None:
    """``reject``, ``approve`` or ``escalate:NAME`` (None for none given); anything else refused, naming ``flag``."""
    if value is None or value == "":
        return None
    text = value.strip() if isinstance(value, str) else ""
    if text in ("reject", "approve"):
        return text
    name = text[len(ESCALATE) :].strip() if text.startswith(ESCALATE) else ""
    if name and "," not in name and " " not in name:
        return ESCALATE + name
    raise UsageProblem(f"{flag} takes reject, approve or escalate:NAME (one approver), not {value!r}")


def check_rule_value(key: str, value: str, given_as: str) -> str:
    """Check a setting of the deadline rule (``deadline``, ``on_timeout``, ``remind_after``) given as ``given_as``
    (a setting's or an environment variable's name); the text as given, stripped."""
    if key == "on_timeout":
        parse_on_timeout(value, given_as)
    else:
        parse_duration(value, given_as)
    return value.strip()


def with_rule(options: RunOptions, asks: StartRequest, in_force: Callable[[str], str | None]) -> RunOptions:
    """``options`` with the deadline rule a start request gives (``--deadline``, ``--on-timeout``,
    ``--remind-after``), else the one ``in_force`` says for each key (``Settings.deadline_in_force``: ``%mkl
    config``, else ``$MKL_DEADLINE``, ``$MKL_ON_TIMEOUT``, ``$MKL_REMIND_AFTER``)."""
    given = {"deadline": asks.deadline, "on_timeout": asks.on_timeout, "remind_after": asks.remind_after}
    rule: dict[str, Any] = {}
    for key, value in given.items():
        flag = _SETTING_NAMES[key]
        if value is None:
            value, flag = in_force(key), key
        rule[key] = parse_on_timeout(value, flag) if key == "on_timeout" else parse_duration(value, flag)
    if asks.on_timeout is not None and rule["deadline"] is None:
        raise UsageProblem("--on-timeout decides a question once its deadline passes: give --deadline too")
    if rule["deadline"] is None:
        rule["on_timeout"] = None  # (a setting's on_timeout without a deadline decides nothing)
    return dataclasses.replace(options, **rule)
