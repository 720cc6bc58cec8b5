"""What every ``mkl`` subcommand shares: exit codes, one-line usage errors, host-value parsing."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..assignments import parse_assignments as assignments_from
from ..providers.scripted import ScriptedOracle, ScriptError, oracle_from_file

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_SUSPENDED, EXIT_IN_DOUBT = 0, 1, 2, 3, 4
STATUS_EXIT = {"done": EXIT_OK, "halt": EXIT_FAILED, "suspended": EXIT_SUSPENDED, "in_doubt": EXIT_IN_DOUBT}


class UsageFailure(Exception):
    """A mistake in how the command was called; printed as one line, exit 2."""


def parse_assignments(assignments: Sequence[str]) -> dict[str, Any]:
    """``key=value`` pairs into a nested mapping; dotted keys nest; values stay text."""
    return assignments_from(assignments, error=UsageFailure)


def parse_input(text: str | None) -> dict[str, Any]:
    """``--input``: a JSON object, or ``@file.json``."""
    if text is None:
        return {}
    source = "--input"
    if text.startswith("@"):
        source = text[1:]
        try:
            text = Path(source).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise UsageFailure(f"--input {source}: cannot be read ({exc})") from None
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise UsageFailure(f"{source} is not valid JSON ({exc})") from None
    if not isinstance(value, dict):
        raise UsageFailure(f"{source} must be a JSON object of context keys, not {type(value).__name__}")
    return value


def merge(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def load_script(path: str) -> ScriptedOracle:
    """A ``--script`` file of scripted oracles (LANGUAGE.md §8 keys, plus ``replies``)."""
    try:
        return oracle_from_file(path, where=f"--script {path}")
    except ScriptError as exc:
        raise UsageFailure(str(exc)) from None


def positive_int(text: str) -> int:
    import argparse

    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a number of at least 1, got {value}")
    return value


def emit_status(status: dict[str, Any]) -> None:
    """The last stdout line of every run-like command: one JSON object."""
    print(json.dumps(status, ensure_ascii=False, default=str))
