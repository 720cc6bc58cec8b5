"""The diagram as a static SVG image: the drawing Notebook 7, an HTML export read offline, VS Code and Git
hosts show, where mermaid is not drawn. Parsed as XML and measured, never looked at by eye alone."""

from __future__ import annotations

import os
import random
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path

from mkl_notebook.engine.options import RunOptions
from mkl_notebook.engine.runner import run_machine
from mkl_notebook.lang.loader import load
from mkl_notebook.lang.model import Machine
from mkl_notebook.providers.scripted import oracle_from_file
from mkl_notebook.render import diagram, diagram_svg

from support import chain_source

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "notebooks" / "data"
SVG = "{http://www.w3.org/2000/svg}"
SVG_MAX = 72_000  # bytes of the drawing of a big machine (at most 60 states and 150 arrows are drawn)


def refund() -> Machine:
    return load((DATA / "refund.mkl").read_text(encoding="utf-8"))


def pending_refund() -> tuple[Machine, dict]:
    """The refund machine run until it waits for a person at its first gate (the run sits at ``confirm``)."""
    machine = refund()
    oracle = oracle_from_file(DATA / "refund.script.yaml")
    options = RunOptions(hitl="asking", suspendable=True)
    result = run_machine(machine, oracle, input={"ticket": "broken"}, options=options)
    assert (result.status, result.at) == ("suspended", "confirm")
    path = diagram.path_from_trace(result.trace)
    return machine, {"visits": result.visits, "path": path, "current": result.at, "current_kind": "pending"}


def parsed(svg: str) -> ET.Element:
    root = ET.fromstring(svg)  # well-formed, or this raises
    assert root.tag == f"{SVG}svg"
    return root


def groups(root: ET.Element, kind: str) -> Iterator[ET.Element]:
    """The ``<g>`` elements whose class names ``kind``."""
    return (g for g in root.iter(f"{SVG}g") if kind in (g.get("class") or "").split())


def texts(element: ET.Element) -> list[str]:
    return [text.text or "" for text in element.iter(f"{SVG}text")]


def node_texts(root: ET.Element) -> dict[str, str]:
    """Each box's text -> its style's class (``pending``, ``visited``, ``dim`` …; "" for none)."""
    found = {}
    for group in groups(root, "box"):
        for text in texts(group):
            found[text] = " ".join(c for c in (group.get("class") or "").split() if c not in ("node", "box"))
    return found


def painted(root: ET.Element, element: ET.Element, name: str) -> str | None:
    """The presentation attribute ``name`` as ``element`` is drawn with it: its own, or its nearest group's."""
    parents = {child: parent for parent in root.iter() for child in parent}
    at: ET.Element | None = element
    while at is not None and at.get(name) is None:
        at = parents.get(at)
    return None if at is None else at.get(name)


def boxes(root: ET.Element) -> list[tuple[float, float, float, float, str]]:
    """The rectangles of every state's box and every edge label: x, y, width, height and what it says."""
    found = []
    for group in groups(root, "box"):
        rects = [r for r in group.iter(f"{SVG}rect") if r.get("fill") != "none"]  # not the ring of the current
        for rect, text in zip(rects, texts(group), strict=True):
            x, y, w, h = (float(rect.get(k, "0")) for k in ("x", "y", "width", "height"))
            found.append((x, y, w, h, text))
    for group in groups(root, "labels"):
        [ground] = group.iter(f"{SVG}path")  # the labels' grounds, one rectangle each
        shapes = re.findall(r"M(-?\d+),(-?\d+)h(\d+)v(\d+)h-\3z", ground.get("d", ""))
        assert "".join(f"M{x},{y}h{w}v{h}h-{w}z" for x, y, w, h in shapes) == ground.get("d")
        for (x, y, w, h), text in zip(shapes, texts(group), strict=True):
            found.append((float(x), float(y), float(w), float(h), text))
    return found


def _end(path: str) -> tuple[float, float]:
    """Where an edge's path (``M`` then ``v`` and ``c`` moves, relative) ends, just past it downwards."""
    x, y = map(float, path[1:].split("v")[0].split("c")[0].split(","))
    for move in re.findall(r"([vc])([^vc]+)", path):
        if move[0] == "v":
            y += float(move[1])
        else:
            last = move[1].split()[-1].split(",")
            x, y = x + float(last[0]), y + float(last[1])
    return x, y + 0.9


