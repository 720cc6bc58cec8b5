#!/usr/bin/env python
"""Opening a notebook of many waiting runs: the first ``%mkl pending`` in a new kernel, and one headless resume.

    .venv/bin/python benchmarks/takeup.py                       # this checkout; writes its section of RESULTS.md
    .venv/bin/python benchmarks/takeup.py --before ../main      # and an older checkout, side by side

Notebooks of 10, 50 and 200 runs of the refund machine, each waiting for its first answer, are made
as JupyterLab makes them (nbclient naming each cell, the scripted model) and saved with no store
beside them: a notebook someone sent. Each round copies one afresh and starts a new kernel on it
(as JupyterLab does: the notebook named, each cell's id sent), which runs a cell ``%mkl pending``:
every run is taken up into the kernel's new store and its form drawn. *pending* is the kernel's
CPU time (``process_time``) for that cell; *reads* and *checks* count what it read of the notebook
file and the checkpoints it verified. *resume* is the CPU time of ``mkl resume NOTEBOOK --run r0
--reply approve`` on another fresh copy (the whole process: start-up, taking the run up, the next
step and writing the file back). Medians of several rounds; the machine is shared, so read the
per-run column and the ratios. A private ``JUPYTER_DATA_DIR`` holds the key that signs the runs.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import nbformat

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
from lab_client import LabClient, run_all  # noqa: E402  (JupyterLab's way of executing cells)

SIZES = (10, 50, 200)
DATA = ROOT / "notebooks" / "data"
import sections  # noqa: E402  (benchmarks/sections.py, beside this file)

# Run in the kernel on the notebook: the first `%mkl pending`, timed and counted.
PENDING = """
import collections, json, time
from pathlib import Path
from mkl_notebook.checkpoints import envelope as _envelope
from mkl_notebook.lang import files as _files
_counts = collections.Counter()
_read_text, _verify = _files.read_text, _envelope.verify_checkpoint
_notebook = Path("many.ipynb").resolve()

def _counting_read(path, *args, **kwargs):
    _counts["reads"] += Path(path).resolve() == _notebook
    return _read_text(path, *args, **kwargs)

def _counting_verify(*args, **kwargs):
    _counts["checks"] += 1
    return _verify(*args, **kwargs)

_files.read_text, _envelope.verify_checkpoint = _counting_read, _counting_verify
_started = time.process_time()
get_ipython().run_line_magic("mkl", "pending")
_counts["cpu"] = time.process_time() - _started
print("TAKEUP " + json.dumps(_counts))
"""


def make_notebook(folder: Path, count: int, env: dict[str, str]) -> Path:
    """A notebook of ``count`` runs waiting for their first answer, made as JupyterLab makes it, with no store."""
    folder.mkdir(parents=True)
    for name in ("refund.mkl", "refund.script.yaml"):
        shutil.copy(DATA / name, folder / name)
    cells = [
        nbformat.v4.new_code_cell("%load_ext mkl_notebook"),
        nbformat.v4.new_code_cell("%%mkl\n" + (DATA / "refund.mkl").read_text(encoding="utf-8")),
    ] + [
        nbformat.v4.new_code_cell(f"%mkl run refund --id r{index} --script refund.script.yaml --set ticket=broken")
        for index in range(count)
    ]
    path = folder / "many.ipynb"
    nbformat.write(nbformat.v4.new_notebook(cells=cells), path)
    run_all(path, timeout=1800, env=env)
    shutil.rmtree(folder / ".mkl")
    return path


def _fresh_copy(made: Path, into: Path) -> Path:
    shutil.rmtree(into, ignore_errors=True)
    shutil.copytree(made.parent, into)
    return into / made.name


def pending_once(made: Path, work: Path, env: dict[str, str]) -> dict[str, float]:
    """A new kernel on a fresh copy of the notebook runs ``%mkl pending``: its CPU time, reads and checks."""
    path = _fresh_copy(made, work)
    nb = nbformat.read(path, as_version=4)
    nb.cells.append(nbformat.v4.new_code_cell(PENDING))
    client = LabClient(nb, path, timeout=1800)
    with client.setup_kernel(env={**env, "JPY_SESSION_NAME": str(path.resolve())}):
        client.execute_cell(nb.cells[0], 0)  # %load_ext mkl_notebook
        client.execute_cell(nb.cells[-1], len(nb.cells) - 1)
    said = "".join(out.get("text", "") for out in nb.cells[-1].outputs if out.get("output_type") == "stream")
    found = re.search(r"TAKEUP (\{.*\})", said)
    if found is None:
        raise RuntimeError(f"the pending cell said no counts: {nb.cells[-1].outputs!r}"[:2000])
    counts: dict[str, float] = json.loads(found.group(1))
    return counts


def resume_once(made: Path, work: Path, env: dict[str, str]) -> float:
    """``mkl resume NOTEBOOK --run r0 --reply approve`` on a fresh copy: the CPU time of that process (the
    question it answers is looked up first, by ``mkl runs``, not timed)."""
    path = _fresh_copy(made, work)
    listed = subprocess.run(
        [sys.executable, "-m", "mkl_notebook.cli", "runs", path.name], cwd=path.parent, env=env, capture_output=True
    )
    question = next(run for run in json.loads(listed.stdout.splitlines()[-1])["runs"] if run["run"] == "r0")
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    answer = ["--run", "r0", "--reply", "approve", "--question", question["question_id"]]
    done = subprocess.run(
        [sys.executable, "-m", "mkl_notebook.cli", "resume", path.name, *answer, "--script", "refund.script.yaml"],
        cwd=path.parent,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode not in (0, 3):  # 3: the run waits for its next answer
        raise RuntimeError(f"mkl resume failed ({done.returncode}): {done.stderr[-2000:]}")
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def measure(tree: Path, made: dict[int, Path], work: Path, env: dict[str, str], rounds: int) -> dict[int, Any]:
    """The medians of ``rounds`` rounds for each notebook, with ``tree``'s mkl_notebook in the kernel and CLI."""
    env = {**env, "PYTHONPATH": str(tree)}
    found: dict[int, Any] = {}
    for count, path in made.items():
        pending = [pending_once(path, work / f"pending{count}", env) for _ in range(rounds)]
        resumes = [resume_once(path, work / f"resume{count}", env) for _ in range(rounds)]
        found[count] = {
            "cpu": statistics.median(p["cpu"] for p in pending),
            "reads": statistics.median(p.get("reads", 0) for p in pending),
            "checks": statistics.median(p.get("checks", 0) for p in pending),
            "resume": statistics.median(resumes),
        }
        print(tree, count, found[count], file=sys.stderr)
    return found


