"""A machine drawn as a mermaid ``stateDiagram-v2`` (``text/vnd.mermaid``), as an SVG image, and as text.

A notebook output carries the SVG and the text (:func:`diagram_bundle`); the mermaid source is for
those who want it as text.  Pure Python: everything here returns strings.

State ids become safe node ids (``s0``, ``s1`` …) declared with quoted labels,
and every label is sanitized, so no state id or gate text can break the source.
``stateDiagram-v2`` has no styles for transitions: a transition the run took is
marked in its label (``✔``, or ``✔×N`` when taken N times).

A machine of more than ``DRAWN_STATES`` states (or ``DRAWN_EDGES`` transitions) is not drawn
whole: mermaid refuses big sources (500 edges, 50,000 characters by default) and no one reads
such a picture. Its diagram and text twin show the entry, where the run is, the states it
entered most (the latest first) and their neighbours, up to those limits; one node stands for
the rest, with the count of what it leaves out.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from ..lang.model import END, Gate, Machine
from .common import LABEL_MAX, shorten
from .diagram_svg import SvgEdge, SvgNode, graph_svg

CurrentKind = Literal["running", "pending", "halted"]
MERMAID_MIME = "text/vnd.mermaid"
SVG_MIME = "image/svg+xml"
NODE_LABEL_MAX = 80  # a state's label in the drawing (the text twin names it whole)
DRAWN_STATES = 60  # a machine with more states is drawn around its entry and the run's states
DRAWN_EDGES = 150  # ... and so is one with more transitions; at most this many are drawn
FAILED_NODE = "failed"
INDENT = "    "

# Fixed colours (CSS variables are not allowed in untrusted output); only the classes in use are emitted.
CLASS_STYLES: dict[str, str] = {
    "dim": "fill:#f6f8fa,stroke:#c8ccd1,color:#8c959f,stroke-dasharray:4 4",
    "visited": "stroke-width:2px",
    "missing": "fill:#fff8c5,stroke:#9a6700,color:#6f4b00,stroke-dasharray:4 4",
    "failed": "fill:#ffebe9,stroke:#cf222e,color:#82071e",
    "current": "fill:#0969da,stroke:#033d8b,color:#ffffff,stroke-width:3px",
    "running": "fill:#0969da,stroke:#033d8b,color:#ffffff,stroke-width:3px",
    "pending": "fill:#bf8700,stroke:#7d4e00,color:#ffffff,stroke-width:3px",
    "halted": "fill:#cf222e,stroke:#82071e,color:#ffffff,stroke-width:3px",
    "more": "fill:#ffffff,stroke:#8c959f,color:#57606a,stroke-dasharray:2 2",
}
MORE_NODE = "more"

# Characters that break mermaid source (``;``/``#`` end a transition label, ``"`` ends a state label,
# ``{``/``}`` open composite states and ``%%{`` directives), or that labels render as markup.
_MERMAID_SAFE = str.maketrans(
    {
        '"': "'",
        "`": "'",
        ":": "∶",
        ";": ",",
        "#": "＃",
        "{": "(",
        "}": ")",
        "<": "‹",
        ">": "›",
        "&": "+",
        "\\": "/",
        "|": "/",
    }
)

Target = tuple[str, ...]  # ("state", id) | ("end",) | ("fail",)
_END: Target = ("end",)
_FAIL: Target = ("fail",)
_MORE: Target = ("more",)  # the node standing for the states a big machine's drawing leaves out


@dataclass
class _Edge:
    source: str
    target: Target
    labels: list[str] = field(default_factory=list)


# -- labels ------------------------------------------------------------------------------------


def gate_label(gate: Gate, limit: int = LABEL_MAX) -> str:
    """A short form of a gate: its condition (``otherwise`` for the catch-all) and any non-ok policy."""
    condition = "otherwise" if gate.is_otherwise else gate.when
    suffix = {"repair": f"repair ×{gate.repair}", "escalate": "escalate", "fail": "fail"}.get(gate.policy or "")
    if gate.policy != "fail" and gate.to is None:
        suffix = f"{suffix or gate.policy or 'no policy'}, no to"
    if suffix is None:
        return shorten(condition, limit)
    return f"{shorten(condition, max(8, limit - len(suffix) - 3))} · {suffix}"


def _mermaid_text(text: str) -> str:
    """Text that is safe inside a quoted state label or after ``:`` in a transition."""
    cleaned = "".join(ch if ch.isprintable() else " " for ch in str(text)).translate(_MERMAID_SAFE)
    return " ".join(cleaned.split()) or "?"


def _taken_mark(count: int) -> str:
    if count <= 0:
        return ""
    return " ✔" if count == 1 else f" ✔×{count}"


# -- the graph ---------------------------------------------------------------------------------


def _target(to: str | None) -> Target:
    if to is None:
        return _FAIL
    return _END if to == END else ("state", to)


def _edges(machine: Machine) -> list[_Edge]:
    """One edge per (source, target) pair in document order; gates between the same pair are merged."""
    edges: dict[tuple[str, Target], _Edge] = {}
    for state in machine.states.values():
        transitions = [(gate_label(g), _FAIL if g.policy == "fail" else _target(g.to)) for g in state.gates]
        transitions += [("on_error", _target(m.route)) for m in state.on_error if m.route is not None]
        for label, target in transitions:
            edges.setdefault((state.id, target), _Edge(state.id, target)).labels.append(label)
    return list(edges.values())


def _merged_label(edge: _Edge, taken: int) -> str:
    return shorten(" / ".join(edge.labels), LABEL_MAX) + _taken_mark(taken)


def _missing_states(machine: Machine, edges: Iterable[_Edge]) -> list[str]:
    """Gate targets and an entry that name no state (possible in unvalidated machines)."""
    named = [machine.entry] + [e.target[1] for e in edges if e.target[0] == "state"]
    return list(dict.fromkeys(sid for sid in named if sid not in machine.states))


def _node_ids(machine: Machine, missing: Sequence[str]) -> dict[str, str]:
    return {sid: f"s{index}" for index, sid in enumerate([*machine.states, *missing])}


def path_from_trace(trace: Sequence[Mapping[str, Any]]) -> list[tuple[str, str]]:
    """The transitions a run took: each top-level step's state and its ``to`` (steps with no ``to`` skipped)."""
    return [(str(step.get("state")), str(step["to"])) for step in trace if step.get("to") is not None]


