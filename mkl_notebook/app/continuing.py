"""Continuing a run as it was made: what the commands that continue it name (the script file, tools file and
model it was started with, kept in its start record's ``origin``), and its machines as their files are now."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ..durable.records import started_with
from ..durable.replay import JournalIndex
from ..lang.findings import MachineError
from ..lang.loader import load_file
from ..lang.model import Machine
from ..lang.siblings import load_siblings
from .errors import UsageProblem


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


def changed_files(run_id: str, index: JournalIndex, force: bool) -> tuple[dict[str, Machine], bool]:
    """A run this person started from a file: its machines as the files are now, and whether any changed since
    the run pinned them (refused unless ``force``: the person asked to resume with the edited machines)."""
    origin = (index.start.get("origin") or {}).get("path")
    if not isinstance(origin, str) or not origin or not Path(origin).is_file():
        return {}, False
    root = str(index.setup.get("root") or "")
    try:
        current_root = load_file(origin, strict=False)
    except MachineError as exc:
        current: dict[str, Machine] = {}
        unloadable, changed = [str(exc)], [root]
    else:
        current, unloadable = load_siblings(Path(origin), current_root)
        changed = [
            name
            for name, pin in index.machines.items()
            if (name in current and current[name].sha256 != pin["sha256"]) or (name not in current and unloadable)
        ]
    if changed and not force:
        names = ", ".join(repr(name) for name in changed)
        if unloadable:
            raise UsageProblem(
                f"{unloadable[0]}; so machine {names} of run '{run_id}' cannot be read as it is now: fix the "
                "file, or pass --force to resume with the copies the run pinned"
            )
        raise UsageProblem(
            f"machine {names} changed since run '{run_id}' started; pass --force to resume with the edited machine"
        )
    return current, bool(changed)
