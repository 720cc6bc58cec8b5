"""Static findings about a machine document: structure (from the loader) plus its graph.

``check`` never raises: whatever the text, the answer is a list of findings sorted by
line.  Errors are what ``mkl check`` refuses; warnings are worth a look but legal.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Collection, Iterator
from functools import cached_property

from . import builtin_hooks, stdlib
from .findings import Finding, Severity
from .loader import analyse_located
from .located import LocatedMap, YamlSyntaxError, parse_located
from .model import END, Gate, Machine, State
from .suggest import did_you_mean


def check(text: str, callable_machines: Collection[str] | None = None, first_line: int = 1) -> list[Finding]:
    """Every structural and graph finding about ``text``, sorted by line.

    ``callable_machines`` names the machines a ``call:`` may reach besides the standard library (the
    machine files beside it, the notebook's machines); given, a call to any other name is an error.
    ``first_line``: the number of the text's first line where it was written (a ``%%mkl`` cell's body: 2).
    """
    if not isinstance(text, str):
        return [Finding("error", "not-text", f"a machine document must be YAML text, not {type(text).__name__}")]
    try:
        doc, machine, findings = analyse_located(text, first_line)
        if machine is not None:
            # A name that no state has, or a state that could not be built, leaves the graph short of an
            # edge: what the paths would then say (no way to END, a state out of reach) follows from that
            # one mistake, already reported, and is not said again.
            paths = not any(
                f.code == "bad-reference" or (f.code == "wrong-type" and f.state and f.key in (None, "gates"))
                for f in findings
            )
            lines = _Lines(machine.source, doc, first_line)
            findings = findings + _graph_findings(machine, callable_machines, lines, paths=paths)
    except Exception as exc:  # a bug of ours must not become the user's traceback
        return [
            Finding(
                "error",
                "internal-error",
                f"the checker failed on this document ({type(exc).__name__}: {str(exc)[:200]}); please report it",
            )
        ]
    return _sorted(findings)


def check_defined(machine: Machine, callable_machines: Collection[str] | None = None) -> list[Finding]:
    """:func:`check` of a machine's source, placed where it was written (a ``%%mkl`` cell's lines)."""
    return check(machine.source, callable_machines, machine.first_line)


def check_machine(machine: Machine, callable_machines: Collection[str] | None = None) -> list[Finding]:
    """The graph findings of an already-built machine, sorted by line (``callable_machines``: see :func:`check`)."""
    return _graph_findings(machine, callable_machines, _Lines(machine.source, first_line=machine.first_line))


def _graph_findings(
    machine: Machine, callable_machines: Collection[str] | None, lines: _Lines, *, paths: bool = True
) -> list[Finding]:
    findings: list[Finding] = []
    if callable_machines is not None:
        findings += _call_findings(machine, callable_machines, lines)
    if paths and machine.entry in machine.states:
        findings += _path_findings(machine, lines)
    findings += _result_findings(machine, lines)
    tools = {declaration.name for declaration in machine.tools}
    hooks = {declaration.name for declaration in machine.hooks}
    for state in machine.states.values():
        findings += _catch_all_findings(state)
        findings += _max_visits_findings(state, lines)
        findings += _unshown_ask_findings(state)
        findings += _declaration_findings(state, tools, hooks, lines)
    return _sorted(findings)


def _sorted(findings: list[Finding]) -> list[Finding]:
    return sorted(findings, key=lambda f: f.line or 0)


class _Lines:
    """Where keys sit in the source, for findings the model alone cannot place: the document already parsed,
    else the source parsed the first time a key is asked for."""

    def __init__(self, source: str, doc: LocatedMap | None = None, first_line: int = 1) -> None:
        self._source = source
        self._first_line = first_line
        if doc is not None:
            self._doc = doc

    @cached_property
    def _doc(self) -> LocatedMap | None:
        try:
            doc = parse_located(self._source, self._first_line)
        except YamlSyntaxError:
            return None
        return doc if isinstance(doc, LocatedMap) else None

    def top(self, key: str) -> tuple[int | None, int | None]:
        doc = self._doc
        if doc is None or key not in doc.key_positions:
            return None, None
        where = doc.at(key)
        return where.line, where.column

    def state(self, state: State) -> tuple[int | None, int | None]:
        """Where the state's name is written under ``states:``."""
        states = self._doc.get("states") if self._doc is not None else None
        if isinstance(states, LocatedMap) and state.id in states.key_positions:
            where = states.at(state.id)
            return where.line, where.column
        return state.line or None, None

    def state_key(self, state: State, key: str) -> tuple[int | None, int | None]:
        states = self._doc.get("states") if self._doc is not None else None
        body = states.get(state.id) if isinstance(states, LocatedMap) else None
        if isinstance(body, LocatedMap) and key in body.key_positions:
            where = body.at(key)
            return where.line, where.column
        return state.line or None, None