def table(made: dict[int, Path], trees: dict[str, dict[int, Any]], rounds: int, load: str) -> str:
    names = list(trees)
    lines = [
        "## A notebook of many waiting runs: the first `%mkl pending` in a new kernel (`python benchmarks/takeup.py`)",
        "",
        f"{datetime.date.today().isoformat()}, load average before the run {load}; medians of {rounds} "
        "rounds, each a new kernel on a fresh copy of the notebook (no store: every run is taken up and "
        "its form drawn). *pending*: the kernel's CPU time for the cell; *reads*: reads of the notebook "
        "file; *checks*: checkpoints verified; *resume*: CPU time of the whole `mkl resume NOTEBOOK --run r0 "
        "--reply approve` process on another fresh copy. Made by `benchmarks/takeup.py`.",
        "",
    ]
    header = ["waiting runs", "file size"]
    for name in names:
        header += [f"pending CPU ({name})", "per run", "reads", "checks", f"resume CPU ({name})"]
    lines += ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for count, path in made.items():
        row = [str(count), f"{path.stat().st_size / 1e6:.2f} MB"]
        for name in names:
            got = trees[name][count]
            row += [
                f"{got['cpu']:.2f} s",
                f"{got['cpu'] / count * 1000:.1f} ms",
                f"{got['reads']:g}",
                f"{got['checks']:g}",
                f"{got['resume']:.2f} s",
            ]
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--before", help="an older checkout, measured in the same run")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--sizes", default=",".join(map(str, SIZES)), help="how many waiting runs (comma-separated)")
    parser.add_argument("--no-write", action="store_true", help="print the section only")
    args = parser.parse_args()
    load = ", ".join(f"{value:.2f}" for value in os.getloadavg())
    with tempfile.TemporaryDirectory(prefix="mkl-takeup-") as scratch:
        folder = Path(scratch)
        env = {name: value for name, value in os.environ.items() if not name.startswith("MKL_")}  # no model
        env.update(JUPYTER_DATA_DIR=str(folder / "jupyter-data"), PYTHONPATH=str(ROOT))
        sizes = [int(size) for size in args.sizes.split(",")]
        made = {count: make_notebook(folder / f"made{count}", count, env) for count in sizes}
        trees = {"this tree": measure(ROOT, made, folder / "work", env, args.rounds)}
        if args.before:
            before = Path(args.before).resolve()
            trees[f"before: {before.name}"] = measure(before, made, folder / "work", env, args.rounds)
        section = table(made, trees, args.rounds, load)
    print(section)
    if not args.no_write:
        sections.write_section("takeup", section)


if __name__ == "__main__":
    main()
