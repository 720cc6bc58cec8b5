#!/usr/bin/env python
"""How long a run's views take to draw, and how much a long run writes into a notebook.

    .venv/bin/python benchmarks/render.py                        # this tree; writes its section of RESULTS.md
    .venv/bin/python benchmarks/render.py --before ../main       # and an older checkout beside it

Each code tree is measured in a process of its own (its directory first on ``sys.path``), with the
same workloads: a chain of N states run from its entry to END (N states, N steps) and a loop of one
state entered N times (N steps), for N = 1,000, 5,000, 10,000 and 20,000. Each renderer is timed on
them, median of ``--rounds`` runs (one run when a single one takes longer than ``SLOW`` seconds),
with the garbage collector off while each runs.
Then a real IPython shell with the extension loaded runs both 20,000-step machines with ``%mkl
run``, and the outputs the cell displays are written as nbformat writes a notebook: their bytes
are what a saved notebook carries. The machine is shared, so read the ratios.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
SIZES = (1_000, 5_000, 10_000, 20_000)
SLOW = 10.0  # seconds: a renderer slower than this once is not run again
import sections  # noqa: E402  (benchmarks/sections.py, beside this file)

RENDERERS = ("machine_text", "machine_mermaid", "trace table (HTML + text)", "run_bundle")
RUN_MIME = "application/vnd.mkl.run+json"
MERMAID_MIME = "text/vnd.mermaid"


def chain_source(states: int) -> str:
    """A machine of ``states`` generative states one after another, then END."""
    lines = [f'machine: chain\nmklang: "0.4"\nentry: s0\nbudget: {states + 5}\nstates:']
    for index in range(states):
        to = f"s{index + 1}" if index + 1 < states else "END"
        gate = f"{{when: otherwise, then: ok, to: {to}}}"
        lines.append(f"  s{index}: {{structure: s, prompt: p{index}, output: o, gates: [{gate}]}}")
    return "\n".join(lines) + "\n"


def loop_source(steps: int) -> str:
    """A machine of one state entered ``steps`` times, until its ceiling halts it."""
    return (
        f'machine: loop\nmklang: "0.4"\nentry: again\nbudget: {steps + 5}\nstates:\n'
        f"  again: {{structure: s, prompt: again, output: o, max_visits: {steps}, "
        "gates: [{when: otherwise, then: ok, to: again}]}\n"
    )


def timed(work: Callable[[], Any], rounds: int) -> dict[str, Any]:
    """The median wall time of ``work`` over ``rounds`` runs, or of one run when that one is slow.

    As ``timeit`` does, the garbage collector is off while ``work`` runs: its passes over the big
    machines and traces held here would otherwise be counted, at random, against whichever renderer
    happened to trigger them.
    """
    times = []
    for _ in range(rounds):
        gc.collect()
        gc.disable()
        try:
            started = time.perf_counter()
            work()
            times.append(time.perf_counter() - started)
        finally:
            gc.enable()
        if times[0] > SLOW:
            break
    return {"seconds": statistics.median(times), "runs": len(times)}


def _renderers(size: int) -> dict[str, Callable[[], Any]]:
    """Each renderer, ready to draw chain ``size`` and loop ``size`` as a run's display does."""
    from mkl_notebook.engine.runner import run_machine
    from mkl_notebook.lang.loader import load
    from mkl_notebook.providers.scripted import ScriptedOracle
    from mkl_notebook.render import diagram, views

    chain = load(chain_source(size), strict=False)
    through = run_machine(chain, ScriptedOracle({"produce": []}))
    loop = load(loop_source(size), strict=False)
    looped = run_machine(loop, ScriptedOracle({"produce": []}))
    assert len(through.trace) == size and len(looped.trace) == size, (len(through.trace), len(looped.trace))
    drawn: dict[str, Any] = {"path": diagram.path_from_trace(through.trace), "current": through.at}
    return {
        "machine_text": lambda: diagram.machine_text(chain, through.visits, **drawn),
        "machine_mermaid": lambda: diagram.machine_mermaid(chain, visits=through.visits, **drawn),
        "trace table (HTML + text)": lambda: (
            views.trace_table_html(looped.trace),
            views.trace_table_text(looped.trace),
        ),
        "run_bundle": lambda: views.run_bundle("chain", chain, through),
    }