def test_a_small_machines_drawing_names_every_state_and_arrow_and_marks_where_the_run_waits() -> None:
    machine, kw = pending_refund()
    svg = diagram.machine_svg(machine, **kw)
    root = parsed(svg)
    states = node_texts(root)
    assert states == {
        "draft ×1": "visited",
        "confirm · pending": "pending",
        "release": "dim",
        "send": "dim",
        "withdraw": "dim",
    }
    labels = texts(next(groups(root, "labels")))
    assert sorted(labels) == sorted(
        [
            "the reply promises a refund · escalate ✔",
            "otherwise",  # draft -> send
            "the refund was not approved",
            "otherwise · escalate",
            "sending was not approved",
            "otherwise",  # release -> send
            "otherwise",  # send -> END
            "otherwise",  # withdraw -> END
        ]
    )
    assert len(list(groups(root, "start"))) == 1 and len(list(groups(root, "end"))) == 1
    # The pending state is filled in the pending colour, ringed, and the run's way there drawn as taken.
    [waiting] = groups(root, "pending")
    fills = [painted(root, rect, "fill") for rect in waiting.iter(f"{SVG}rect")]
    assert fills == ["none", diagram._class_style("pending")["fill"]]  # the ring, then the filled box
    [unvisited] = [g for g in groups(root, "dim") if "send" in texts(g)]
    assert [painted(root, rect, "stroke-dasharray") for rect in unvisited.iter(f"{SVG}rect")] == ["4 4"] * 3
    assert [painted(root, text, "stroke") for text in unvisited.iter(f"{SVG}text")] == ["none"] * 3
    for kind, count in (("taken", 2), ("untaken", 7)):  # [*] -> draft -> confirm taken; the other seven not
        [group] = groups(root, kind)
        *lines, heads = group.iter(f"{SVG}path")
        assert len(lines) == count and heads.get("stroke") == "none" and heads.get("fill") == group.get("stroke")
        # one arrow head an edge, its tip just past the edge's end, pointing down it (each edge ends going down)
        tips = [tuple(map(float, head.split("l")[0].split(","))) for head in heads.get("d").split("M")[1:]]
        assert tips == [_end(line.get("d")) for line in lines] and all(".9" in str(y) for _, y in tips)


def test_nothing_overlaps_and_the_picture_is_as_big_as_its_parts() -> None:
    machine, kw = pending_refund()
    root = parsed(diagram.machine_svg(machine, **kw))
    drawn = boxes(root)
    assert len(drawn) == 5 + 8
    for index, (x, y, w, h, text) in enumerate(drawn):
        width, height = float(root.get("width", "0")), float(root.get("height", "0"))
        assert min(x, y) >= 0 and x + w <= width and y + h <= height, text
        for x2, y2, w2, h2, other in drawn[index + 1 :]:
            apart = x + w <= x2 or x2 + w2 <= x or y + h <= y2 or y2 + h2 <= y
            assert apart, f"{text!r} overlaps {other!r}"


def test_the_definitions_drawing_has_no_run_styles() -> None:
    root = parsed(diagram.machine_svg(refund()))
    assert set(node_texts(root).values()) == {""}
    assert [g.get("class") for g in root.iter(f"{SVG}g") if "edges" in (g.get("class") or "")] == ["edges plain"]


HOSTILE = """\
machine: hostile
mklang: "0.4"
entry: "<script>alert(1)</script>"
budget: 5
states:
  "<script>alert(1)</script>":
    structure: s
    prompt: p
    output: o
    gates:
      - { when: "a & b </text><script>alert(2)</script>", then: ok, to: "x\\"y & <z>" }
      - { when: "ring \\x07 the \\x1b bell", then: ok, to: END }
  "x\\"y & <z>":
    structure: s
    prompt: p
    output: o
    gates:
      - { when: otherwise, then: ok, to: END }
"""


def test_state_and_gate_text_from_others_is_text_never_markup() -> None:
    machine = load(HOSTILE, strict=False)
    svg = diagram.machine_svg(machine, visits={"<script>alert(1)</script>": 1}, path=[], current='x"y & <z>')
    assert "<script" not in svg.lower() and "</text><script" not in svg
    assert "\x07" not in svg and "\x1b" not in svg  # control characters are not XML
    root = parsed(svg)
    assert set(node_texts(root)) == {"<script>alert(1)</script> ×1", 'x"y & <z>'}
    assert set(texts(next(groups(root, "labels")))) == {
        "a & b </text><script>alert(2)</script>",
        "ring the bell",
        "otherwise",
    }
    # Nothing in it runs or reaches out: no scripts, handlers, links or embedded documents.
    tags = {element.tag.removeprefix(SVG) for element in root.iter()}
    assert tags <= {"svg", "title", "defs", "marker", "path", "g", "rect", "text", "circle"}
    assert not [name for element in root.iter() for name in element.attrib if name.startswith("on") or "href" in name]