def _taken(path: Sequence[tuple[str, str]] | None) -> Counter[tuple[str, Target]]:
    return Counter((source, _target(to)) for source, to in path or ())


def _by_source(edges: Iterable[_Edge]) -> dict[str, list[_Edge]]:
    """The edges leaving each state, in document order (grouped once, not searched once per state)."""
    grouped: dict[str, list[_Edge]] = {}
    for edge in edges:
        grouped.setdefault(edge.source, []).append(edge)
    return grouped


@dataclass(frozen=True)
class _Drawing:
    """What a diagram shows: the states (in document order) and the transitions; what it leaves out."""

    states: list[str]
    edges: list[_Edge]
    taken: Mapping[tuple[str, Target], int]
    states_left: int = 0
    edges_left: int = 0
    into: tuple[str, ...] = ()  # drawn states entered from states left out

    @property
    def whole(self) -> bool:
        return not self.states_left and not self.edges_left


def _focus(
    nodes: Sequence[str],
    entry: str,
    by_source: Mapping[str, Sequence[_Edge]],
    visits: Mapping[str, int] | None,
    path: Sequence[tuple[str, str]] | None,
    current: str | None,
) -> list[str]:
    """The states a big machine's drawing shows, in document order: the entry, the current state and where
    it leads, the states the run entered most (the latest first among equals), then their neighbours
    breadth first."""
    order = {sid: index for index, sid in enumerate(nodes)}
    latest: dict[str, int] = {}
    for index, (source, to) in enumerate(path or ()):
        latest[source] = latest[to] = index
    entered = sorted(
        (sid for sid, count in (visits or {}).items() if count and sid in order),
        key=lambda sid: (-(visits or {})[sid], -latest.get(sid, -1), order[sid]),
    )
    following = [edge.target[1] for edge in by_source.get(current or "", ()) if edge.target[0] == "state"]
    seeds = [sid for sid in (entry, current, *following, *entered) if sid in order]
    chosen = dict.fromkeys(list(dict.fromkeys(seeds))[:DRAWN_STATES])
    queue = list(chosen)
    for sid in queue:
        if len(chosen) >= DRAWN_STATES:
            break
        for edge in by_source.get(sid, ()):
            if edge.target[0] == "state" and edge.target[1] not in chosen and len(chosen) < DRAWN_STATES:
                chosen[edge.target[1]] = None
                queue.append(edge.target[1])
    return sorted(chosen, key=order.__getitem__)


