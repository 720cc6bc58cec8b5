"""A directed graph drawn as a static SVG image: layered from the top, computed in plain Python.

Frontends that cannot draw mermaid (Notebook 7, an HTML export read offline, a Git host's notebook view,
VS Code) show this drawing of the same diagram. The layout is the usual layered one (Sugiyama): cycles
are broken by reversing the edges a depth-first walk finds going back; nodes get the longest-path layer
below their sources; every edge is split into one point per layer it crosses, with its label on a layer
of its own between two layers of nodes (so labels never cover a node or another label); the order within
each layer is improved by barycenter sweeps, keeping the order with the fewest crossings; and x positions
are pulled towards each node's neighbours while keeping every layer in order and apart.

Same input, same bytes: no dict or set order depends on hashing, and coordinates are rounded. Every text
comes from files other people wrote: it is escaped, control characters removed, and cut to one line.
"""

from __future__ import annotations

import bisect
import itertools
import math
import unicodedata
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from xml.sax.saxutils import escape

FONT_SIZE = 13
LABEL_FONT_SIZE = 11
NODE_HEIGHT = 30
RING = 5  # the gap between the box of the state where the run is and the ring around it
LABEL_HEIGHT = 16
NODE_PAD = 12  # text to box edge, each side
NODE_GAP = 24  # between neighbours in a layer
RANK_GAP = 12  # between layers
MARGIN = 12
SWEEPS = 6  # barycenter sweeps (down and up) when ordering layers
PLACE_ROUNDS = 8  # rounds of pulling x positions towards neighbours
BEND = 2.0  # a point of an edge this near the straight line past it is left out
MAX_POINTS = 12  # points an edge's path goes through, at most
LOOP_WIDTH = 22  # how far a self-loop reaches right of its node
START_RADIUS = 7
END_RADIUS = 9
DEFAULT_STYLE = {"fill": "#ffffff", "stroke": "#57606a", "color": "#1f2328", "stroke-width": "1.5"}
EDGE_STYLES = {  # stroke, width
    "plain": ("#57606a", "1.4"),
    "taken": ("#1f2328", "2.2"),
    "untaken": ("#afb8c1", "1.2"),
}
ARROW_LENGTH = 9.0  # an arrow head: its length along the edge and its width across, in pixels at any stroke
ARROW_WIDTH = 9.0
ARROW_REACH = 0.9  # how far its tip reaches past the edge's end (onto the box's border)
FONT_FAMILY = "-apple-system, Segoe UI, Helvetica, Arial, sans-serif"  # unquoted: one name of two words


@dataclass(frozen=True)
class SvgNode:
    """A node: a rounded box with one line of text, or the start (``start``) or end (``end``) circle.

    ``style`` holds mermaid-like ``classDef`` properties (fill, stroke, color, stroke-width,
    stroke-dasharray); ``css_class`` names the style on the group of the boxes drawn in it, for readers of
    the SVG.
    """

    key: str
    label: str = ""
    shape: str = "box"
    style: Mapping[str, str] = field(default_factory=dict)
    css_class: str = ""
    bold: bool = False
    marked: bool = False  # drawn with a ring around it: where the run is


@dataclass(frozen=True)
class SvgEdge:
    """An arrow from node ``source`` to node ``target``; ``kind`` is plain, taken or untaken."""

    source: str
    target: str
    label: str = ""
    kind: str = "plain"


# -- text --------------------------------------------------------------------------------------


def _clean(text: str) -> str:
    """One line of printable characters (XML forbids most control characters)."""
    return " ".join("".join(ch if ch.isprintable() else " " for ch in text).split())


def _text_width(text: str, size: int) -> float:
    """An estimate of ``text``'s width in pixels (no font metrics here): wide characters count double."""
    units = sum(1.0 if unicodedata.east_asian_width(ch) in "WF" else 0.6 for ch in text)
    return units * size


def _num(value: float) -> str:
    """A coordinate, rounded to a whole pixel."""
    return str(round(value) + 0)


# -- layout ------------------------------------------------------------------------------------


@dataclass
class _Slot:
    """A node of the layout: a real node, or a point an edge passes (with its label, or none)."""

    rank: int
    left: float  # extent left of the centre
    right: float  # extent right of the centre
    height: float
    box: bool = False  # a real node drawn as a box (the others: circles, and points of edges)
    x: float = 0.0


@dataclass
class _Chain:
    """An edge as laid out: from its upper slot down to its lower one through one slot per layer between."""

    edge: int
    slots: list[int]
    reversed: bool
    label_slot: int | None


