#!/usr/bin/env python
"""``mkl inbox`` over 200 waiting questions in 20 notebooks in 3 folders, beside ``mkl runs DIR`` on the same tree.

    .venv/bin/python benchmarks/inbox.py              # writes its section of RESULTS.md
    .venv/bin/python benchmarks/inbox.py --no-write   # prints it only

One notebook of 200 runs of the refund machine, each waiting for its first answer, is made as JupyterLab makes
it (nbclient, the scripted model), then cut into 20 notebooks of 10 runs (each keeps its cells' outputs, where
the runs are) laid out in 3 folders, with no store beside them: notebooks people sent. Each round runs both
commands on the tree as whole processes, in turn (which goes first alternates): ``mkl inbox ROOT --json`` and
``mkl runs ROOT``, and takes each one's wall time and CPU time (its process's user + system). Medians of the
rounds, and the ratio inbox / runs of each: peers in the same run, on the same files. A private
``JUPYTER_DATA_DIR`` holds the key that signed the runs, so that every run is trusted, as on its author's machine.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import nbformat

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
import sections  # noqa: E402  (benchmarks/sections.py, beside this file)
from lab_client import run_all  # noqa: E402  (JupyterLab's way of executing cells)

DATA = ROOT / "notebooks" / "data"
QUESTIONS, NOTEBOOKS, FOLDERS = 200, 20, 3


def make_tree(scratch: Path, env: dict[str, str]) -> Path:
    """The tree: :data:`QUESTIONS` waiting runs in :data:`NOTEBOOKS` notebooks in :data:`FOLDERS` folders."""
    made = scratch / "made"
    made.mkdir()
    for name in ("refund.mkl", "refund.script.yaml"):
        shutil.copy(DATA / name, made / name)
    head = [
        nbformat.v4.new_code_cell("%load_ext mkl_notebook"),
        nbformat.v4.new_code_cell("%%mkl\n" + (DATA / "refund.mkl").read_text(encoding="utf-8")),
    ]
    runs = [
        nbformat.v4.new_code_cell(f"%mkl run refund --id r{index} --script refund.script.yaml --set ticket=t{index}")
        for index in range(QUESTIONS)
    ]
    path = made / "all.ipynb"
    nbformat.write(nbformat.v4.new_notebook(cells=head + runs), path)
    ran = run_all(path, timeout=3600, env=env)
    tree = scratch / "tree"
    each = QUESTIONS // NOTEBOOKS
    for number in range(NOTEBOOKS):
        folder = tree / f"team-{number % FOLDERS}"
        folder.mkdir(parents=True, exist_ok=True)
        shutil.copy(made / "refund.script.yaml", folder / "refund.script.yaml")
        cells = ran.cells[:2] + ran.cells[2 + number * each : 2 + (number + 1) * each]
        notebook = nbformat.v4.new_notebook(cells=cells, metadata=ran.metadata)
        nbformat.write(notebook, folder / f"notebook-{number:02}.ipynb")
    return tree


def once(command: list[str], cwd: Path, env: dict[str, str]) -> tuple[float, float, str]:
    """One whole ``mkl`` process: its wall time, its CPU time, and what it printed."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "mkl_notebook.cli", *command], cwd=cwd, env=env, capture_output=True, text=True
    )
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise RuntimeError(f"mkl {' '.join(command)} failed ({done.returncode}): {done.stderr[-2000:]}")
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), done.stdout


def measure(tree: Path, env: dict[str, str], rounds: int) -> dict[str, Any]:
    commands = {"inbox": ["inbox", ".", "--json"], "runs": ["runs", "."]}
    taken: dict[str, list[tuple[float, float]]] = {name: [] for name in commands}
    rows = 0
    for number in range(rounds):
        order = list(commands) if number % 2 == 0 else list(reversed(commands))
        for name in order:
            wall, cpu, out = once(commands[name], tree, env)
            taken[name].append((wall, cpu))
            if name == "inbox":
                rows = len(json.loads(out.strip().splitlines()[-1]))
    found: dict[str, Any] = {"rows": rows}
    for name, times in taken.items():
        found[name] = {
            "wall": statistics.median(wall for wall, _ in times),
            "cpu": statistics.median(cpu for _, cpu in times),
        }
        print(name, found[name], file=sys.stderr)
    return found


def table(found: dict[str, Any], rounds: int, load: str, size: float) -> str:
    inbox, runs = found["inbox"], found["runs"]
    return "\n".join(
        [
            "## The inbox: every waiting question in reach (`python benchmarks/inbox.py`)",
            "",
            f"{datetime.date.today().isoformat()}, load average before the run {load}; medians of {rounds} rounds. "
            f"{QUESTIONS} refund runs waiting for their first answer, in {NOTEBOOKS} notebooks of "
            f"{QUESTIONS // NOTEBOOKS} runs ({size:.1f} MB in all) in {FOLDERS} folders, no store beside them; "
            "each round runs both commands as whole processes, in turn (the first alternating), on the same files. "
            "*wall*: elapsed time; *CPU*: the process's user + system time. Made by `benchmarks/inbox.py`.",
            "",
            "| command | rows | wall | CPU | per question (CPU) |",
            "|---|---|---|---|---|",
            f"| `mkl inbox ROOT --json` | {found['rows']} | {inbox['wall']:.2f} s | {inbox['cpu']:.2f} s | "
            f"{inbox['cpu'] / QUESTIONS * 1000:.1f} ms |",
            f"| `mkl runs ROOT` | {QUESTIONS} | {runs['wall']:.2f} s | {runs['cpu']:.2f} s | "
            f"{runs['cpu'] / QUESTIONS * 1000:.1f} ms |",
            f"| ratio inbox / runs | | {inbox['wall'] / runs['wall']:.2f}x | {inbox['cpu'] / runs['cpu']:.2f}x | |",
        ]
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--no-write", action="store_true", help="print the section only")
    args = parser.parse_args()
    load = ", ".join(f"{value:.2f}" for value in os.getloadavg())
    with tempfile.TemporaryDirectory(prefix="mkl-inbox-") as scratch:
        folder = Path(scratch)
        env = {name: value for name, value in os.environ.items() if not name.startswith("MKL_")}  # no model
        env.update(JUPYTER_DATA_DIR=str(folder / "jupyter-data"), PYTHONPATH=str(ROOT))
        tree = make_tree(folder, env)
        size = sum(path.stat().st_size for path in tree.rglob("*.ipynb")) / 1e6
        found = measure(tree, env, args.rounds)
        if found["rows"] != QUESTIONS:
            raise RuntimeError(f"mkl inbox listed {found['rows']} questions, not {QUESTIONS}")
        section = table(found, args.rounds, load, size)
    print(section)
    if not args.no_write:
        sections.write_section("inbox", section)


if __name__ == "__main__":
    main()