def _drawing(
    machine: Machine,
    edges: list[_Edge],
    missing: Sequence[str],
    visits: Mapping[str, int] | None,
    path: Sequence[tuple[str, str]] | None,
    current: str | None,
) -> _Drawing:
    """The whole machine when it is small enough to draw; else the part around its entry and the run."""
    nodes = [*machine.states, *missing]
    taken = _taken(path)
    if len(nodes) <= DRAWN_STATES and len(edges) <= DRAWN_EDGES:
        return _Drawing(nodes, edges, taken)
    drawn = _focus(nodes, machine.entry, _by_source(edges), visits, path, current)
    shown = set(drawn)
    kept: dict[tuple[str, Target], _Edge] = {}
    counts: Counter[tuple[str, Target]] = Counter()
    into: dict[str, None] = {}
    for edge in edges:
        inside = edge.target[0] != "state" or edge.target[1] in shown
        if edge.source not in shown:
            if edge.target[0] == "state" and inside:
                into[edge.target[1]] = None
            continue
        key = (edge.source, edge.target if inside else _MORE)
        kept.setdefault(key, _Edge(key[0], key[1])).labels.extend(edge.labels)
        counts[key] += taken[(edge.source, edge.target)]
    drawn_edges = list(kept.values())[:DRAWN_EDGES]
    return _Drawing(
        drawn,
        drawn_edges,
        counts,
        states_left=len(nodes) - len(drawn),
        edges_left=len(kept) - len(drawn_edges),
        into=tuple(sid for sid in drawn if sid in into),
    )


def _left_out(drawing: _Drawing) -> str:
    """What a big machine's drawing leaves out, as a phrase: "19,940 more states, 3 more transitions"."""
    parts = []
    if drawing.states_left:
        parts.append(f"{drawing.states_left:,} more state{'s' if drawing.states_left != 1 else ''}")
    if drawing.edges_left:
        parts.append(f"{drawing.edges_left:,} more transition{'s' if drawing.edges_left != 1 else ''}")
    return ", ".join(parts)


# -- mermaid -----------------------------------------------------------------------------------


def _node_label(sid: str, *, count: int | None, missing: bool, kind: str | None) -> str:
    """A state's label as drawn: its id (cut), how often the run entered it, and where the run is."""
    label = shorten(f"{sid} (missing)" if missing else sid, NODE_LABEL_MAX)
    if count:
        label += f" ×{count}"
    if kind:
        label += f" · {kind}"
    return label


def _node_classes(
    machine: Machine,
    ids: Mapping[str, str],
    visits: Mapping[str, int] | None,
    current: str | None,
    current_kind: str | None,
) -> dict[str, list[str]]:
    classes: dict[str, list[str]] = {name: [] for name in CLASS_STYLES}
    for sid, node in ids.items():
        if sid == current:
            classes[current_kind if current_kind in CLASS_STYLES else "current"].append(node)
        elif sid not in machine.states:
            classes["missing"].append(node)
        elif visits is not None:
            classes["visited" if visits.get(sid, 0) else "dim"].append(node)
    return classes