def _reversed_edges(count: int, pairs: Sequence[tuple[int, int]]) -> set[int]:
    """The edges a depth-first walk (from node 0, then any node not yet reached, in order) finds going
    back to a node on its path: reversing them leaves no cycle."""
    out: list[list[tuple[int, int]]] = [[] for _ in range(count)]
    for index, (source, target) in enumerate(pairs):
        out[source].append((target, index))
    state = [0] * count  # 0 new, 1 on the path, 2 done
    back: set[int] = set()
    for root in range(count):
        if state[root]:
            continue
        state[root] = 1
        stack = [(root, 0)]
        while stack:
            node, at = stack[-1]
            if at == len(out[node]):
                state[node] = 2
                stack.pop()
                continue
            stack[-1] = (node, at + 1)
            target, index = out[node][at]
            if state[target] == 1:
                back.add(index)
            elif state[target] == 0:
                state[target] = 1
                stack.append((target, 0))
    return back


def _ranks(count: int, pairs: Sequence[tuple[int, int]]) -> list[int]:
    """Longest-path layers of an acyclic graph: each node one layer below its lowest source."""
    into = [0] * count
    out: list[list[int]] = [[] for _ in range(count)]
    for source, target in pairs:
        out[source].append(target)
        into[target] += 1
    rank = [0] * count
    ready = [node for node in range(count) if not into[node]]
    while ready:
        node = ready.pop(0)
        for target in out[node]:
            rank[target] = max(rank[target], rank[node] + 1)
            into[target] -= 1
            if not into[target]:
                bisect.insort(ready, target)
    return rank


def _crossings(layers: Sequence[list[int]], links: Sequence[tuple[int, int]], pos: Sequence[int]) -> int:
    """How many pairs of links between neighbouring layers cross (inversions, counted per layer pair)."""
    by_rank: dict[int, list[tuple[int, int]]] = {}
    rank_of = {slot: rank for rank, layer in enumerate(layers) for slot in layer}
    for upper, lower in links:
        by_rank.setdefault(rank_of[upper], []).append((pos[upper], pos[lower]))
    total = 0
    for rank in sorted(by_rank):
        seen: list[int] = []
        for _, lower in sorted(by_rank[rank]):
            total += len(seen) - bisect.bisect_right(seen, lower)
            bisect.insort(seen, lower)
    return total


def _order(layers: list[list[int]], links: Sequence[tuple[int, int]], slots: int) -> list[list[int]]:
    """Each layer's order, improved by barycenter sweeps; the order with the fewest crossings is kept."""
    above: list[list[int]] = [[] for _ in range(slots)]
    below: list[list[int]] = [[] for _ in range(slots)]
    for upper, lower in links:
        below[upper].append(lower)
        above[lower].append(upper)
    pos = [0] * slots
    for layer in layers:
        for index, slot in enumerate(layer):
            pos[slot] = index
    best, fewest = [list(layer) for layer in layers], _crossings(layers, links, pos)
    for sweep in range(SWEEPS):
        down = sweep % 2 == 0
        sequence = range(1, len(layers)) if down else range(len(layers) - 2, -1, -1)
        for rank in sequence:
            near = above if down else below
            keys = {
                slot: (sum(pos[n] for n in near[slot]) / len(near[slot]) if near[slot] else pos[slot], pos[slot])
                for slot in layers[rank]
            }
            layers[rank].sort(key=keys.__getitem__)
            for index, slot in enumerate(layers[rank]):
                pos[slot] = index
        count = _crossings(layers, links, pos)
        if count < fewest:
            best, fewest = [list(layer) for layer in layers], count
    return best


def _pack(desired: Sequence[float], left: Sequence[float], right: Sequence[float]) -> list[float]:
    """Centres as near ``desired`` as can be (least squares) with the layer's order kept and its nodes
    ``NODE_GAP`` apart: pool-adjacent-violators on the positions less their least offsets."""
    offsets = [0.0]
    for index in range(1, len(desired)):
        offsets.append(offsets[-1] + right[index - 1] + NODE_GAP + left[index])
    blocks: list[list[float]] = []  # [sum, count] of pooled positions
    for want, offset in zip(desired, offsets, strict=True):
        blocks.append([want - offset, 1.0])
        while len(blocks) > 1 and blocks[-2][0] * blocks[-1][1] > blocks[-1][0] * blocks[-2][1]:
            total, count = blocks.pop()
            blocks[-1][0] += total
            blocks[-1][1] += count
    placed: list[float] = []
    for total, count in blocks:
        placed += [total / count] * int(count)
    return [value + offset for value, offset in zip(placed, offsets, strict=True)]


