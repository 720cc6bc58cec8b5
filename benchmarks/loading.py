#!/usr/bin/env python
"""Loading machines at scale: YAML text to a Machine, and what a ``%%mkl`` cell does before its diagram.

    .venv/bin/python benchmarks/loading.py                      # this checkout only
    .venv/bin/python benchmarks/loading.py --before ../main     # and an older checkout, side by side

Machines of 1,000 to 8,000 states (``linear(n)`` of benchmarks/run.py, as YAML text). *load* is
``load(text)``; *load + check* is what defining a machine in a cell costs before the diagram is
drawn: ``load(text)`` then ``check(machine.source)``. Each checkout is measured in its own
process (``PYTHONPATH`` set to it), one process per size, the cyclic GC on as users have it; the
script files (one answer per state) are read with ``read_script`` there too, and parsed here
with PyYAML's pure-Python ``safe_load`` and with its libyaml loader. Medians of several rounds,
wall and CPU (process) time; the machine is shared, so read the ratios, and CPU time the surest.
"""

from __future__ import annotations

import argparse
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

import yaml

ROOT = Path(__file__).resolve().parent.parent
SIZES = (1000, 2000, 5000, 8000)
import sections  # noqa: E402  (benchmarks/sections.py, beside this file)


def timed(work: Callable[[], Any], rounds: int) -> dict[str, list[float]]:
    """The wall and CPU seconds of each of ``rounds`` calls of ``work``."""
    walls, cpus = [], []
    for _ in range(rounds):
        wall, cpu = time.perf_counter(), time.process_time()
        work()
        cpus.append(time.process_time() - cpu)
        walls.append(time.perf_counter() - wall)
    return {"wall": walls, "cpu": cpus}


def medians(runs: list[dict[str, list[float]]]) -> dict[str, float]:
    """The median of every round of every run, per clock."""
    return {clock: statistics.median(t for run in runs for t in run[clock]) for clock in ("wall", "cpu")}


def measure(machine_file: str, script_file: str, rounds: int) -> None:
    """In a child process, with the checkout under test first on ``PYTHONPATH``: print its times as JSON."""
    import mkl_notebook
    from mkl_notebook.lang.check import check
    from mkl_notebook.lang.loader import load
    from mkl_notebook.providers.scripted import read_script

    text = Path(machine_file).read_text(encoding="utf-8")
    assert load(text).states, machine_file
    found = {
        "package": mkl_notebook.__file__,
        "load": timed(lambda: load(text), rounds),
        "define": timed(lambda: check(load(text).source), rounds),
        "script": timed(lambda: read_script(script_file), rounds),
    }
    print(json.dumps(found))


def in_checkout(tree: Path, machine: Path, script: Path, rounds: int) -> dict[str, Any]:
    completed = subprocess.run(
        [sys.executable, __file__, "--measure", str(machine), str(script), "--rounds", str(rounds)],
        env={**os.environ, "PYTHONPATH": str(tree)},
        capture_output=True,
        text=True,
        check=True,
    )
    found: dict[str, Any] = json.loads(completed.stdout)
    if not Path(found["package"]).resolve().is_relative_to(tree.resolve()):
        raise SystemExit(f"{tree}: the child imported {found['package']}, not this checkout's mkl_notebook")
    return found


def documents(folder: Path, n: int) -> tuple[Path, Path]:
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from run import linear

    machine, script = folder / f"linear{n}.mkl", folder / f"linear{n}.script.yaml"
    machine.write_text(yaml.safe_dump(linear(n), sort_keys=False), encoding="utf-8")
    answers = {"produce": [f"answer {i}: yes, on 2024-01-0{1 + i % 9}" for i in range(n)], "judge": [0]}
    script.write_text(yaml.safe_dump({"llm": answers}, sort_keys=False), encoding="utf-8")
    return machine, script


def ms(seconds: float) -> str:
    return f"{seconds * 1000:,.0f} ms" if seconds >= 0.01 else f"{seconds * 1000:.1f} ms"


