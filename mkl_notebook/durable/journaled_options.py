"""Run options as a journal keeps them: the JSON of a start record's ``options``, and the options read back.

Which options are journaled, and how each is written as JSON, is read off :class:`engine.options.RunOptions`
itself. It lives apart from :mod:`durable.records` because it translates one engine type, not a kind of record.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import fields
from types import MappingProxyType
from typing import Any

from ..engine.options import RunOptions

_UNJOURNALED_OPTIONS = frozenset({"secret", "observer"})  # the secret has its own key; observers are live only
_OPTIONS_ONLY_WHEN_SET = frozenset(
    {"budgets", "max_cost", "approvers", "deadline", "on_timeout", "remind_after", "notify"}
)  # so that runs from before the option existed still match
_DEFAULT_OPTIONS = RunOptions()
JOURNALED_OPTIONS = tuple(item.name for item in fields(RunOptions) if item.name not in _UNJOURNALED_OPTIONS)
# How each option is written as JSON: sets as sorted lists, mappings as objects, the rest as they are.
_SET_OPTIONS = frozenset(name for name in JOURNALED_OPTIONS if isinstance(getattr(_DEFAULT_OPTIONS, name), frozenset))
_MAPPING_OPTIONS = frozenset(name for name in JOURNALED_OPTIONS if isinstance(getattr(_DEFAULT_OPTIONS, name), Mapping))


def options_record(options: RunOptions) -> dict[str, Any]:
    """The journaled form of every run option (plain JSON: lists for sets, dicts for mappings)."""
    record: dict[str, Any] = {}
    for name in JOURNALED_OPTIONS:
        value = getattr(options, name)
        if name in _OPTIONS_ONLY_WHEN_SET and not value:
            continue
        if name in _SET_OPTIONS:
            value = sorted(value)
        elif name in _MAPPING_OPTIONS:
            value = dict(value)
        record[name] = value
    return record


def options_from_record(record: Mapping[str, Any], secret: bytes, observer: Any = None) -> RunOptions:
    """Run options from their journaled form; options the record lacks keep their defaults."""
    values: dict[str, Any] = {}
    for name in JOURNALED_OPTIONS:
        if name not in record:
            continue
        value = record[name]
        if name in _SET_OPTIONS:
            value = frozenset(value or ())
        elif name in _MAPPING_OPTIONS:
            value = MappingProxyType(dict(value or {}))
        values[name] = value
    return RunOptions(**values, secret=secret, observer=observer)