def _place(layers: Sequence[list[int]], links: Sequence[tuple[int, int]], slots: list[_Slot]) -> None:
    """x positions: every layer packed, then pulled towards the mean of each node's neighbours, in rounds."""
    above: list[list[int]] = [[] for _ in slots]
    below: list[list[int]] = [[] for _ in slots]
    for upper, lower in links:
        below[upper].append(lower)
        above[lower].append(upper)

    def settle(layer: list[int], desired: list[float]) -> None:
        xs = _pack(desired, [slots[s].left for s in layer], [slots[s].right for s in layer])
        for slot, x in zip(layer, xs, strict=True):
            slots[slot].x = x

    for layer in layers:
        settle(layer, [0.0] * len(layer))
        shift = (slots[layer[0]].x + slots[layer[-1]].x) / 2 if layer else 0.0
        for slot in layer:
            slots[slot].x -= shift
    for round_ in range(PLACE_ROUNDS):
        down = round_ % 2 == 1  # the last round pulls down, towards where edges come from
        sequence = range(1, len(layers)) if down else range(len(layers) - 2, -1, -1)
        for rank in sequence:
            near = above if down else below
            desired = [
                sum(slots[n].x for n in near[slot]) / len(near[slot]) if near[slot] else slots[slot].x
                for slot in layers[rank]
            ]
            settle(layers[rank], desired)


@dataclass
class _Layout:
    slots: list[_Slot]
    chains: list[_Chain]
    loops: list[tuple[int, int]]  # edges from a node to itself: (edge, node)
    centre_y: list[float]
    width: float
    height: float


def _layout(nodes: Sequence[SvgNode], edges: Sequence[SvgEdge]) -> _Layout:
    index = {node.key: number for number, node in enumerate(nodes)}
    slots = []
    for node in nodes:
        if node.shape == "box":
            half = (_text_width(node.label, FONT_SIZE) + 2 * NODE_PAD) / 2
            slots.append(_Slot(0, half, half, NODE_HEIGHT + (2 * RING if node.marked else 0), box=True))
        else:
            radius = START_RADIUS if node.shape == "start" else END_RADIUS
            slots.append(_Slot(0, radius, radius, 2 * radius))
    pairs = [(index[edge.source], index[edge.target]) for edge in edges]
    loops = {number for number, (source, target) in enumerate(pairs) if source == target}
    for number in loops:
        slot = slots[pairs[number][0]]
        slot.right += LOOP_WIDTH + _text_width(edges[number].label, LABEL_FONT_SIZE) + 8
    back = _reversed_edges(len(nodes), pairs)
    laid = [(t, s) if n in back else (s, t) for n, (s, t) in enumerate(pairs)]
    ranks = _ranks(len(nodes), [pair for n, pair in enumerate(laid) if n not in loops])
    for slot, rank in zip(slots, ranks, strict=True):
        slot.rank = 2 * rank  # the odd layers between hold edge labels
    chains: list[_Chain] = []
    for number, (upper, lower) in enumerate(laid):
        if number in loops:
            continue
        path, label_slot = [upper], None
        width = _text_width(edges[number].label, LABEL_FONT_SIZE) + 8 if edges[number].label else 0.0
        between = range(slots[upper].rank + 1, slots[lower].rank)
        label_rank = between[-1] if number in back else between[0]  # near the state the edge leaves
        for rank in between:
            if rank == label_rank and width:
                label_slot = len(slots)
                slots.append(_Slot(rank, width / 2, width / 2, LABEL_HEIGHT))
            else:
                slots.append(_Slot(rank, 0.0, 0.0, 0.0))
            path.append(len(slots) - 1)
        path.append(lower)
        chains.append(_Chain(number, path, number in back, label_slot))
    layers: list[list[int]] = [[] for _ in range(max(slot.rank for slot in slots) + 1)]
    for number, slot in enumerate(slots):
        layers[slot.rank].append(number)
    links = [(chain.slots[i], chain.slots[i + 1]) for chain in chains for i in range(len(chain.slots) - 1)]
    layers = _order(layers, links, len(slots))
    _place(layers, links, slots)
    low = min(slot.x - slot.left for slot in slots)
    high = max(slot.x + slot.right for slot in slots)
    for slot in slots:
        slot.x += MARGIN - low
    centre_y, y = [], float(MARGIN)
    for layer in layers:
        height = max((slots[s].height for s in layer), default=0.0)
        centre_y.append(y + height / 2)
        y += height + RANK_GAP
    looped = [(number, pairs[number][0]) for number in sorted(loops)]
    return _Layout(slots, chains, looped, centre_y, high - low + 2 * MARGIN, y - RANK_GAP + MARGIN)