def machine_mermaid(
    machine: Machine,
    *,
    visits: Mapping[str, int] | None = None,
    path: Sequence[tuple[str, str]] | None = None,
    current: str | None = None,
    current_kind: CurrentKind | None = None,
) -> str:
    """The ``stateDiagram-v2`` source of ``machine``; with a run's visits, path and current state marked.

    A machine too big to draw whole is drawn around its entry and the run (see the module's docstring).
    """
    edges = _edges(machine)
    missing = _missing_states(machine, edges)
    drawing = _drawing(machine, edges, missing, visits, path, current)
    ids = _node_ids(machine, missing)
    drawn_ids = {sid: ids[sid] for sid in drawing.states}
    missing_set = set(missing)
    lines = ["stateDiagram-v2"]
    for sid, node in drawn_ids.items():
        count = (visits or {}).get(sid)
        kind = current_kind if sid == current else None
        label = _mermaid_text(_node_label(sid, count=count, missing=sid in missing_set, kind=kind))
        lines.append(f'{INDENT}state "{label}" as {node}')
    failing = any(edge.target == _FAIL for edge in drawing.edges)
    if failing:
        lines.append(f'{INDENT}state "{FAILED_NODE}" as {FAILED_NODE}')
    if not drawing.whole:
        lines.append(f'{INDENT}state "… {_mermaid_text(_left_out(drawing))}, not drawn" as {MORE_NODE}')
    if machine.entry in drawn_ids:
        lines.append(f"{INDENT}[*] --> {ids[machine.entry]}")
    lines += [f"{INDENT}{MORE_NODE} --> {ids[sid]}" for sid in drawing.into]
    for edge in drawing.edges:
        label = _mermaid_text(_merged_label(edge, drawing.taken[(edge.source, edge.target)]))
        lines.append(f"{INDENT}{ids[edge.source]} --> {_node_of(edge.target, ids)} : {label}")
    classes = _node_classes(machine, drawn_ids, visits, current, current_kind)
    if failing:
        classes["failed"].append(FAILED_NODE)
    if not drawing.whole:
        classes["more"].append(MORE_NODE)
    used = {name: nodes for name, nodes in classes.items() if nodes}
    lines += [f"{INDENT}classDef {name} {CLASS_STYLES[name]}" for name in used]
    lines += [f"{INDENT}class {','.join(nodes)} {name}" for name, nodes in used.items()]
    return "\n".join(lines) + "\n"


def _node_of(target: Target, ids: Mapping[str, str]) -> str:
    if target == _END:
        return "[*]"
    if target == _FAIL:
        return FAILED_NODE
    return MORE_NODE if target == _MORE else ids[target[1]]


# -- svg ---------------------------------------------------------------------------------------


def _class_style(name: str) -> dict[str, str]:
    """A ``classDef``'s properties as a mapping (``fill:#fff,stroke:#000`` -> {fill: #fff, stroke: #000})."""
    return {key: value for key, _, value in (part.partition(":") for part in CLASS_STYLES[name].split(","))}


def machine_svg(
    machine: Machine,
    *,
    visits: Mapping[str, int] | None = None,
    path: Sequence[tuple[str, str]] | None = None,
    current: str | None = None,
    current_kind: CurrentKind | None = None,
) -> str:
    """The same diagram as ``machine_mermaid``, drawn as a static SVG image (same states, labels, styles):
    for the frontends that cannot draw mermaid (Notebook 7, an HTML export read offline, a Git host)."""
    edges = _edges(machine)
    missing = _missing_states(machine, edges)
    drawing = _drawing(machine, edges, missing, visits, path, current)
    ids = _node_ids(machine, missing)
    drawn_ids = {sid: ids[sid] for sid in drawing.states}
    style_of = {
        node: name
        for name, nodes in _node_classes(machine, drawn_ids, visits, current, current_kind).items()
        for node in nodes
    }
    missing_set = set(missing)
    nodes = [SvgNode("[start]", shape="start")] if machine.entry in drawn_ids else []
    for sid, node in drawn_ids.items():
        name = style_of.get(node, "")
        label = _node_label(
            sid,
            count=(visits or {}).get(sid),
            missing=sid in missing_set,
            kind=current_kind if sid == current else None,
        )
        style = _class_style(name) if name else {}
        nodes.append(SvgNode(node, label, style=style, css_class=name, bold=name == "visited", marked=sid == current))
    targets = {edge.target for edge in drawing.edges}
    if _FAIL in targets:
        nodes.append(SvgNode(FAILED_NODE, FAILED_NODE, style=_class_style("failed"), css_class="failed"))
    if not drawing.whole:
        label = f"… {_left_out(drawing)}, not drawn"
        nodes.append(SvgNode(MORE_NODE, label, style=_class_style("more"), css_class="more"))
    if _END in targets:
        nodes.append(SvgNode("[end]", shape="end"))
    arrows = []
    if machine.entry in drawn_ids:
        entered = path is None or (visits or {}).get(machine.entry)
        arrows.append(SvgEdge("[start]", ids[machine.entry], kind=_edge_kind(path, 1 if entered else 0)))
    arrows += [SvgEdge(MORE_NODE, ids[sid]) for sid in drawing.into]
    for edge in drawing.edges:
        taken = drawing.taken[(edge.source, edge.target)]
        target = "[end]" if edge.target == _END else _node_of(edge.target, ids)
        arrows.append(SvgEdge(ids[edge.source], target, _merged_label(edge, taken), _edge_kind(path, taken)))
    return graph_svg(f"State diagram of machine {machine.name}", nodes, arrows)


