"""Host values from flags: ``--set key=value`` pairs, ``--input`` JSON, and budget numbers."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..lang import files
from ..lang.interpolate import set_path
from .errors import UsageProblem


def parse_assignments(items: Sequence[str], *, convert: Callable[[str], Any] = str) -> dict[str, Any]:
    """``a.b=value`` pairs into ``{"a": {"b": value}}``; ``convert`` turns each raw value into the host value."""
    values: dict[str, Any] = {}
    for item in items:
        key, sep, raw = item.partition("=")
        key = key.strip()
        if not sep or not key or any(not part for part in key.split(".")):
            raise UsageProblem(f"--set expects KEY=VALUE (e.g. --set ticket.body=hello), got {item!r:.200}")
        if key.count(".") >= files.VALUE_DEPTH:
            raise UsageProblem(f"--set {key[:40]}…: the key nests too deeply (more than {files.VALUE_DEPTH} levels)")
        set_path(values, key, convert(raw))
    return values


def parse_input(text: str) -> dict[str, Any]:
    """``--input``: a JSON object, or ``@file.json``."""
    source = "--input"
    if text.startswith("@"):
        source = f"--input {text[1:]}"
        try:
            text = files.read_text(text[1:], files.SCRIPT_LIMIT)
        except OSError as exc:
            raise UsageProblem(f"{source}: cannot be read ({exc.strerror or exc})") from None
        except UnicodeDecodeError:
            raise UsageProblem(f"{source}: is not UTF-8 text") from None
    try:
        value = files.parse_json(text)
    except files.UnfitJson as exc:
        raise UsageProblem(f"{source} {exc} to be read") from None
    except ValueError as exc:
        raise UsageProblem(f"{source} is not valid JSON ({exc})") from None
    return host_input(value, source)


def host_input(value: Any, source: str = "--input") -> dict[str, Any]:
    """``value`` as the host values of a run: it must be a mapping of context keys."""
    if not isinstance(value, Mapping):
        raise UsageProblem(
            f"{source} must be a mapping of context keys (a JSON object or a dict), not {type(value).__name__}"
        )
    return dict(value)


def merge(base: Mapping[str, Any], extra: Mapping[str, Any]) -> dict[str, Any]:
    """``extra`` laid over ``base``; nested mappings merge key by key (``--set a.b=…`` beside ``--input``)."""
    merged = dict(base)
    for key, value in extra.items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), Mapping):
            merged[key] = merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def parse_budget(name: str, flag: str | None, value: Any) -> int | None:
    """A count (a step or token budget, a setting's number) from a flag's text or an API argument: a whole number
    of at least 1, or None. ``flag`` is the flag that gave it, when one did."""
    if value is None:
        return None
    number = value
    if isinstance(value, str):
        try:
            number = int(value)
        except ValueError:
            number = None
    if isinstance(number, bool) or not isinstance(number, int) or number < 1:
        given = f"{name} ({flag})" if flag else name
        raise UsageProblem(f"{given} must be a whole number of at least 1, not {value!r}")
    return number


MAX_COST_CEILING = 1_000_000.0  # dollars: anything above is a typo, not a limit


def parse_cost(value: Any, flag: str = "--max-cost") -> float | None:
    """A cost limit in US dollars from a flag's text (``0.5``, ``$0.50``) or an API number, or None."""
    if value is None:
        return None
    number: Any = value
    if isinstance(value, str):
        try:
            number = float(value.strip().removeprefix("$"))
        except ValueError:
            number = None
    if isinstance(number, bool) or not isinstance(number, (int, float)) or not 0 < number <= MAX_COST_CEILING:
        raise UsageProblem(f"max_cost ({flag}) must be an amount of US dollars above 0 (e.g. 0.50), not {value!r}")
    return float(number)