# -- drawing -----------------------------------------------------------------------------------


def _ports(layout: _Layout) -> dict[tuple[int, int], float]:
    """Where each chain leaves its upper node (key ``(chain, 0)``) and enters its lower one (``(chain, 1)``):
    spread along the node's bottom and top in the order of where the chains go, so arrows stay apart."""
    sides: dict[tuple[int, int], list[tuple[float, int]]] = {}
    for number, chain in enumerate(layout.chains):
        upper, lower = chain.slots[0], chain.slots[-1]
        sides.setdefault((upper, 0), []).append((layout.slots[chain.slots[1]].x, number))
        sides.setdefault((lower, 1), []).append((layout.slots[chain.slots[-2]].x, number))
    ports: dict[tuple[int, int], float] = {}
    for (slot, side), ends in sorted(sides.items()):
        node = layout.slots[slot]
        span = node.left * 1.2 if node.box else 0.0
        step = span / (len(ends) - 1) if len(ends) > 1 else 0.0
        for place, (_, number) in enumerate(sorted(ends)):
            ports[(number, side)] = node.x + (place - (len(ends) - 1) / 2) * step
    return ports


def _simplified(points: Sequence[tuple[float, float]]) -> list[tuple[float, float]]:
    """``points`` less those within ``BEND`` pixels of the line through the points kept around them; for a
    long winding edge, the bend allowed doubles until at most ``MAX_POINTS`` are left (a bounded path)."""
    bend = BEND
    while True:
        kept = [points[0]]
        for at in range(1, len(points) - 1):
            (x0, y0), (x1, y1), (x2, y2) = kept[-1], points[at], points[at + 1]
            length = math.hypot(x2 - x0, y2 - y0) or 1.0
            if abs((x2 - x0) * (y1 - y0) - (x1 - x0) * (y2 - y0)) / length > bend:
                kept.append(points[at])
        kept.append(points[-1])
        if len(kept) <= MAX_POINTS:
            return kept
        bend *= 2


def _arrow_head(x: float, y: float, dx: float, dy: float) -> str:
    """The arrow head of an edge ending at (``x``, ``y``) heading along (``dx``, ``dy``): a filled triangle,
    drawn in the edge's group (one path for them all) rather than as an SVG marker, whose definitions would
    take a tenth of a run's drawing."""
    length = math.hypot(dx, dy) or 1.0
    ux, uy = dx / length, dy / length
    tip_x, tip_y = x + ux * ARROW_REACH, y + uy * ARROW_REACH
    back_x, back_y = -ux * ARROW_LENGTH, -uy * ARROW_LENGTH
    half_x, half_y = -uy * ARROW_WIDTH / 2, ux * ARROW_WIDTH / 2
    corners = (back_x + half_x, back_y + half_y, -2 * half_x, -2 * half_y)
    return f"M{_dec(tip_x)},{_dec(tip_y)}l{_dec(corners[0])},{_dec(corners[1])}l{_dec(corners[2])},{_dec(corners[3])}z"


def _dec(value: float) -> str:
    """A coordinate to a tenth of a pixel, as short as it writes ("4.5", "-9", "0")."""
    text = f"{round(value, 1) + 0:.1f}".removesuffix(".0")
    return "0" if text == "-0" else text


def _edge_path(points: Sequence[tuple[float, float]]) -> tuple[str, str]:
    """A path through ``points``: straight where it drops straight, else curved (vertical at each point), and
    its arrow head at the last point. Relative moves after the first point (shorter), between the same whole
    pixels as absolute ones."""
    kept = [(round(x) + 0, y) for x, y in _simplified(points)]
    parts = [f"M{kept[0][0]},{_num(kept[0][1])}"]
    for (x0, y0), (x1, y1) in itertools.pairwise(kept):
        top, bottom = round(y0), round(y1)
        if x0 == x1:
            parts.append(f"v{bottom - top}")
        else:
            middle = round((y0 + y1) / 2) - top
            parts.append(f"c0,{middle} {x1 - x0},{middle} {x1 - x0},{bottom - top}")
    (_, first), (last_x, last) = kept[-2], kept[-1]
    return "".join(parts), _arrow_head(last_x, round(last), 0, round(last) - round(first))  # each ends vertical