def _edge_kind(path: Sequence[tuple[str, str]] | None, taken: int) -> str:
    if path is None:
        return "plain"
    return "taken" if taken else "untaken"


# -- text --------------------------------------------------------------------------------------


def _target_text(target: Target) -> str:
    if target == _END:
        return "END"
    return "(fail)" if target == _FAIL else target[1]


def _state_text(
    sid: str, kind: str, visits: Mapping[str, int] | None, current: str | None, current_kind: str | None
) -> str:
    text = f"{sid} ({kind})"
    if visits is not None:
        count = visits.get(sid, 0)
        text += f" ×{count}" if count else " (not visited)"
    if sid == current:
        text = f"* {text} · {current_kind or 'current'}"
    return text


def machine_text(
    machine: Machine,
    visits: Mapping[str, int] | None = None,
    *,
    path: Sequence[tuple[str, str]] | None = None,
    current: str | None = None,
    current_kind: CurrentKind | None = None,
) -> str:
    """The text/plain twin: one line per state with its transitions (and visit counts when given).

    A run's drawing (``path`` given) says in text what it adds to its machine's: the states entered, how
    often, and the transitions taken from each, where the run is, and the states not entered on one line;
    the transitions it did not take are its machine's, in the definition's twin.

    Of a machine too big to draw whole it lists the states the drawing shows, and says how many it leaves out.
    """
    edges = _edges(machine)
    missing = _missing_states(machine, edges)
    drawing = _drawing(machine, edges, missing, visits, path, current)
    by_source = _by_source(edges)
    taken = _taken(path)
    if path is not None:
        lines = [f"machine {machine.name}: the path taken (entry {machine.entry}, budget {machine.budget})"]
    else:
        lines = [f"machine {machine.name}: entry {machine.entry}, budget {machine.budget}"]
    listed = set(drawing.states)
    lines += [f"  missing state {sid}" for sid in missing if sid in listed]
    not_entered = []
    for sid in drawing.states:
        state = machine.states.get(sid)
        if state is None:
            continue  # a missing state: listed above
        if path is not None:
            count = (visits or {}).get(sid, 0)
            if not count and sid != current:
                not_entered.append(sid)
                continue
            head = f"{sid} ×{count}" if count else sid
            head = f"* {head} · {current_kind or 'current'}" if sid == current else head
            went = [
                f"-> {_target_text(e.target)} [{_merged_label(e, taken[(sid, e.target)])}]"
                for e in by_source.get(sid, ())
                if taken[(sid, e.target)]
            ]
            lines.append(f"  {head}  {' | '.join(went)}" if went else f"  {head}")
            continue
        transitions = [
            f"-> {_target_text(e.target)} [{_merged_label(e, taken[(sid, e.target)])}]" for e in by_source.get(sid, ())
        ]
        head = _state_text(sid, state.kind, visits, current, current_kind)
        lines.append(f"  {head}  {' | '.join(transitions) or '(no transitions)'}")
    if not_entered:
        lines.append(f"  not entered: {', '.join(not_entered)}")
    if drawing.states_left:
        left = drawing.states_left
        lines.append(
            f"  … and {left:,} more state{'s' if left != 1 else ''}, not shown: a machine of more than "
            f"{DRAWN_STATES} states or {DRAWN_EDGES} transitions is shown around its entry and the run's states"
        )
    return "\n".join(lines)


def diagram_bundle(machine: Machine, **kw: Any) -> dict[str, str]:
    """The MIME bundle of a diagram output (same keyword arguments as ``machine_mermaid``): the diagram as an
    SVG image, and its text twin.

    Every frontend shows the SVG (JupyterLab, Notebook 7, nbconvert's HTML, VS Code, Git hosts); a terminal
    shows the text. The mermaid source is left out: JupyterLab ranks its mermaid renderer before images, and
    that renderer writes its own drawing (some 35 KB, and its version) back into the output, so merely opening
    a notebook marked it modified and a saved one grew several times over.
    """
    return {
        SVG_MIME: machine_svg(machine, **kw),
        "text/plain": machine_text(machine, **kw),
    }
