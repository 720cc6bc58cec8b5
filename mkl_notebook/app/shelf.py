"""The machines a workspace knows: defined in cells, loaded from files, or the library's.

A workspace's shelf holds the machines defined (``%%mkl``), loaded (``mkl run FILE``, ``%mkl load``) and taken
in from the standard library or a library folder as runs name them; it checks them and runs their scenarios.
Nothing here runs a machine or touches a store.
"""

from __future__ import annotations

import os
from pathlib import Path

from ..lang import files, stdlib
from ..lang.check import check, check_defined
from ..lang.findings import Finding
from ..lang.loader import load, load_file
from ..lang.model import Machine, reachable
from ..lang.siblings import load_siblings, sibling_names
from .errors import UsageProblem
from .scenarios import ScenarioResult, run_all, scenarios_from_file
from .settings import Settings


class Shelf:
    """The machines of one workspace, by name, and the files they were loaded from; ``settings`` says where the
    library's folders are."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.machines: dict[str, Machine] = {}
        self.files: dict[str, Path] = {}  # machine name -> the file it was loaded from

    def define(self, source: str, *, first_line: int = 1) -> Machine:
        """Define (or redefine) the machine in ``source``, whose first line is line ``first_line`` where written."""
        machine = load(source, first_line=first_line)
        self.machines[machine.name] = machine
        return machine

    def load(self, path: str | os.PathLike[str]) -> Machine:
        """Define the machine of a ``.mkl`` file, and the machines beside it that it calls and this workspace
        has not defined (as ``mkl run FILE`` finds them)."""
        path = Path(path)
        machine = load_file(path)
        siblings, _broken = load_siblings(path, machine)  # a broken sibling is reported if called
        for name, found in reachable(machine, lambda name: self.machines.get(name) or siblings.get(name)).items():
            self.machines.setdefault(name, found)
        self.machines[machine.name] = machine
        self.files[machine.name] = path.resolve()
        return machine

    def machine(self, name: str) -> Machine:
        """The machine defined by that name, else the library's (its folders' first), taken in as if defined."""
        found = self.machines.get(name) or stdlib.find(name, self.settings.library_folders())
        if found is not None:
            return self.machines.setdefault(name, found)
        known = ", ".join(sorted(self.machines)) or "none yet"
        raise UsageProblem(
            f"no machine named '{name}' is defined (defined: {known}; the standard library: %mkl stdlib); "
            "define it in a %%mkl cell first"
        )

    def library(self) -> tuple[dict[str, Machine], list[str]]:
        """The library's machines (its folders' first), and the names of those a machine defined here shadows."""
        machines = stdlib.library(self.settings.library_folders())
        return machines, [n for n, m in machines.items() if n in self.machines and self.machines[n].sha256 != m.sha256]

    def library_machine(self, name: str) -> Machine:
        """One machine of the library (a library folder's first)."""
        if (found := stdlib.find(name, folders := self.settings.library_folders())) is None:
            raise UsageProblem(f"%mkl stdlib: no library machine '{name}'; it has {', '.join(stdlib.listed(folders))}")
        return found

    def callees(self, root: Machine) -> dict[str, Machine]:
        """The machines a run of ``root`` can call: those defined here, else the library's (its folders' first)."""
        return stdlib.with_library(root, self.machines, self.settings.library_folders())

    def check(self, name: str) -> list[Finding]:
        """Static findings of a defined machine, its calls judged against the machines defined here."""
        return check_defined(machine := self.machine(name), self.callees(machine))

    def definition_findings(self, machine: Machine, *, calls_known: bool = False) -> list[Finding]:
        """What a definition warns of; with ``calls_known`` (its file's siblings are loaded) also a call to a
        machine that neither the workspace, the folder nor the standard library has."""
        known = self.callees(machine) if calls_known else None
        return [f for f in check_defined(machine, known) if f.severity == "warning" or f.code == "unknown-call"]

    @staticmethod
    def check_file(path: Path, library: tuple[Path, ...] = ()) -> list[Finding]:
        """Static findings of a machine file, its calls judged against the files beside it and ``library``'s."""
        try:
            text = files.read_text(path, files.MACHINE_LIMIT)
        except (OSError, UnicodeDecodeError) as exc:
            reason = "is not UTF-8 text" if isinstance(exc, UnicodeDecodeError) else (exc.strerror or str(exc)).lower()
            raise UsageProblem(f"{path}: {reason}") from None
        return check(text, {*sibling_names(path), *stdlib.library_names(library)})

    def test(self, name: str, script: Path) -> list[ScenarioResult]:
        """Scripted scenarios (docs/language.md §8) against a defined machine."""
        return run_all(scenarios_from_file(machine := self.machine(name), script, self.callees(machine)))