def _attr(name: str, value: str) -> str:
    """`` name='value'``: single quotes, which a saved notebook's JSON keeps as they are (it escapes ``"``)."""
    return f" {name}='{escape(value, {chr(39): '&apos;', chr(34): '&quot;'})}'"


def _edge_label(x: float, y: float, text: str, *, start: bool = False) -> tuple[str, str]:
    """An edge's label centred on (``x``, ``y``), or starting there: its pale ground (a rectangle of a path)
    and its text."""
    width = _text_width(text, LABEL_FONT_SIZE) + 6
    left = x if start else x - width / 2
    anchor = f"x='{_num(left + 3)}' text-anchor='start'" if start else f"x='{_num(x)}'"
    right = _num(width)
    return (
        f"M{_num(left)},{_num(y - LABEL_HEIGHT / 2)}h{right}v{LABEL_HEIGHT}h-{right}z",
        f"<text {anchor} y='{_num(y + LABEL_FONT_SIZE * 0.35)}'>{escape(text)}</text>",
    )


def _edges_svg(layout: _Layout, edges: Sequence[SvgEdge]) -> list[str]:
    """The edges, grouped by kind (the taken ones drawn last, over the others), then their labels over all:
    the labels' grounds in one path, then their texts (labels never overlap: the order within them is free)."""
    ports = _ports(layout)
    paths: dict[str, list[str]] = {kind: [] for kind in EDGE_STYLES}
    heads: dict[str, list[str]] = {kind: [] for kind in EDGE_STYLES}
    grounds: list[str] = []
    labels: list[str] = []
    for number, chain in enumerate(layout.chains):
        edge = edges[chain.edge]
        upper, lower = layout.slots[chain.slots[0]], layout.slots[chain.slots[-1]]
        points = [(ports[(number, 0)], layout.centre_y[upper.rank] + upper.height / 2)]
        points += [(layout.slots[s].x, layout.centre_y[layout.slots[s].rank]) for s in chain.slots[1:-1]]
        points.append((ports[(number, 1)], layout.centre_y[lower.rank] - lower.height / 2))
        if chain.reversed:
            points.reverse()
        line, head = _edge_path(points)
        paths[_kind(edge)].append(f"<path d='{line}'/>")
        heads[_kind(edge)].append(head)
        if chain.label_slot is not None:
            slot = layout.slots[chain.label_slot]
            ground, label = _edge_label(slot.x, layout.centre_y[slot.rank], edge.label)
            grounds.append(ground)
            labels.append(label)
    for number, at in layout.loops:
        edge, node = edges[number], layout.slots[at]
        x, y = node.x + node.left, layout.centre_y[node.rank]  # the box's right side (its slot reaches further)
        reach, top, bottom = _num(x + LOOP_WIDTH), _num(y - 7), _num(y + 7)
        loop = f"M{_num(x)},{top}C{reach},{_num(y - 16)} {reach},{_num(y + 16)} {_num(x)},{bottom}"
        paths[_kind(edge)].append(f"<path d='{loop}'/>")
        heads[_kind(edge)].append(_arrow_head(round(x), round(y + 7), -LOOP_WIDTH, -9))  # along its last control
        if edge.label:
            ground, label = _edge_label(x + LOOP_WIDTH + 4, y, edge.label, start=True)
            grounds.append(ground)
            labels.append(label)
    lines: list[str] = []
    for kind in ("untaken", "plain", "taken"):
        if paths[kind]:
            stroke, width = EDGE_STYLES[kind]
            lines.append(
                f"<g class='edges {kind}' fill='none' stroke='{stroke}' stroke-width='{width}'>{''.join(paths[kind])}"
                f"<path d='{''.join(heads[kind])}' fill='{stroke}' stroke='none'/></g>"
            )
    if labels:
        lines.append(
            f"<g class='labels' font-size='{LABEL_FONT_SIZE}'><path d='{''.join(grounds)}' fill='#fff' "
            f"fill-opacity='0.9'/><g fill='#1f2328'>{''.join(labels)}</g></g>"
        )
    return lines


def _kind(edge: SvgEdge) -> str:
    return edge.kind if edge.kind in EDGE_STYLES else "plain"


def _style(node: SvgNode) -> dict[str, str]:
    style = {**DEFAULT_STYLE, **node.style}
    style["stroke-width"] = style["stroke-width"].removesuffix("px")
    return style