def table(results: dict[tuple[str, int], dict[str, Any]], parse: dict[int, dict[str, Any]], args: Any) -> str:
    trees = ["before", "after"] if args.before else ["after"]
    lines = [
        "## Loading machines (`python benchmarks/loading.py`)",
        "",
        f"`linear(n)` machines as YAML text; *load* is `load(text)`, *load + check* what defining a machine in a "
        "cell costs before its diagram (`load`, then `check` of its source). Each checkout in its own process "
        f"per size, cyclic GC on; medians of {args.rounds * args.processes} rounds ({args.processes} processes of "
        f"{args.rounds}, the checkouts in turn)."
        + (f" *before* is the code at `{args.before_name}`, *after* this checkout." if args.before else ""),
        "",
    ]
    for clock, title in (("cpu", "CPU time (the surest on a shared machine)"), ("wall", "wall time")):
        lines += [f"**{title}**", ""]
        head = "| states | text |"
        rule = "|---|---|"
        for part in ("load", "load + check"):
            for tree in trees:
                head += f" {part}: {tree} |"
                rule += "---|"
            if args.before:
                head += f" {part}: after ÷ before |"
                rule += "---|"
        lines += [head, rule]
        for n in SIZES:
            row = f"| {n:,} | {results[('after', n)]['size'] / 1e6:.2f} MB |"
            for part in ("load", "define"):
                for tree in trees:
                    row += f" {ms(results[(tree, n)][part][clock])} |"
                if args.before:
                    ratio = results[("after", n)][part][clock] / results[("before", n)][part][clock]
                    row += f" {ratio:.2f}× |"
            lines.append(row)
        growth = []
        for tree in trees:
            ratio = results[(tree, 8000)]["define"][clock] / results[(tree, 2000)]["define"][clock]
            growth.append(f"{tree} {ratio:.1f}×")
        lines += ["", f"load + check of 8,000 states over 2,000 (linear would be 4×): {', '.join(growth)}.", ""]
    lines += [
        "**Script files** (one answer per state): parsed alone with PyYAML's pure-Python `yaml.safe_load` and "
        "with its libyaml loader (`CSafeLoader`), and read as a `--script` is (`read_script`: parse and check), "
        "CPU time.",
        "",
        "| answers | pure-Python safe_load | libyaml loader | libyaml ÷ pure |"
        + (" read_script: before | read_script: after |" if args.before else " read_script |"),
        "|---|---|---|---|" + ("---|---|" if args.before else "---|"),
    ]
    for n in SIZES:
        pure, fast = parse[n]["pure"]["cpu"], parse[n]["c"]["cpu"]
        row = f"| {n:,} | {ms(pure)} | {ms(fast)} | {fast / pure:.2f}× |"
        for tree in trees:
            row += f" {ms(results[(tree, n)]['script']['cpu'])} |"
        lines.append(row)
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", type=Path, help="an older checkout to measure alongside this one")
    parser.add_argument("--rounds", type=int, default=5, help="rounds in each child process")
    parser.add_argument("--processes", type=int, default=3, help="child processes per checkout and size, in turn")
    parser.add_argument("--no-write", action="store_true", help="print the table only")
    parser.add_argument("--measure", nargs=2, metavar=("MACHINE", "SCRIPT"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.measure:
        measure(*args.measure, args.rounds)
        return
    args.before_name = args.before.name if args.before else None
    results: dict[tuple[str, int], dict[str, Any]] = {}
    parse: dict[int, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory() as folder:
        for n in SIZES:
            machine, script = documents(Path(folder), n)
            trees = {"after": ROOT}
            if args.before:
                trees = {"before": args.before, **trees}
            runs: dict[str, list[dict[str, Any]]] = {name: [] for name in trees}
            for _ in range(args.processes):  # the checkouts in turn, so that a busy spell of the machine hits both
                for name, tree in trees.items():
                    runs[name].append(in_checkout(tree, machine, script, args.rounds))
            for name in trees:
                results[(name, n)] = {
                    part: medians([run[part] for run in runs[name]]) for part in ("load", "define", "script")
                }
                results[(name, n)]["size"] = machine.stat().st_size
                print(name, n, results[(name, n)], file=sys.stderr)
            text = script.read_text(encoding="utf-8")
            rounds = args.rounds * args.processes
            parse[n] = {
                "pure": medians([timed(lambda text=text: yaml.safe_load(text), rounds)]),
                "c": medians([timed(lambda text=text: yaml.load(text, Loader=yaml.CSafeLoader), rounds)]),
            }
    section = table(results, parse, args)
    print(section)
    if not args.no_write:
        sections.write_section("loading", section)


if __name__ == "__main__":
    main()
