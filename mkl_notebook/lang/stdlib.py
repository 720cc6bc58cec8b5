"""The standard library: machines any machine can call by name (docs/language.md, "The standard library").

``call: std_cot`` finds the library's ``std_cot`` unless the run knows a machine of that name already (a
sibling file, a machine defined in the notebook): the user's machine shadows the library's. The machines
are package data (``mkl_notebook/stdlib/*.mkl``), read only when a run calls one.

A library path (``MKL_LIBRARY_PATH``, ``%mkl config library=…``, ``--library``) names folders searched
first: ``call: NAME`` takes the first folder's ``NAME.mkl`` over the shipped machine of that name, and finds
names the shipped library lacks. Such a file is only ever parsed as a machine (strictly), never executed.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from importlib import resources
from pathlib import Path

from ..errors import UserError
from .findings import MachineError
from .loader import load, load_file
from .model import Machine, reachable

LIBRARY_PATH_ENV = "MKL_LIBRARY_PATH"

NAMES = (
    "std_cot",
    "std_self_consistency",
    "std_refine",
    "std_tot",
    "std_debate",
    "std_map_reduce",
    "std_cascade",
    "std_plan_execute",
    "std_research",
    "std_compress",
)


def source(name: str) -> str:
    """The text of library machine ``name`` (one of :data:`NAMES`)."""
    return resources.files("mkl_notebook.stdlib").joinpath(f"{name}.mkl").read_text(encoding="utf-8")


def machine(name: str) -> Machine:
    """Library machine ``name``, loaded (one of :data:`NAMES`)."""
    return load(source(name), source_name=f"the standard library's {name}.mkl")


def with_library(root: Machine, registry: Mapping[str, Machine], folders: Iterable[Path] = ()) -> dict[str, Machine]:
    """``registry`` with the library machines that ``root``, or a machine it reaches, calls and ``registry``
    lacks (the user's machines shadow the library's), each from the first of ``folders`` that holds it, else
    from the shipped library."""
    completed = dict(registry)
    completed.setdefault(root.name, root)
    folders = tuple(folders)
    for name, found in reachable(root, lambda name: completed.get(name) or find(name, folders)).items():
        completed.setdefault(name, found)
    return completed


class LibraryProblem(UserError, ValueError):
    """A library folder that is not there, or a machine file in one that cannot be used; the message names it."""


def library_path(text: str, given_as: str = LIBRARY_PATH_ENV) -> tuple[Path, ...]:
    """The folders of a library path (``os.pathsep``-separated; empty entries are skipped), each checked to be
    a folder; ``given_as`` names where the path was given, as the one-line refusal says."""
    folders = tuple(Path(entry).expanduser() for entry in text.split(os.pathsep) if entry.strip())
    for folder in folders:
        _check_folder(folder, given_as)
    return folders


def find(name: str, folders: Iterable[Path] = ()) -> Machine | None:
    """The machine a ``call: name`` finds in the library: ``name.mkl`` in the first of ``folders`` that has one,
    loaded strictly, else the shipped machine of that name, else None."""
    for folder in folders:
        _check_folder(folder, "the library path")  # (checked when set; it may have gone since)
        path = folder / f"{name}.mkl"
        if os.path.lexists(path):
            return _folder_machine(path, name)
    return machine(name) if name in NAMES else None


def library(folders: Iterable[Path] = ()) -> dict[str, Machine]:
    """Every machine a call can find in the library: the shipped ones (each as the library path overrides it),
    then those only the library path's folders hold, in name order."""
    folders = tuple(folders)
    found = {name: find(name, folders) for name in listed(folders)}
    return {name: found_machine for name, found_machine in found.items() if found_machine is not None}


def listed(folders: Iterable[Path] = ()) -> list[str]:
    """The library's names as a listing shows them: the shipped ones in order, then the folders' others."""
    return [*NAMES, *sorted(library_names(folders) - set(NAMES))]


def library_names(folders: Iterable[Path] = ()) -> set[str]:
    """The names a call can find in the library (read from file names, parsing nothing)."""
    named = {path.stem for folder in folders for path in Path(folder).glob("*.mkl")}
    return {*NAMES, *(name for name in named if not name.startswith("."))}


def _check_folder(folder: Path, given_as: str) -> None:
    if not folder.is_dir():
        what = "is not a folder" if folder.exists() else "does not exist"
        raise LibraryProblem(f"{given_as}: the library folder {folder} {what}")


def _folder_machine(path: Path, name: str) -> Machine:
    try:
        found = load_file(path)
    except MachineError as exc:
        raise LibraryProblem(f"library path: {exc}") from None
    if found.name != name:
        raise LibraryProblem(
            f"the library path's {path} defines machine '{found.name}', not '{name}': a call finds a library "
            "machine by its file name, so name the file after the machine"
        )
    return found