def measure_renderers(sizes: tuple[int, ...], rounds: int) -> dict[str, dict[str, Any]]:
    timings: dict[str, dict[str, Any]] = {}
    for size in sizes:
        work = _renderers(size)
        for name in RENDERERS:
            timings[f"{name}@{size}"] = timed(work[name], rounds)
            print(f"{name} at {size:,}: {timings[f'{name}@{size}']}", file=sys.stderr)
    return timings


def measure_saved(steps: int) -> dict[str, dict[str, int]]:
    """What ``%mkl run`` of each 20,000-step machine displays, in bytes of a saved notebook."""
    import nbformat
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance()
    shown: dict[Any, dict[str, Any]] = {}

    def publish(data: dict[str, Any], metadata: Any = None, *args: Any, **kwargs: Any) -> None:
        display_id = (kwargs.get("transient") or {}).get("display_id") or len(shown)
        shown[display_id] = dict(data)  # an update replaces what its output showed

    shell.display_pub.publish = publish  # type: ignore[method-assign]
    saved: dict[str, dict[str, int]] = {}
    here = Path.cwd()
    with tempfile.TemporaryDirectory() as folder:
        os.chdir(folder)  # the run store goes here
        Path("s.yaml").write_text("llm: {produce: []}\n", encoding="utf-8")
        assert shell.run_cell("%load_ext mkl_notebook").success
        for name, source in (("loop", loop_source(steps)), ("chain", chain_source(steps))):
            assert shell.run_cell("%%mkl\n" + source).success
            shown.clear()
            started = time.perf_counter()
            done = shell.run_cell(f"%mkl run {name} --id {name} --script s.yaml")
            assert done.success, done.error_in_exec
            cell_seconds = time.perf_counter() - started
            outputs = [
                nbformat.v4.new_output("display_data", data=data) for data in shown.values() if any(data.values())
            ]
            parts = {"view": 0, "checkpoint": 0, "diagram": 0}
            for output in outputs:
                kind = "view" if RUN_MIME in output["data"] else "diagram" if MERMAID_MIME in output["data"] else "view"
                for mime, value in output["data"].items():
                    part = "checkpoint" if mime == RUN_MIME else kind
                    parts[part] += _saved_bytes(nbformat, {mime: value})
            parts["total"] = _saved_bytes(nbformat, outputs)
            saved[name] = {**parts, "cell_ms": round(cell_seconds * 1000)}
            print(f"saved {name}: {saved[name]}", file=sys.stderr)
        os.chdir(here)
    return saved


def _saved_bytes(nbformat: Any, outputs: Any) -> int:
    """The bytes ``outputs`` (a list of outputs, or one output's data) add to a notebook nbformat writes."""
    if isinstance(outputs, dict):
        outputs = [nbformat.v4.new_output("display_data", data=outputs)]
    empty = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("x")])
    full = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("x", outputs=outputs)])
    return len(nbformat.writes(full).encode("utf-8")) - len(nbformat.writes(empty).encode("utf-8"))


def measure(tree: Path, rounds: int, sizes: tuple[int, ...]) -> dict[str, Any]:
    """Run this script's measurements with ``tree``'s mkl_notebook, in a process of its own."""
    with tempfile.TemporaryDirectory() as folder:
        found = Path(folder) / "measured.json"
        sized = ["--sizes", ",".join(map(str, sizes)), "--out", str(found)]
        done = subprocess.run(
            [sys.executable, __file__, "--measure", str(tree), "--rounds", str(rounds), *sized],
            env={**os.environ, "PYTHONPATH": str(tree)},
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,  # the shell's own prompts; what was measured goes to the file
            check=False,
        )
        if done.returncode or not found.exists():
            raise SystemExit(f"measuring {tree} failed")
        result: dict[str, Any] = json.loads(found.read_text(encoding="utf-8"))
    return result


