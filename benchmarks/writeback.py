#!/usr/bin/env python
"""What syncing the folder costs per write-back of a notebook: a file replaced with its folder synced after the
rename (so a power cut cannot bring back the older file) against the same replacement without that sync.

    .venv/bin/python benchmarks/writeback.py              # writes its section of benchmarks/RESULTS.md
    .venv/bin/python benchmarks/writeback.py --no-write   # prints it only

Each write is ``mkl resume``'s own way of writing into a notebook (read it, change its metadata, write a
temporary file, sync it, rename it over the notebook; :func:`marks.mark_advancing`), on notebooks of
three sizes in a temporary folder (on the disk the system's temporary folder is on). The two ways take turns
within each round, so a busy spell of the shared machine hits both; medians of every write.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import sections  # noqa: E402  (benchmarks/sections.py, beside this file)

from mkl_notebook.checkpoints.marks import mark_advancing  # noqa: E402
from mkl_notebook.durable import disk  # noqa: E402

SIZES = {"50 KB": 50_000, "1 MB": 1_000_000, "10 MB": 10_000_000}


def _notebook(path: Path, size: int) -> None:
    """A notebook of about ``size`` bytes: cells whose outputs are text, as a run's views are."""
    text = "A line of a run's trace, as its view prints it. " * 20 + "\n"
    cells = []
    while sum(len(json.dumps(cell)) for cell in cells) < size:
        cells.append(
            {
                "cell_type": "code", "execution_count": 1, "id": f"c{len(cells)}", "metadata": {},
                "source": "%mkl runs", "outputs": [{"output_type": "stream", "name": "stdout", "text": text * 50}],
            }
        )  # fmt: skip
    notebook = {"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    path.write_text(json.dumps(notebook, indent=1), encoding="utf-8")


def _writes(path: Path, count: int, synced: bool) -> list[float]:
    """``count`` write-backs of ``path``, each timed; the folder synced after each rename or not."""
    keep = disk.sync_folder
    if not synced:
        disk.sync_folder = lambda folder: None  # type: ignore[assignment]
    try:
        times = []
        for i in range(count):
            started = time.perf_counter()
            mark_advancing(path, "r", "/a/store", i)
            times.append(time.perf_counter() - started)
        return times
    finally:
        disk.sync_folder = keep


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.2f} ms"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=7, help="rounds, the two ways in turn in each")
    parser.add_argument("--count", type=int, default=10, help="writes per size, way and round")
    parser.add_argument("--no-write", action="store_true", help="print the section only")
    args = parser.parse_args()
    results: dict[tuple[str, bool], list[float]] = {(name, way): [] for name in SIZES for way in (True, False)}
    with tempfile.TemporaryDirectory() as folder:
        for name, size in SIZES.items():
            path = Path(folder) / f"{name.replace(' ', '')}.ipynb"
            _notebook(path, size)
        for _ in range(args.rounds):
            for name in SIZES:
                path = Path(folder) / f"{name.replace(' ', '')}.ipynb"
                for synced in (True, False):
                    results[(name, synced)] += _writes(path, args.count, synced)
    lines = [
        "## A notebook's write-back with its folder synced (`python benchmarks/writeback.py`)",
        "",
        f"Medians of {args.rounds} × {args.count} writes per cell, the two ways in turn, in a temporary folder.",
        "",
        "| notebook | folder synced after the rename | without that sync | the sync costs |",
        "|---|---|---|---|",
    ]
    for name in SIZES:
        synced = statistics.median(results[(name, True)])
        bare = statistics.median(results[(name, False)])
        lines.append(f"| {name} | {_ms(synced)} | {_ms(bare)} | {_ms(synced - bare)} ({synced / bare:.2f}×) |")
    lines += [
        "",
        "A write-back happens once per answer given from a terminal (`mkl resume`), a checkpoint file written or a "
        "key trusted: against the seconds a person takes to decide, the sync is paid where losing the answer to a "
        "power cut would ask the person again, or pay twice.",
    ]
    text = "\n".join(lines)
    print(text)
    if not args.no_write:
        sections.write_section("writeback", text)


if __name__ == "__main__":
    main()