def _finding(
    severity: Severity,
    code: str,
    message: str,
    at: tuple[int | None, int | None],
    state: str | None = None,
    key: str | None = None,
) -> Finding:
    return Finding(severity, code, message, at[0], at[1], state, key)


def _label(state: State) -> str:
    return f"state '{state.id}'"


# -- the graph -----------------------------------------------------------------


def _is_edge(gate: Gate) -> bool:
    return gate.policy != "fail" and gate.to is not None


def _successors(machine: Machine, state: State) -> Iterator[str]:
    for gate in state.gates:
        if _is_edge(gate) and gate.to in machine.states:
            yield gate.to  # type: ignore[misc]
    for matcher in state.on_error:
        if matcher.route in machine.states:
            yield matcher.route  # type: ignore[misc]


def _finishes(state: State) -> bool:
    return any(_is_edge(gate) and gate.to == END for gate in state.gates)


def _breadth_first(machine: Machine) -> dict[str, str | None]:
    """Every state reachable from the entry, in order of distance, with the state it is first reached from."""
    parents: dict[str, str | None] = {machine.entry: None}
    queue = deque([machine.entry])
    while queue:
        current = queue.popleft()
        for target in _successors(machine, machine.states[current]):
            if target not in parents:
                parents[target] = current
                queue.append(target)
    return parents


def _path_to(parents: dict[str, str | None], state_id: str) -> list[str]:
    path = [state_id]
    while (parent := parents[path[-1]]) is not None:
        path.append(parent)
    return path[::-1]


def _show_path(path: list[str]) -> str:
    shown = path if len(path) <= 8 else [*path[:4], "...", *path[-3:]]
    return " -> ".join([*shown, END])


def _path_findings(machine: Machine, lines: _Lines) -> list[Finding]:
    entry = machine.states[machine.entry]
    parents = _breadth_first(machine)
    findings = [
        _finding(
            "warning",
            "unreachable-state",
            f"{_label(state)} cannot be reached from the entry state "
            f"'{machine.entry}'; route a gate to it or remove it",
            lines.state(state),
            state.id,
        )
        for state in machine.states.values()
        if state.id not in parents
    ]
    nearest = next((sid for sid in parents if _finishes(machine.states[sid])), None)
    if nearest is None:
        findings.append(
            _finding(
                "error",
                "no-path-to-end",
                f"no path from the entry state '{machine.entry}' reaches END: no reachable "
                "state has a gate with 'to: END' (other than fail); add one",
                (entry.line or None, None),
                entry.id,
            )
        )
        return findings
    shortest = _path_to(parents, nearest)
    if 1 <= machine.budget < len(shortest):
        at = lines.top("budget")
        findings.append(
            _finding(
                "error",
                "budget-below-shortest-path",
                f"budget {machine.budget} is below the {len(shortest)} steps of "
                f"the shortest path to END ({_show_path(shortest)}); raise budget to at least {len(shortest)}",
                at if at[0] is not None else (entry.line or None, None),
                entry.id,
                "budget",
            )
        )
    elif 1 <= machine.budget < len(shortest) + 2:
        at = lines.top("budget")
        findings.append(
            _finding(
                "warning",
                "budget-no-headroom",
                f"budget {machine.budget} leaves no room beyond the {len(shortest)} steps of the shortest path to "
                f"END ({_show_path(shortest)}): one repair or retry halts the run; raise it to at least "
                f"{len(shortest) + 2}",
                at if at[0] is not None else (entry.line or None, None),
                entry.id,
                "budget",
            )
        )
    return findings


def _result_findings(machine: Machine, lines: _Lines) -> list[Finding]:
    produced = {state.output for state in machine.states.values() if state.output}
    if machine.result is None or machine.result in produced:
        return []
    given = " (only the context's starting value)" if machine.result in machine.context else ""
    return [
        _finding(
            "warning",
            "result-not-produced",
            f"result key '{machine.result}' is the output of no state, so a finished run returns "
            f"{'that value' if given else 'null'}{given}; name a state's output",
            lines.top("result"),
            None,
            "result",
        )
    ]


