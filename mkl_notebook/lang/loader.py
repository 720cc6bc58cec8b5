"""YAML text or a ``.mkl`` file -> an immutable :class:`Machine` (docs/language.md §1).

Loading is strict by default: every structural problem becomes a
:class:`MachineError` naming the line, the state and the key.  The scenario and
conformance runner loads *unvalidated* (``strict=False``): a state's kind comes
from key presence and keys that do not apply are ignored, as the language
requires of that runner.

The text is parsed with its positions (lang/located.py) and built by the machine
builder (lang/machine_builder.py); this module decides which findings refuse it.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from . import files
from .builder_base import _type_name
from .findings import Finding, MachineError
from .located import LocatedMap, YamlSyntaxError, parse_located
from .machine_builder import _MachineBuilder
from .model import Machine


def _parse(text: str, first_line: int = 1) -> LocatedMap:
    if not isinstance(text, str):
        raise MachineError(f"a machine document must be YAML text, not {_type_name(text)}")
    try:
        doc = parse_located(text, first_line)
    except YamlSyntaxError as exc:
        where = f"{exc.where}: " if exc.where else ""
        raise MachineError(
            f"{where}the YAML does not parse: {exc.problem}",
            (
                Finding(
                    "error",
                    "yaml",
                    f"the YAML does not parse: {exc.problem}",
                    exc.where.line if exc.where else None,
                    exc.where.column if exc.where else None,
                ),
            ),
        ) from None
    if not isinstance(doc, LocatedMap):
        raise MachineError(
            f"a machine document must be a YAML mapping with machine, entry, budget and states; "
            f"this one is {_type_name(doc)}",
            (Finding("error", "not-a-mapping", "the document is not a mapping", first_line, 1),),
        )
    return doc


def analyse(text: str) -> tuple[Machine | None, list[Finding]]:
    """Build the model and return it with every structural finding.

    Returns ``(None, findings)`` when the text is not a YAML mapping at all.
    """
    _, machine, findings = analyse_located(text)
    return machine, findings


def analyse_located(text: str, first_line: int = 1) -> tuple[LocatedMap | None, Machine | None, list[Finding]]:
    """:func:`analyse`, with the parsed document too (where each key sits), for findings placed by key.

    ``first_line``: the number of the text's first line where the person sees it (see :func:`load`).
    """
    try:
        doc = _parse(text, first_line)
    except MachineError as exc:
        return None, None, list(exc.findings)
    builder = _MachineBuilder(doc, text, first_line=first_line)
    machine = builder.build()
    return doc, machine, builder.out.findings


def load(text: str, *, strict: bool = True, source_name: str | None = None, first_line: int = 1) -> Machine:
    """Load a machine from YAML text.

    ``strict=False`` is for the scenario runner, which must run documents the
    checker would reject; it fails only where no machine can be built at all.
    ``first_line`` is the number the text's first line has where the person wrote it (a ``%%mkl`` cell's
    body begins on the cell's line 2): every position said, and the machine's, counts from it.
    """
    doc = _parse(text, first_line) if not source_name else _parse_named(text, source_name)
    builder = _MachineBuilder(doc, text, correct=strict, first_line=first_line)
    machine = builder.build()
    errors = [f for f in builder.out.findings if f.severity == "error"]
    if strict and errors:
        raise MachineError.from_findings(errors, source_name)
    if not strict:
        fatal = [
            f
            for f in errors
            if f.code == "missing-key" and f.state is None and f.key in ("machine", "entry", "budget", "states")
        ]
        fatal += [
            f
            for f in errors
            if f.key in ("budget", "states")
            and f.state is None
            and f.code == "wrong-type"
            and (f.key != "budget" or machine.budget < 1)
        ]
        if fatal:
            raise MachineError.from_findings(fatal, source_name)
    return machine


def _parse_named(text: str, source_name: str) -> LocatedMap:
    try:
        return _parse(text)
    except MachineError as exc:
        raise MachineError(f"{source_name}: {exc.message}", exc.findings, source_name) from None


def load_file(path: str | Path, *, strict: bool = True) -> Machine:
    """Load a ``.mkl`` file; unreadable files raise :class:`MachineError` too."""
    path = Path(path)
    try:
        text = files.read_text(path, files.MACHINE_LIMIT)
    except FileNotFoundError:
        raise MachineError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise MachineError(f"{path}: is a directory, not a machine file") from None
    except UnicodeDecodeError as exc:
        raise MachineError(f"{path}: is not UTF-8 text (byte {exc.start})") from None
    except OSError as exc:
        raise MachineError(f"{path}: cannot be read ({exc.strerror})") from None
    return load(text, strict=strict, source_name=str(path))


def machine_from_mapping(data: dict[str, Any], *, strict: bool = False, source_name: str | None = None) -> Machine:
    """A machine from an already-parsed mapping (conformance cases embed them).

    The mapping is re-serialised so the model keeps a faithful source and hash.
    """
    import yaml

    try:
        text = yaml.safe_dump(copy.deepcopy(data), sort_keys=False, allow_unicode=True)
    except yaml.YAMLError as exc:
        raise MachineError(f"{source_name or 'machine'}: cannot be represented as YAML ({exc})") from None
    return load(text, strict=strict, source_name=source_name)
