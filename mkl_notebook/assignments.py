"""``--set key=value`` flags into nested host values, shared by the command line and the magics."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from .lang.interpolate import set_path


def parse_assignments(
    items: Sequence[str], *, convert: Callable[[str], Any] = str, error: type[Exception] = ValueError
) -> dict[str, Any]:
    """``a.b=value`` pairs into ``{"a": {"b": value}}``; ``convert`` turns each raw value into the host value."""
    values: dict[str, Any] = {}
    for item in items:
        key, sep, raw = item.partition("=")
        key = key.strip()
        if not sep or not key or any(not part for part in key.split(".")):
            raise error(f"--set expects KEY=VALUE (e.g. --set ticket.body=hello), got {item!r}")
        set_path(values, key, convert(raw))
    return values