# -- per state -----------------------------------------------------------------


def _catch_all_findings(state: State) -> list[Finding]:
    if not state.gates:
        return []
    catch_alls = [gate for gate in state.gates if gate.is_otherwise]
    at = (state.line or None, None)
    if not catch_alls:
        return [
            _finding(
                "warning",
                "no-catch-all",
                f"{_label(state)} has no 'when: otherwise' gate, so the run "
                "halts no-gate-matched when no condition holds; add one as its last gate",
                at,
                state.id,
                "gates",
            )
        ]
    if all(gate.policy == "repair" for gate in catch_alls):
        return [
            _finding(
                "warning",
                "repair-only-catch-all",
                f"{_label(state)}: its only 'when: otherwise' gate is "
                "a repair gate, which stops matching once its repairs are spent; add a final otherwise gate "
                "with then: ok, escalate or fail",
                (catch_alls[-1].line or None, None),
                state.id,
                "gates",
            )
        ]
    return []


def _unshown_ask_findings(state: State) -> list[Finding]:
    """An ``ask:`` on an escalate gate to END is never shown: a run never suspends there (docs/language.md §7)."""
    return [
        _finding(
            "warning",
            "ask-never-shown",
            f"{_label(state)}, gate {index}: this escalate gate goes to END, where a run never suspends, so its "
            "ask: is never shown and no reply is awaited; to ask before ending, route it to a state that "
            "records the reply (its gates then go to END)",
            (gate.line or None, None),
            state.id,
            "ask",
        )
        for index, gate in enumerate(state.gates, start=1)
        if gate.policy == "escalate" and gate.to == END and gate.ask is not None
    ]


def _max_visits_findings(state: State, lines: _Lines) -> list[Finding]:
    if state.max_visits is None or state.max_visits < 1:
        return []
    at = lines.state_key(state, "max_visits")
    return [
        _finding(
            "warning",
            "max-visits-under-repair",
            f"{_label(state)}: max_visits {state.max_visits} is at or "
            f"under the repair budget {gate.repair} of gate {index}, so the loop ceiling halts the run before "
            f"those repairs are spent; raise max_visits to at least {gate.repair + 1}",
            at,
            state.id,
            "max_visits",
        )
        for index, gate in enumerate(state.gates, start=1)
        if gate.policy == "repair" and gate.repair >= 1 and gate.repair >= state.max_visits
    ]


def _call_findings(machine: Machine, callable_machines: Collection[str], lines: _Lines) -> list[Finding]:
    known = {*callable_machines, *stdlib.NAMES, machine.name}
    return [
        _finding(
            "error",
            "unknown-call",
            f"{_label(state)} calls machine '{state.call}'{did_you_mean(state.call, known)}: it is neither a "
            "machine file beside this one, a machine defined in the notebook, nor one of the standard library's "
            f"({', '.join(stdlib.NAMES)}); the run would halt there",
            lines.state_key(state, "call"),
            state.id,
            "call",
        )
        for state in machine.states.values()
        if state.kind == "call" and state.call is not None and state.call not in known
    ]


def is_builtin_hook(name: str) -> bool:
    """Hooks every run resolves without registration (docs/language.md, "Built-in hooks")."""
    return builtin_hooks.is_builtin(name)


def _declaration_findings(state: State, tools: set[str], hooks: set[str], lines: _Lines) -> list[Finding]:
    findings = []
    if state.kind == "tool" and state.tool is not None and state.tool not in tools:
        findings.append(
            _finding(
                "warning",
                "undeclared-tool",
                f"{_label(state)} uses tool '{state.tool}', which the top-level 'tools:' "
                f"list does not declare; add {{name: {state.tool}, description: ...}} to it",
                lines.state_key(state, "tool"),
                state.id,
                "tool",
            )
        )
    for index, gate in enumerate(state.gates, start=1):
        if gate.hook is not None and gate.hook not in hooks and not is_builtin_hook(gate.hook):
            findings.append(
                _finding(
                    "warning",
                    "undeclared-hook",
                    f"{_label(state)}, gate {index}: hook '{gate.hook}' is neither "
                    f"declared in the top-level 'hooks:' list nor a built-in ({builtin_hooks.names()}); declare it",
                    (gate.line or None, None),
                    state.id,
                    "hook",
                )
            )
    return findings
