#!/usr/bin/env python
"""What durability costs per commit on this disk: a record committed with ``synchronous=NORMAL`` against ``FULL``.

    .venv/bin/python benchmarks/durability.py              # writes its section of benchmarks/RESULTS.md
    .venv/bin/python benchmarks/durability.py --no-write   # prints it only

One ``SQLiteStore.append`` per record, as a run makes them, in a store in a temporary folder (on the disk
the system's temporary folder is on): a model answer in the default store (``durability="process"``: WAL
with ``synchronous=NORMAL``, no sync at the commit), a person's answer and a tool's intent in that same
store (their commit switches the connection to ``FULL`` and back: the WAL is synced before ``append``
returns), and a model answer in a ``durability="power"`` store (every commit ``FULL``). The kinds take
turns within each round, each round on fresh stores, so a busy spell of the shared machine hits them all;
medians of every append. With ``strace`` installed, the sync calls per append are counted too, in a child
process.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import sections  # noqa: E402  (benchmarks/sections.py, beside this file)

from mkl_notebook.durable import records as rec  # noqa: E402
from mkl_notebook.durable.stores import SQLiteStore  # noqa: E402

TEXT = "A model's answer of a few sentences, as a step of a machine gets it back. " * 6  # ~450 characters


def _answer(i: int) -> dict[str, Any]:
    return {"t": "answer", "pos": f"root/{i}:s#1/produce", "fp": "f" * 64, "kind": "produce", "value": TEXT}


def _reply(i: int) -> dict[str, Any]:
    return dict(rec.reply_record(f"root/{i}:gate#1/reply", "approval", "yes", by="someone", via="cli"))


def _intent(i: int) -> dict[str, Any]:
    return dict(rec.intent_record(f"root/{i}:pay#1/tool", "f" * 64, "charge"))


# name, the store's durability, the record an append carries, the synchronous level of its commit
KINDS: list[tuple[str, str, Callable[[int], dict[str, Any]], str]] = [
    ("model answer", "process", _answer, "NORMAL"),
    ("person's answer (reply)", "process", _reply, "FULL"),
    ("tool intent", "process", _intent, "FULL"),
    ("model answer, `--durability power`", "power", _answer, "FULL"),
]


def appends(folder: Path, durability: str, make: Callable[[int], dict[str, Any]], count: int) -> list[float]:
    """The wall seconds of each of ``count`` appends to a fresh store in ``folder``."""
    store = SQLiteStore(folder / "runs.sqlite", durability=durability)
    store.create("r", {"t": "start", "root": "m"})
    times = []
    try:
        for i in range(count):
            record = make(i)
            began = time.perf_counter()
            store.append("r", record)
            times.append(time.perf_counter() - began)
    finally:
        store.close()
    return times


def count_syncs(kind: int, count: int) -> float | None:
    """The fsync/fdatasync calls per append of ``KINDS[kind]``, counted by strace in a child process (None
    without strace): the calls of ``count`` appends less those of none."""
    if shutil.which("strace") is None:
        return None

    def syncs(n: int) -> int:
        with tempfile.TemporaryDirectory() as folder:
            log = Path(folder) / "strace.txt"
            command = [sys.executable, __file__, "--child", str(kind), str(n), folder]
            subprocess.run(
                ["strace", "-f", "-e", "trace=fsync,fdatasync", "-o", str(log), *command],
                check=True,
                capture_output=True,
            )
            return sum(1 for line in log.read_text().splitlines() if "sync(" in line and "resumed" not in line)

    return (syncs(count) - syncs(0)) / count


def _us(seconds: float) -> str:
    return f"{seconds * 1e6:,.0f} µs"


def section(results: dict[str, list[float]], syncs: dict[str, float | None], args: argparse.Namespace) -> str:
    base = statistics.median(results[KINDS[0][0]])
    when = datetime.datetime.now().strftime("%Y-%m-%d %H:%M")
    load = ", ".join(f"{value:.2f}" for value in os.getloadavg())
    lines = [
        "## Durability per commit (`python benchmarks/durability.py`)",
        "",
        f"{when}; load average (1, 5, 15 min) {load} on {os.cpu_count()} cores; SQLite "
        f"{__import__('sqlite3').sqlite_version}; the temporary folder's disk. One `SQLiteStore.append` per "
        f"record, the kinds in turn in each of {args.rounds} rounds of {args.count} appends on fresh stores; "
        "wall time per append (the sync is the disk's, not the CPU's), medians and 90th percentiles.",
        "",
        "| record | store durability | commit | median per append | 90th percentile | ÷ model answer "
        "| syncs per append |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, durability, _, level in KINDS:
        times = sorted(results[name])
        median = statistics.median(times)
        p90 = times[int(len(times) * 0.9)]
        counted = syncs[name]
        shown = "—" if counted is None else f"{counted:.1f}"
        lines.append(
            f"| {name} | `{durability}` | `{level}` | {_us(median)} | {_us(p90)} | {median / base:.1f}× | {shown} |"
        )
    lines += [
        "",
        "A person's answer and a tool's intent are rare (one per question asked, one per non-idempotent call), so "
        "the default pays the sync where losing a record cannot be made good by asking a model again; "
        "`--durability power` pays it on every model answer too.",
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=7, help="rounds, the kinds in turn in each")
    parser.add_argument("--count", type=int, default=40, help="appends per kind and round")
    parser.add_argument("--no-write", action="store_true", help="print the section only")
    parser.add_argument("--child", nargs=3, metavar=("KIND", "COUNT", "FOLDER"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        _, durability, make, _ = KINDS[int(args.child[0])]
        appends(Path(args.child[2]), durability, make, int(args.child[1]))
        return
    results: dict[str, list[float]] = {name: [] for name, *_ in KINDS}
    for _ in range(args.rounds):
        for name, durability, make, _ in KINDS:
            with tempfile.TemporaryDirectory() as folder:
                results[name] += appends(Path(folder), durability, make, args.count)
    syncs = {name: count_syncs(index, 20) for index, (name, *_) in enumerate(KINDS)}
    print(json.dumps({name: statistics.median(times) for name, times in results.items()}), file=sys.stderr)
    text = section(results, syncs, args)
    print(text)
    if not args.no_write:
        sections.write_section("durability", text)


if __name__ == "__main__":
    main()
