"""Instruction counts per run, both engines: a comparison that load on a shared machine cannot move.

    sudo apt-get install valgrind
    .bench/bin/python benchmarks/instructions.py [linear200 repair1000 ...]

Each workload runs under ``valgrind --tool=callgrind`` twice in one process, then
four times; half the difference is the cost of one run, free of interpreter
start-up, imports and first-run warm-up. Wall-clock ratios (``run.py``) are what the issue's targets
are stated in; this is the tool for telling whether a change made the engine cheaper.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
CHILD = """
import sys
sys.path.insert(0, {here!r})
import run
work = next(w for w in run.workloads(False) if w.name == {name!r})
if {engine!r} == "reference":
    action = run.reference_runner(work)
elif {engine!r} == "floor":
    action = run.floor_runner(work)
else:
    action = run.ours_runner(work, {engine!r})
for _ in range({runs}):
    action()
"""


def instructions(name: str, engine: str, runs: int) -> int:
    code = CHILD.format(here=str(HERE), name=name, engine=engine, runs=runs)
    completed = subprocess.run(
        ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONHASHSEED": "0"},
        check=True,
    )
    found = re.search(r"Collected : (\d+)", completed.stderr)
    if found is None:
        raise SystemExit(f"callgrind printed no total for {name}/{engine}:\n{completed.stderr[-2000:]}")
    return int(found.group(1))


def per_run(name: str, engine: str) -> int:
    # One plain run first writes any stale bytecode cache: otherwise only the first measured process
    # compiles, and the difference loses the compiler's instructions (by several per cent after an edit).
    code = CHILD.format(here=str(HERE), name=name, engine=engine, runs=1)
    subprocess.run([sys.executable, "-c", code], check=True, env={**os.environ, "PYTHONHASHSEED": "0"})
    return (instructions(name, engine, 4) - instructions(name, engine, 2)) // 2


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("workloads", nargs="*", default=["linear200", "repair1000", "ceiling1000", "fanout500"])
    parser.add_argument(
        "--engine",
        default="memory",
        choices=["memory", "none", "sqlite", "floor"],
        help="mkl_notebook's journal for the comparison (default: in-memory; floor: no journal, a bare INSERT "
        "per answer, see run.py)",
    )
    parser.add_argument("--output", help="also write the table, with a heading, to this file")
    args = parser.parse_args()
    lines = ["| workload | reference | mkl_notebook | ratio |", "|---|---|---|---|"]
    print("\n".join(lines))
    for name in args.workloads:
        theirs = per_run(name, "reference")
        ours = per_run(name, args.engine)
        lines.append(f"| {name} | {theirs / 1e6:.1f}M | {ours / 1e6:.1f}M | {ours / theirs:.2f}× |")
        print(lines[-1], flush=True)
    if args.output:
        heading = (
            f"# Instructions per run (callgrind), mkl_notebook with the {args.engine} journal "
            f"vs mklang 1.4.0\n\n`python benchmarks/instructions.py`; Python {sys.version.split()[0]}, "
            "PYTHONHASHSEED=0.\n\n"
        )
        Path(args.output).write_text(heading + "\n".join(lines) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
