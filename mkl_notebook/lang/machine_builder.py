"""A machine document's top level, built as a :class:`Machine` (its states by the state builder it extends).

Besides its states, the top level gives the machine's name, entry, budget, default tier, result, context and
declared tools and hooks. Once the machine is built, the names its routes give are held to its states
(lang/references.py), and a state using what a later ``mklang`` version than the declared one introduced is
warned about.
"""

from __future__ import annotations

import hashlib
from types import MappingProxyType

from .builder_base import _state_label, _type_name
from .keys import TOP_KEYS
from .located import LocatedList, LocatedMap, Where, plain
from .model import SPEC_VERSIONS, TIERS, VERSION_ALIASES, Declaration, Machine
from .references import unknown_state_names
from .state_builder import _StateBuilder
from .suggest import did_you_mean


class _MachineBuilder(_StateBuilder):
    """A machine document's top level, its states and their gates, as a :class:`Machine`."""

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
