"""What the machine and state builders share: the findings they collect, and each key's value read as its type.

A key's value is read as the type the language wants (text, a whole number, true or false); a wrong one is
noted as a finding naming the line, the state and the key, and the reading goes on with the nearest value
it can use, so one mistake does not hide the next. Keys written twice and keys close to a known one (read
as that key when correcting) are noted here too.
"""

from __future__ import annotations

from typing import Any

from .findings import Finding
from .located import LocatedMap, Where
from .suggest import corrected_keys


class _Collector:
    """Gathers findings while the document is turned into a model."""

    def __init__(self) -> None:
        self.findings: list[Finding] = []

    def error(
        self, code: str, message: str, where: Where | None, state: str | None = None, key: str | None = None
    ) -> None:
        self._add("error", code, message, where, state, key)

    def warning(
        self, code: str, message: str, where: Where | None, state: str | None = None, key: str | None = None
    ) -> None:
        self._add("warning", code, message, where, state, key)

    def _add(
        self, severity: Any, code: str, message: str, where: Where | None, state: str | None, key: str | None
    ) -> None:
        self.findings.append(
            Finding(severity, code, message, where.line if where else None, where.column if where else None, state, key)
        )


def _type_name(value: Any) -> str:
    if value is None:
        return "nothing (null)"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "a number"
    if isinstance(value, float):
        return "a decimal number"
    if isinstance(value, str):
        return "text"
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    return type(value).__name__


def _as_int(value: Any) -> int | None:
    """The whole number a text like "12" spells, for lenient loading; None when it spells none."""
    if not isinstance(value, str) or not value.strip().lstrip("-").isdigit():
        return None
    try:
        return int(value.strip())
    except ValueError:  # digits int() refuses, such as "²", or too many of them
        return None


def _state_label(state_id: str) -> str:
    return f"state '{state_id}'"


class _BuilderBase:
    """The document being built, the findings about it, and its values read as their types.

    ``correct``: read a key close to a known one as that key (reported once, with the suggestion), so one
    typo is one error; off for unvalidated loading, which runs what is written."""

    def __init__(self, doc: LocatedMap, source: str, *, correct: bool = True, first_line: int = 1) -> None:
        self.doc = doc
        self.source = source
        self.out = _Collector()
        self.correct = correct
        self.first_line = first_line
        self.broken_states: set[str] = set()  # ids of states written but not built (reported already)

    def _known_keys(self, mapping: LocatedMap, known: frozenset[str] | set[str]) -> LocatedMap:
        """``mapping``, with its typos read as the keys they are close to when correcting."""
        return corrected_keys(mapping, known)[0] if self.correct else mapping

    # -- typed accessors ---------------------------------------------------------

    def _text(
        self, mapping: LocatedMap, key: str, owner: str, state: str | None, default: str | None = None
    ) -> str | None:
        if key not in mapping:
            return default
        value = mapping[key]
        if isinstance(value, str):
            return value
        if value is None:
            self.out.error(
                "wrong-type", f"{owner}: '{key}' is empty; give it a text value", mapping.at(key), state, key
            )
            return default
        self.out.error(
            "wrong-type", f"{owner}: '{key}' must be text, not {_type_name(value)}", mapping.at(key), state, key
        )
        return str(value)

    def _int(self, mapping: LocatedMap, key: str, owner: str, state: str | None, minimum: int) -> int | None:
        if key not in mapping:
            return None
        value = mapping[key]
        if isinstance(value, float) and value.is_integer():
            value = int(value)  # YAML reads 3.0 as a float; the number is still whole (as the reference reads it)
        if isinstance(value, bool) or not isinstance(value, int):
            coerced = _as_int(value)
            self.out.error(
                "wrong-type",
                f"{owner}: '{key}' must be a whole number, not {_type_name(value)}",
                mapping.at(key),
                state,
                key,
            )
            return coerced
        if value < minimum:
            self.out.error(
                "out-of-range", f"{owner}: '{key}' must be at least {minimum}, got {value}", mapping.at(key), state, key
            )
        return value

    def _bool(self, mapping: LocatedMap, key: str, owner: str, state: str | None) -> bool:
        if key not in mapping:
            return False
        value = mapping[key]
        if not isinstance(value, bool):
            self.out.error(
                "wrong-type",
                f"{owner}: '{key}' must be true or false, not {_type_name(value)}",
                mapping.at(key),
                state,
                key,
            )
            return bool(value)
        return value

    def _duplicates(self, mapping: LocatedMap, state: str | None) -> None:
        for key, position in mapping.duplicate_keys:
            owner = f"{_state_label(state)}: " if state else ""
            self.out.error(
                "duplicate-key",
                f"{owner}key '{key}' appears twice; the second would silently win",
                Where(*position),
                state,
                str(key),
            )
