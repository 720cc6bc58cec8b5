"""The call registry of a machine file: the other ``.mkl`` files in its folder."""

from __future__ import annotations

from pathlib import Path

from .findings import MachineError
from .loader import load_file
from .model import Machine


def sibling_registry(machine_path: Path, machine: Machine) -> dict[str, Machine]:
    """The ``.mkl`` files next to a machine, loaded unvalidated, when it calls other machines.

    Only regular files within the machine-file size are read (a pipe or a device there is skipped
    like a broken file); a machine that calls none reads nothing else.
    """
    registry: dict[str, Machine] = {}
    if not machine.called_machines():
        return {machine.name: machine}
    for sibling in sorted(machine_path.resolve().parent.glob("*.mkl")):
        if sibling.resolve() == machine_path.resolve():
            continue
        try:
            other = load_file(sibling, strict=False)
        except MachineError:
            continue
        registry.setdefault(other.name, other)
    registry[machine.name] = machine
    return registry