def test_the_same_machine_and_run_draw_the_same_bytes_in_any_process() -> None:
    machine, kw = pending_refund()
    svg = diagram.machine_svg(machine, **kw)
    assert diagram.machine_svg(refund(), **kw) == svg
    program = (
        "import sys; sys.path.insert(0, 'tests'); import test_diagram_svg as t;"
        "from mkl_notebook.render import diagram; m, kw = t.pending_refund();"
        "sys.stdout.write(diagram.machine_svg(m, **kw))"
    )
    for seed in ("1", "2"):  # another hash seed: a set's order (of strings) would differ
        env = {**os.environ, "PYTHONHASHSEED": seed}
        drawn = subprocess.run([sys.executable, "-c", program], cwd=ROOT, env=env, capture_output=True, check=True)
        assert drawn.stdout.decode("utf-8") == svg


def dense(states: int, fan: int = 4, seed: int = 7) -> Machine:
    """``states`` states, each with ``fan`` gates: to states picked at random (a fixed seed), the last to END."""
    pick = random.Random(seed)
    lines = [f'machine: dense\nmklang: "0.4"\nentry: s0\nbudget: {states + 5}\nstates:']
    for index in range(states):
        gates = [
            f"{{when: condition {k} of s{index}, then: ok, to: s{pick.randrange(states)}}}" for k in range(fan - 1)
        ]
        gates.append("{when: otherwise, then: ok, to: END}")
        lines.append(f"  s{index}: {{structure: s, prompt: p, output: o, gates: [{', '.join(gates)}]}}")
    return load("\n".join(lines) + "\n", strict=False)


def ladder(states: int) -> Machine:
    """A chain whose every state also goes back to the first, far ahead, and to END: long winding arrows."""
    lines = [f'machine: ladder\nmklang: "0.4"\nentry: s0\nbudget: {states + 5}\nstates:']
    for index in range(states):
        gates = [
            f"{{when: next step from {index}, then: ok, to: s{(index + 1) % states}}}",
            f"{{when: back to the start from {index}, then: ok, to: s0}}",
            f"{{when: skip far ahead from {index}, then: ok, to: s{(index * 7 + 13) % states}}}",
            "{when: otherwise, then: ok, to: END}",
        ]
        lines.append(f"  s{index}: {{structure: s, prompt: p, output: o, gates: [{', '.join(gates)}]}}")
    return load("\n".join(lines) + "\n", strict=False)


def test_a_200_state_machines_drawing_stays_bounded() -> None:
    machines = (dense(200), load(chain_source(200), strict=False), dense(diagram.DRAWN_STATES, fan=3), ladder(38))
    for machine in machines:
        visits = {f"s{i}": 1 + i % 3 for i in range(0, 200, 7)}
        for kw in ({}, {"visits": visits, "path": [("s0", "s7")], "current": "s7", "current_kind": "pending"}):
            svg = diagram.machine_svg(machine, **kw)
            root = parsed(svg)
            assert len(svg.encode("utf-8")) < SVG_MAX, (machine.name, len(svg))
            drawn = node_texts(root)
            assert len(drawn) <= diagram.DRAWN_STATES + 2  # the states drawn, failed, and the node for the rest
            if len(machine.states) > diagram.DRAWN_STATES:
                assert any(text.startswith("… ") and text.endswith(", not drawn") for text in drawn)
            assert float(root.get("width", "0")) < 20_000 and float(root.get("height", "0")) < 20_000


def test_the_diagram_bundle_carries_the_drawing_beside_the_mermaid_and_the_text() -> None:
    machine, kw = pending_refund()
    bundle = diagram.diagram_bundle(machine, **kw)
    assert bundle[diagram.SVG_MIME] == diagram.machine_svg(machine, **kw)
    assert "text/html" not in bundle  # JupyterLab ranks HTML before mermaid: it would hide the mermaid drawing
    assert diagram_svg.graph_svg("empty", [], []).startswith("<svg")
