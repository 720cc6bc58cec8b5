"""YAML text or a ``.mkl`` file -> an immutable :class:`Machine` (docs/language.md §1).

Loading is strict by default: every structural problem becomes a
:class:`MachineError` naming the line, the state and the key.  The scenario and
conformance runner loads *unvalidated* (``strict=False``): a state's kind comes
from key presence and keys that do not apply are ignored, as the language
requires of that runner.
"""

from __future__ import annotations

import copy
import hashlib
from pathlib import Path
from types import MappingProxyType
from typing import Any

from . import files
from .builder_base import _state_label, _type_name
from .findings import Finding, MachineError
from .keys import TOP_KEYS
from .located import LocatedList, LocatedMap, Where, YamlSyntaxError, parse_located, plain
from .model import (
    SPEC_VERSIONS,
    TIERS,
    VERSION_ALIASES,
    Declaration,
    Machine,
)
from .references import unknown_state_names
from .state_builder import _StateBuilder
from .suggest import did_you_mean


class _MachineBuilder(_StateBuilder):
    """A machine document's top level, its states and their gates, as a :class:`Machine`."""

    # -- document ----------------------------------------------------------------

    def build(self) -> Machine:
        written = self.doc
        for key in written:
            if key not in TOP_KEYS:
                hint = did_you_mean(key, TOP_KEYS - set(written))
                self.out.error(
                    "unknown-key",
                    f"unknown top-level key '{key}'{hint}"
                    + ("" if hint else f" (allowed: {', '.join(sorted(TOP_KEYS))})"),
                    written.at(key),
                    None,
                    str(key),
                )
        doc = self.doc = self._known_keys(written, TOP_KEYS)
        self._duplicates(doc, None)
        for key in ("machine", "entry", "budget", "states"):
            if key not in doc:
                self.out.error(
                    "missing-key", f"the machine has no '{key}:' key; add it at the top level", doc.where, None, key
                )
        name = self._text(doc, "machine", "the machine", None, "") or ""
        entry = self._text(doc, "entry", "the machine", None, "") or ""
        budget = self._int(doc, "budget", "the machine", None, 1)
        default_tier = self._text(doc, "default_tier", "the machine", None, "balanced") or "balanced"
        if default_tier not in TIERS:
            self.out.error(
                "bad-value",
                f"'default_tier' must be one of {', '.join(TIERS)}, got '{default_tier}'"
                + did_you_mean(default_tier, TIERS),
                doc.at("default_tier"),
                None,
                "default_tier",
            )
        result = self._text(doc, "result", "the machine", None)
        mklang = doc.get("mklang")
        if mklang is not None:
            mklang = str(mklang) if not isinstance(mklang, float) else f"{mklang:g}"
            mklang = VERSION_ALIASES.get(mklang, mklang)
            if isinstance(doc["mklang"], float) and mklang in SPEC_VERSIONS:
                self.out.warning(
                    "unquoted-version",
                    f'write mklang: "{mklang}" in quotes so YAML keeps it text',
                    doc.at("mklang"),
                    None,
                    "mklang",
                )
            elif mklang not in SPEC_VERSIONS:  # the field is advisory: unknown keys are what is refused
                self.out.warning(
                    "unsupported-version",
                    f"mklang '{mklang}' is not a version this interpreter implements ({', '.join(SPEC_VERSIONS)}); "
                    "it runs under 0.4's rules",
                    doc.at("mklang"),
                    None,
                    "mklang",
                )
        context = doc.get("context")
        if context is None:
            context = {}
        elif not isinstance(context, LocatedMap):
            self.out.error(
                "wrong-type",
                f"'context' must be a mapping of keys to values, not {_type_name(context)}",
                doc.at("context"),
                None,
                "context",
            )
            context = {}
        else:
            for key in context:
                if not isinstance(key, str):
                    self.out.error("wrong-type", f"context key {key!r} must be text", context.at(key), None, "context")
        tools = self._declarations("tools")
        hooks = self._declarations("hooks")
        states = self._states()
        if budget is None:
            budget = 0
        machine = Machine(
            name=name,
            entry=entry,
            budget=budget,
            states=MappingProxyType(states),
            default_tier=default_tier,
            result=result,
            context=MappingProxyType({str(k): plain(v) for k, v in context.items()}),
            tools=tools,
            hooks=hooks,
            mklang=mklang,
            source=self.source,
            sha256=hashlib.sha256(self.source.encode("utf-8")).hexdigest(),
            first_line=self.first_line,
        )
        self._references(machine, doc.at("entry") if "entry" in doc else None)
        self._version_features(machine)
        return machine

    def _declarations(self, key: str) -> tuple[Declaration, ...]:
        value = self.doc.get(key)
        if value is None:
            return ()
        if not isinstance(value, list):
            self.out.error(
                "wrong-type",
                f"'{key}' must be a list of {{name, description}}, not {_type_name(value)}",
                self.doc.at(key),
                None,
                key,
            )
            return ()
        found: list[Declaration] = []
        for index, item in enumerate(value):
            where = value.at(index) if isinstance(value, LocatedList) else None
            if isinstance(item, str):
                self.out.error(
                    "wrong-type",
                    f"'{key}' item {index + 1} ('{item}') must be a mapping, as in "
                    f"{{name: {item}, description: ...}} (docs/language.md §1)",
                    where,
                    None,
                    key,
                )
                continue
            if not isinstance(item, LocatedMap) or not isinstance(item.get("name"), str):
                self.out.error(
                    "wrong-type", f"'{key}' item {index + 1} must be a mapping with a text 'name'", where, None, key
                )
                continue
            for extra in item:
                if extra not in ("name", "description"):
                    self.out.error(
                        "unknown-key",
                        f"'{key}' item '{item['name']}' has unknown key '{extra}'",
                        item.at(extra),
                        None,
                        key,
                    )
            description = item.get("description", "")
            found.append(Declaration(item["name"], description if isinstance(description, str) else str(description)))
        return tuple(found)

    def _references(self, machine: Machine, entry_at: Where | None) -> None:
        for message, where, owner, key in unknown_state_names(machine, self.doc, self.broken_states, entry_at):
            self.out.error("bad-reference", message, where, owner, key)

    def _version_features(self, machine: Machine) -> None:
        """Warn where a state uses what a later version than the declared one introduced."""
        declared = machine.mklang
        if declared == "0.4" or (declared is not None and declared not in SPEC_VERSIONS):
            return
        states = self.doc.get("states")
        for state in machine.states.values():
            since: dict[str, list[tuple[str, str]]] = {"0.3": [], "0.4": []}  # (what, the key it is written at)
            if state.parse == "list" and declared == "0.2":
                since["0.3"].append(("parse: list", "parse"))
            if state.max_visits is not None:
                since["0.4"].append(("max_visits", "max_visits"))
            if state.parse == "json":
                since["0.4"].append(("parse: json", "parse"))
            if any(g.ask is not None or g.reply_to is not None for g in state.gates):
                since["0.4"].append(("ask/reply_to", "gates"))
            body = states.get(state.id) if isinstance(states, LocatedMap) else None
            for version, used in since.items():
                if used:
                    key = used[0][1]
                    where = body.at(key) if isinstance(body, LocatedMap) else Where(state.line, 1)
                    self.out.warning(
                        "version-feature",
                        f"{_state_label(state.id)} uses {', '.join(what for what, _ in used)}, which "
                        f'mklang {version} introduced; declare mklang: "{version}"',
                        where,
                        state.id,
                    )


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
