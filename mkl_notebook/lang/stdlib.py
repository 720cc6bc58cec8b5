"""The standard library: machines any machine can call by name (docs/language.md, "The standard library").

``call: std_cot`` finds the library's ``std_cot`` unless the run knows a machine of that name already (a
sibling file, a machine defined in the notebook): the user's machine shadows the library's. The machines
are package data (``mkl_notebook/stdlib/*.mkl``), read only when a run calls one.
"""

from __future__ import annotations

from collections.abc import Mapping
from importlib import resources

from .loader import load
from .model import Machine, reachable

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


def machines() -> dict[str, Machine]:
    """Every library machine, by name, in the library's order."""
    return {name: machine(name) for name in NAMES}


def with_library(root: Machine, registry: Mapping[str, Machine]) -> dict[str, Machine]:
    """``registry`` with the library machines that ``root``, or a machine it reaches, calls and ``registry``
    lacks (the user's machines shadow the library's)."""
    completed = dict(registry)
    completed.setdefault(root.name, root)
    for name, found in reachable(root, lambda name: completed.get(name) or _library_machine(name)).items():
        completed.setdefault(name, found)
    return completed


def _library_machine(name: str) -> Machine | None:
    return machine(name) if name in NAMES else None
