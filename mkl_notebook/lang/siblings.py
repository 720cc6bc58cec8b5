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
    return load_siblings(machine_path, machine)[0]


def load_siblings(machine_path: Path, machine: Machine) -> tuple[dict[str, Machine], list[str]]:
    """:func:`sibling_registry`, and one line for each sibling file that could not be loaded."""
    registry: dict[str, Machine] = {}
    broken: list[str] = []
    if not machine.called_machines():
        return {machine.name: machine}, broken
    for sibling in sorted(machine_path.resolve().parent.glob("*.mkl")):
        if sibling.resolve() == machine_path.resolve() or sibling.name.startswith(".") or not sibling.is_file():
            continue  # itself; hidden entries (the .mkl store folder); pipes, devices, folders
        try:
            other = load_file(sibling, strict=False)
        except MachineError as exc:
            broken.append(str(exc))
            continue
        registry.setdefault(other.name, other)
    registry[machine.name] = machine
    return registry, broken


def sibling_names(machine_path: Path) -> set[str]:
    """The names of the machines in the ``.mkl`` files beside ``machine_path`` that load (for ``mkl check``)."""
    names = set()
    for sibling in sorted(machine_path.resolve().parent.glob("*.mkl")):
        if sibling.resolve() == machine_path.resolve() or sibling.name.startswith(".") or not sibling.is_file():
            continue
        try:
            names.add(load_file(sibling, strict=False).name)
        except MachineError:
            continue  # reported when a run calls it; check judges the file it was given
    return names
