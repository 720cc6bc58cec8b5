"""A machine document's ``states:``, each built as a :class:`State` with its gates and ``on_error`` matchers.

A state's kind comes from the key that marks it (``tool``, ``call``, else ``prompt``: generative); each of its
keys is then held to that kind's set (lang/keys.py), each value read as its type, and each gate to exactly
one policy. A state that is not a mapping is not built: its id is remembered, so that the routes naming it
are not reported a second time.
"""

from __future__ import annotations

import re
import warnings
from types import MappingProxyType

from .builder_base import _BuilderBase, _state_label, _type_name
from .interpolate import PLACEHOLDER
from .keys import ALL_STATE_KEYS, EXTENSION_KEYS, GATE_KEYS, KIND_KEYS, ON_ERROR_KEYS, REQUIRED
from .located import LocatedList, LocatedMap, Where, plain
from .model import END, TIERS, Gate, OnError, Policy, State, StateKind
from .suggest import corrected_keys, did_you_mean, renamed_keys

_DOTTED_PATH = re.compile(r"^[\w]+(\.[\w]+)*$")


class _StateBuilder(_BuilderBase):
    """The states of a machine document, each with its gates and ``on_error`` matchers."""

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
