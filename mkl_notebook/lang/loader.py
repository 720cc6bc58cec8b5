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
import re
import warnings
from pathlib import Path
from types import MappingProxyType
from typing import Any

from . import files
from .builder_base import _BuilderBase, _state_label, _type_name
from .findings import Finding, MachineError
from .interpolate import PLACEHOLDER
from .keys import ALL_STATE_KEYS, EXTENSION_KEYS, GATE_KEYS, KIND_KEYS, ON_ERROR_KEYS, REQUIRED, TOP_KEYS
from .located import LocatedList, LocatedMap, Where, YamlSyntaxError, parse_located, plain
from .model import (
    END,
    SPEC_VERSIONS,
    TIERS,
    VERSION_ALIASES,
    Declaration,
    Gate,
    Machine,
    OnError,
    Policy,
    State,
    StateKind,
)
from .references import unknown_state_names
from .suggest import corrected_keys, did_you_mean, renamed_keys

_DOTTED_PATH = re.compile(r"^[\w]+(\.[\w]+)*$")


class _MachineBuilder(_BuilderBase):
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

    # -- states ------------------------------------------------------------------

    def _states(self) -> dict[str, State]:
        raw = self.doc.get("states")
        if raw is None:
            return {}
        if not isinstance(raw, LocatedMap):
            self.out.error(
                "wrong-type",
                f"'states' must be a mapping of state ids to states, not {_type_name(raw)}",
                self.doc.at("states"),
                None,
                "states",
            )
            return {}
        if not raw:
            self.out.error(
                "missing-key",
                "'states' is empty; a machine needs at least one state",
                self.doc.at("states"),
                None,
                "states",
            )
        states: dict[str, State] = {}
        for raw_id, body in raw.items():
            state_id = str(raw_id)
            where = raw.at(raw_id)
            if not isinstance(raw_id, str):
                self.out.error("wrong-type", f"state id {raw_id!r} must be text; quote it", where, state_id)
            if state_id == END:
                self.out.error(
                    "reserved-name", "'END' is reserved for the end of the run; rename this state", where, state_id
                )
            if not isinstance(body, LocatedMap):
                self.out.error(
                    "wrong-type", f"{_state_label(state_id)} must be a mapping, not {_type_name(body)}", where, state_id
                )
                self.broken_states.add(state_id)
                continue
            states[state_id] = self._state(state_id, body)
        return states

    def _state(self, sid: str, written: LocatedMap) -> State:
        label = _state_label(sid)
        self._duplicates(written, sid)
        body = self._state_keys(sid, written)
        present = [
            kind for kind, marker in (("tool", "tool"), ("call", "call"), ("generative", "prompt")) if marker in body
        ]
        kind: StateKind = "tool" if "tool" in body else "call" if "call" in body else "generative"
        if len(present) > 1:
            self.out.error(
                "two-kinds",
                f"{label} has both {' and '.join(repr(k) for k in present)}; a state is "
                "exactly one of generative (prompt), call or tool",
                body.where,
                sid,
            )
        allowed = KIND_KEYS[kind]
        for key in written:
            if key in allowed:
                continue
            if key in EXTENSION_KEYS:
                if EXTENSION_KEYS[key] == kind:
                    self.out.warning(
                        "extension-key",
                        f"{label}: '{key}' is an extension of mkl_notebook; other mklang runtimes will reject it",
                        written.at(key),
                        sid,
                        str(key),
                    )
                    continue
                self.out.error(
                    "misplaced-key",
                    f"{label}: '{key}' only applies to {EXTENSION_KEYS[key]} states, and this is a {kind} state",
                    written.at(key),
                    sid,
                    str(key),
                )
            elif key in ALL_STATE_KEYS:
                kinds = [k for k, keys in KIND_KEYS.items() if key in keys]
                self.out.error(
                    "misplaced-key",
                    f"{label}: '{key}' does not apply to a {kind} state (it belongs to "
                    f"{' or '.join(kinds)} states); remove it",
                    written.at(key),
                    sid,
                    str(key),
                )
            else:
                hint = did_you_mean(key, (allowed | {k for k, o in EXTENSION_KEYS.items() if o == kind}) - set(written))
                self.out.error("unknown-key", f"{label}: unknown key '{key}'{hint}", written.at(key), sid, str(key))
        for key in REQUIRED[kind]:
            if key not in body:
                self.out.error("missing-key", f"{label}: a {kind} state needs '{key}:'", body.where, sid, key)

        text = self._text
        sample = self._int(body, "sample", label, sid, 2)
        over = text(body, "over", label, sid)
        if sample is not None and over is not None:
            self.out.error(
                "sample-and-over", f"{label}: use 'sample' or 'over', not both", body.at("over"), sid, "over"
            )
        if over is not None and not PLACEHOLDER.search(over):
            self.out.error(
                "bad-value",
                f"{label}: 'over' must name a list as \"{{{{path}}}}\", got '{over}'",
                body.at("over"),
                sid,
                "over",
            )
        parse = text(body, "parse", label, sid)
        if parse is not None and parse not in ("list", "json"):
            self.out.error(
                "bad-value", f"{label}: 'parse' must be 'list' or 'json', got '{parse}'", body.at("parse"), sid, "parse"
            )
        tier = text(body, "tier", label, sid)
        if tier is not None and tier not in TIERS:
            self.out.error(
                "bad-value",
                f"{label}: 'tier' must be one of {', '.join(TIERS)}, got '{tier}'{did_you_mean(tier, TIERS)}",
                body.at("tier"),
                sid,
                "tier",
            )
        input_map = body.get("input") if kind != "generative" else None
        if input_map is None:
            input_map = {}
        elif not isinstance(input_map, dict):
            self.out.error(
                "wrong-type",
                f"{label}: 'input' must be a mapping, not {_type_name(input_map)}",
                body.at("input"),
                sid,
                "input",
            )
            input_map = {}
        idempotent = True
        if kind == "tool" and "idempotent" in body:
            idempotent = self._bool(body, "idempotent", label, sid)
        return State(
            id=sid,
            kind=kind,
            output=text(body, "output", label, sid, "") or "",
            gates=self._gates(sid, body),
            structure=text(body, "structure", label, sid),
            prompt=(text(body, "prompt", label, sid, "") or "") if kind == "generative" else "",
            execution=text(body, "execution", label, sid),
            tier=tier if kind != "tool" else None,
            reason=self._bool(body, "reason", label, sid) if kind == "generative" else False,
            accumulate=self._bool(body, "accumulate", label, sid),
            sample=sample,
            over=over,
            parse=parse if kind == "generative" else None,
            max_visits=self._int(body, "max_visits", label, sid, 1),
            call=text(body, "call", label, sid) if kind == "call" else None,
            tool=text(body, "tool", label, sid) if kind == "tool" else None,
            input=MappingProxyType({str(k): plain(v) for k, v in input_map.items()}),
            idempotent=idempotent,
            on_error=self._on_error(sid, body) if kind == "tool" else (),
            ask_human=self._bool(body, "ask_human", label, sid) if kind == "generative" else False,
            line=body.where.line,
        )

    def _gates(self, sid: str, body: LocatedMap) -> tuple[Gate, ...]:
        raw = body.get("gates")
        label = _state_label(sid)
        if raw is None:
            return ()
        if not isinstance(raw, list):
            self.out.error(
                "wrong-type",
                f"{label}: 'gates' must be a list of gates, not {_type_name(raw)}",
                body.at("gates"),
                sid,
                "gates",
            )
            return ()
        if not raw:
            self.out.error(
                "missing-key", f"{label}: 'gates' is empty; add at least one gate", body.at("gates"), sid, "gates"
            )
        gates = []
        for index, item in enumerate(raw):
            where = raw.at(index) if isinstance(raw, LocatedList) else body.at("gates")
            if not isinstance(item, LocatedMap):
                self.out.error(
                    "wrong-type",
                    f"{label}: gate {index + 1} must be a mapping with 'when', not {_type_name(item)}",
                    where,
                    sid,
                    "gates",
                )
                continue
            gates.append(self._gate(sid, index, item, where))
        return tuple(gates)

    def _gate(self, sid: str, index: int, written: LocatedMap, where: Where) -> Gate:
        label = f"{_state_label(sid)}, gate {index + 1}"
        self._duplicates(written, sid)
        for key in written:
            if key not in GATE_KEYS:
                hint = did_you_mean(key, GATE_KEYS - set(written))
                self.out.error(
                    "unknown-key",
                    f"{label}: unknown key '{key}'{hint}"
                    + ("" if hint else f" (a gate takes {', '.join(sorted(GATE_KEYS))})"),
                    written.at(key),
                    sid,
                    str(key),
                )
        gate = self._known_keys(written, GATE_KEYS)
        if "when" not in gate:
            self.out.error(
                "missing-key", f"{label}: a gate needs 'when:' (a condition, or 'otherwise')", where, sid, "when"
            )
        when = self._text(gate, "when", label, sid, "") or ""
        hook = self._text(gate, "hook", label, sid)
        to = gate.get("to")
        if to is not None and not isinstance(to, str):
            self.out.error(
                "wrong-type", f"{label}: 'to' must be a state id or END, not {_type_name(to)}", gate.at("to"), sid, "to"
            )
            to = str(to)
        policies: list[Policy] = []
        if "then" in gate:
            if gate["then"] != "ok":
                self.out.error(
                    "bad-value", f"{label}: 'then' can only be 'ok', got {gate['then']!r}", gate.at("then"), sid, "then"
                )
            policies.append("ok")
        repair = 0
        if "repair" in gate:
            repair = self._int(gate, "repair", label, sid, 1) or 0
            policies.append("repair")
        if "escalate" in gate:
            if gate["escalate"] is not True:
                self.out.error(
                    "bad-value", f"{label}: 'escalate' can only be true", gate.at("escalate"), sid, "escalate"
                )
            policies.append("escalate")
        if "fail" in gate:
            if gate["fail"] is not True:
                self.out.error("bad-value", f"{label}: 'fail' can only be true", gate.at("fail"), sid, "fail")
            policies.append("fail")
        if len(policies) != 1:
            found = ", ".join(policies) if policies else "none"
            self.out.error(
                "gate-policy",
                f"{label}: a gate needs exactly one policy (then: ok, repair: N, "
                f"escalate: true or fail: true); found {found}",
                where,
                sid,
            )
        policy = policies[0] if policies else None
        if policy == "fail" and to is not None:
            self.out.error(
                "misplaced-key", f"{label}: a fail gate ends the run, so it takes no 'to'", gate.at("to"), sid, "to"
            )
        if policy in ("ok", "repair", "escalate") and to is None:
            self.out.error("missing-key", f"{label}: a {policy} gate needs 'to:' (a state id or END)", where, sid, "to")
        ask = self._text(gate, "ask", label, sid)
        reply_to = self._text(gate, "reply_to", label, sid)
        for key in ("ask", "reply_to"):
            if key in gate and policy != "escalate":
                self.out.error(
                    "misplaced-key", f"{label}: '{key}' only applies to escalate gates", gate.at(key), sid, key
                )
        if reply_to is not None and not _DOTTED_PATH.match(reply_to):
            self.out.error(
                "bad-value",
                f"{label}: 'reply_to' must be a dotted context path like human.reply, got '{reply_to}'",
                gate.at("reply_to"),
                sid,
                "reply_to",
            )
        return Gate(
            when=when, policy=policy, to=to, repair=repair, hook=hook, ask=ask, reply_to=reply_to, line=where.line
        )

    def _on_error(self, sid: str, body: LocatedMap) -> tuple[OnError, ...]:
        raw = body.get("on_error")
        label = f"{_state_label(sid)}: on_error"
        if raw is None:
            return ()
        if not isinstance(raw, list):
            self.out.error(
                "wrong-type",
                f"{label} must be a list of matchers, not {_type_name(raw)}",
                body.at("on_error"),
                sid,
                "on_error",
            )
            return ()
        matchers = []
        for index, item in enumerate(raw):
            where = raw.at(index) if isinstance(raw, LocatedList) else body.at("on_error")
            if not isinstance(item, LocatedMap):
                self.out.error("wrong-type", f"{label} item {index + 1} must be a mapping", where, sid, "on_error")
                continue
            for key in item:
                if key not in ON_ERROR_KEYS:
                    hint = did_you_mean(key, ON_ERROR_KEYS - set(item))
                    self.out.error(
                        "unknown-key",
                        f"{label} item {index + 1}: unknown key '{key}'{hint}"
                        + ("" if hint else " (a matcher takes match and one of retry, route, fallback)"),
                        item.at(key),
                        sid,
                        "on_error",
                    )
            item = self._known_keys(item, ON_ERROR_KEYS)
            match = self._text(item, "match", label, sid, "") or ""
            try:
                with warnings.catch_warnings():  # "possible nested set" and the like are not the user's problem here
                    warnings.simplefilter("ignore")
                    re.compile(match)
            except (re.error, RecursionError, OverflowError) as exc:
                self.out.error(
                    "bad-value",
                    f"{label} item {index + 1}: 'match' is not a valid pattern ({exc})",
                    item.at("match"),
                    sid,
                    "on_error",
                )
                match = re.escape(match)
            actions = [key for key in ("retry", "route", "fallback") if key in item]
            if len(actions) != 1:
                self.out.error(
                    "gate-policy",
                    f"{label} item {index + 1}: give exactly one of retry, route or fallback",
                    where,
                    sid,
                    "on_error",
                )
            retry = self._int(item, "retry", label, sid, 1) or 0
            route = self._text(item, "route", label, sid)
            matchers.append(
                OnError(
                    match=match,
                    retry=retry,
                    route=route,
                    fallback=plain(item.get("fallback")),
                    has_fallback="fallback" in item,
                    line=where.line,
                )
            )
        return tuple(matchers)

    # -- cross references ----------------------------------------------------------

    def _state_keys(self, sid: str, written: LocatedMap) -> LocatedMap:
        """A state's keys with its typos read as the keys they are close to, when correcting: only as keys of
        the kind of state it then is, and never as a second kind's marker (``tool``, ``call``, ``prompt``)."""
        if not self.correct:
            return written
        body, renames = corrected_keys(written, ALL_STATE_KEYS)
        if not renames:
            return written
        kind = "tool" if "tool" in body else "call" if "call" in body else "generative"
        allowed = KIND_KEYS[kind] | {key for key, owner in EXTENSION_KEYS.items() if owner == kind}
        markers = [key for key in ("tool", "call", "prompt") if key in body]
        keep = {
            typo: key
            for typo, key in renames.items()
            if key in allowed and not (key in ("tool", "call", "prompt") and len(markers) > 1)
        }
        return body if keep == renames else renamed_keys(written, keep)

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
