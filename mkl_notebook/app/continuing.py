"""What the commands that continue a run name, as the run was made: the script file, tools file and model it
was started with (kept in its start record's ``origin``), and ``--trust-file`` for a file's run not trusted."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ..durable.records import started_with


def run_origin(machine_file: Path | None, script: Any, tools: str | None, model: str | None) -> dict[str, str] | None:
    """A start record's ``origin``: the machine file (when files are followed), and the script file, tools file
    and model the run was started with (a script given as data, not a file, is not named)."""
    origin = {
        "path": str(machine_file) if machine_file is not None else None,
        "script": str(script) if isinstance(script, (str, Path)) else None,
        "tools": tools,
        "model": model,
    }
    return {key: value for key, value in origin.items() if isinstance(value, str) and value} or None


def drawn_on(records: Sequence[Mapping[str, Any]], *, trusted: bool | None = None) -> dict[str, str]:
    """The flags (``script``, ``tools``, ``model``) a command continuing the run of journal ``records`` names,
    as it was started. A file's run this person does not trust (``trusted`` False) names none: its paths are
    another person's, and a tools file is code that pasting the command would run."""
    if trusted is False or not records or records[0].get("t") != "start":
        return {}
    return started_with(records[0])