def _circle_svg(node: SvgNode, x: float, y: float) -> str:
    if node.shape == "start":
        return f"<g class='node start'><circle cx='{_num(x)}' cy='{_num(y)}' r='{START_RADIUS}' fill='#1f2328'/></g>"
    return (
        f"<g class='node end'><circle cx='{_num(x)}' cy='{_num(y)}' r='{END_RADIUS}' fill='#fff' "
        f"stroke='#1f2328' stroke-width='1.5'/><circle cx='{_num(x)}' cy='{_num(y)}' r='{END_RADIUS - 4}' "
        "fill='#1f2328'/></g>"
    )


def _boxes_svg(boxes: Sequence[tuple[SvgNode, _Slot, float]]) -> str:
    """Boxes of one style in one group that paints them all: their rectangles (each with the ring of the
    state where the run is before it), then their texts, in one colour (boxes never overlap)."""
    first = boxes[0][0]
    style = _style(first)
    classes = " ".join(part for part in ("node", "box", first.css_class) if part)
    paint = "".join(
        _attr(name, style[name]) for name in ("fill", "stroke", "stroke-width", "stroke-dasharray") if name in style
    )
    rects: list[str] = []
    texts: list[str] = []
    for node, slot, y in boxes:
        left, top = slot.x - slot.left, y - NODE_HEIGHT / 2
        if node.marked:
            rects.append(
                f"<rect x='{_num(left - RING)}' y='{_num(top - RING)}' width='{_num(2 * (slot.left + RING))}' "
                f"height='{NODE_HEIGHT + 2 * RING}' rx='12' fill='none' stroke-width='2'/>"
            )
        rects.append(
            f"<rect x='{_num(left)}' y='{_num(top)}' width='{_num(2 * slot.left)}' height='{NODE_HEIGHT}' rx='8'/>"
        )
        texts.append(f"<text x='{_num(slot.x)}' y='{_num(y + FONT_SIZE * 0.35)}'>{escape(node.label)}</text>")
    weight = " font-weight='bold'" if first.bold else ""
    return (
        f"<g{_attr('class', classes)}{paint}>{''.join(rects)}"
        f"<g{_attr('fill', style['color'])} stroke='none'{weight}>{''.join(texts)}</g></g>"
    )


def _nodes_svg(layout: _Layout, nodes: Sequence[SvgNode]) -> list[str]:
    """The nodes: circles each on its own, boxes by style (in the order their styles first appear)."""
    lines: list[str] = []
    styles: dict[tuple[object, ...], list[tuple[SvgNode, _Slot, float]]] = {}
    for number, node in enumerate(nodes):
        slot = layout.slots[number]
        y = layout.centre_y[slot.rank]
        if node.shape == "box":
            key = (node.css_class, tuple(sorted(_style(node).items())), node.bold)
            if key not in styles:
                styles[key] = []
                lines.append("")  # this style's group, filled in below
            styles[key].append((node, slot, y))
        else:
            lines.append(_circle_svg(node, slot.x, y))
    groups = iter(_boxes_svg(boxes) for boxes in styles.values())
    return [line or next(groups) for line in lines]


def graph_svg(title: str, nodes: Sequence[SvgNode], edges: Sequence[SvgEdge]) -> str:
    """The SVG image of the graph of ``nodes`` (their keys unique) and ``edges`` between them, laid out
    from the top; ``title`` names it for screen readers and as the image's tooltip.

    Paint is set once per group (every frontend honours inherited presentation attributes; GitHub and
    untrusted classic notebooks drop ``<style>`` from an SVG they inline), one group to a line."""
    nodes = [SvgNode(n.key, _clean(n.label), n.shape, n.style, _clean(n.css_class), n.bold, n.marked) for n in nodes]
    edges = [SvgEdge(e.source, e.target, _clean(e.label), e.kind) for e in edges]
    if not nodes:
        nodes = [SvgNode("[start]", shape="start")]
    layout = _layout(nodes, edges)
    width, height = _num(layout.width), _num(layout.height)
    lines = [
        f"<svg xmlns='http://www.w3.org/2000/svg' width='{width}' height='{height}' viewBox='0 0 {width} {height}' "
        f"role='img' font-family='{FONT_FAMILY}' font-size='{FONT_SIZE}' text-anchor='middle'>",
        f"<title>{escape(_clean(title))}</title>",
        *_edges_svg(layout, edges),
        *_nodes_svg(layout, nodes),
        "</svg>",
    ]
    return "\n".join(line for line in lines if line) + "\n"