def _seconds(value: float) -> str:
    return f"{value * 1000:.1f} ms" if value < 1 else f"{value:.2f} s"


def _cell(found: dict[str, Any] | None) -> str:
    if found is None:
        return "—"
    return _seconds(found["seconds"]) + (" (1 run)" if found["runs"] == 1 else "")


def _kb(count: int) -> str:
    return f"{count / 1000:,.1f} KB"


def table(after: dict[str, Any], before: dict[str, Any] | None, rounds: int, sizes: tuple[int, ...]) -> str:
    lines = [
        "## Rendering a run's views, and what a long run saves (`python benchmarks/render.py`)",
        "",
        f"*chain N*: N states one after another, run from the entry to END (N states, N steps); *loop N*: one "
        f"state entered N times (N steps). Median of {rounds} runs (1 when a run took over {SLOW:.0f} s), the garbage "
        "collector off while each runs (as `timeit` does). "
        "`machine_text` and `machine_mermaid` draw chain N with the run's visits and path; the trace table is loop "
        "N's; `run_bundle` is chain N's view (its trace and its visits). *before* is the tree given with "
        "`--before` (here: the code before the views were capped and made linear), *after* this tree.",
        "",
        "| renderer | N | before | after | before / after |",
        "|---|---|---|---|---|",
    ]
    for name in RENDERERS:
        for size in sizes:
            now, then = after["timings"][f"{name}@{size}"], (before or {}).get("timings", {}).get(f"{name}@{size}")
            ratio = f"{then['seconds'] / now['seconds']:,.0f}×" if then else "—"
            lines.append(f"| {name} | {size:,} | {_cell(then)} | {_cell(now)} | {ratio} |")
    lines += [
        "",
        f"What `%mkl run` of a {sizes[-1]:,}-step run displays, in bytes of the saved notebook (nbformat's own "
        "writer): the view (HTML and text), the checkpoint it carries (the whole journal, compressed) and the "
        "diagram (mermaid and its text twin); and how long the cell took. The checkpoint is never cut: it is the "
        "run (its journal, with the machines it pinned, compressed).",
        "",
        "| run | code | view | checkpoint | diagram | total | cell |",
        "|---|---|---|---|---|---|---|",
    ]
    for name in ("loop", "chain"):
        for label, found in (("before", before), ("after", after)):
            if found is None:
                continue
            saved = found["saved"][name]
            lines.append(
                f"| {name} {sizes[-1]:,} | {label} | {_kb(saved['view'])} | {_kb(saved['checkpoint'])} | "
                f"{_kb(saved['diagram'])} | {_kb(saved['total'])} | {_seconds(saved['cell_ms'] / 1000)} |"
            )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--before", metavar="TREE", help="an older checkout to measure beside this one")
    parser.add_argument("--no-write", action="store_true", help="print the tables only")
    parser.add_argument("--sizes", default=",".join(map(str, SIZES)), help="states or steps, comma-separated")
    parser.add_argument("--measure", metavar="TREE", help=argparse.SUPPRESS)  # the child process ...
    parser.add_argument("--out", metavar="JSON", help=argparse.SUPPRESS)  # ... writes what it measured here
    args = parser.parse_args()
    sizes = tuple(int(size) for size in args.sizes.split(","))
    if args.measure:
        sys.path.insert(0, args.measure)
        import mkl_notebook

        assert Path(mkl_notebook.__file__).resolve().is_relative_to(Path(args.measure).resolve()), mkl_notebook.__file__
        measured = {"timings": measure_renderers(sizes, args.rounds), "saved": measure_saved(sizes[-1])}
        Path(args.out).write_text(json.dumps(measured), encoding="utf-8")
        return
    before = measure(Path(args.before).resolve(), args.rounds, sizes) if args.before else None
    after = measure(ROOT, args.rounds, sizes)
    text = table(after, before, args.rounds, sizes)
    print(text)
    if not args.no_write and sizes == SIZES:  # a quick run with other sizes never replaces the section
        sections.write_section("render", text)


if __name__ == "__main__":
    main()
