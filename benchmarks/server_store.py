#!/usr/bin/env python
"""What a durable step costs on a PostgreSQL store beside the SQLite one, on this machine.

    .venv/bin/python benchmarks/server_store.py              # writes its section of benchmarks/RESULTS.md
    .venv/bin/python benchmarks/server_store.py --no-write   # prints it only

A PostgreSQL server of its own is started as the tests start theirs (tests/postgres_server.py: ``initdb`` in a
temporary folder, a Unix socket only), with ``fsync=on`` as a real server runs. Per store, in turn within each
round (so a busy spell of the shared machine hits both): appends of a model answer (``durability=process``:
SQLite ``synchronous=NORMAL``, PostgreSQL ``synchronous_commit=off``), appends of a person's answer (synced:
``FULL``, ``synchronous_commit=on``), and a lease taken and let go (SQLite: a byte lock of a file; PostgreSQL:
a connection of its own and an advisory lock). Wall and this process's CPU time per operation, medians and
90th percentiles; the ratio is PostgreSQL's over SQLite's in the same run. The server's own CPU is not counted.
"""

from __future__ import annotations

import argparse
import datetime
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

import sections  # noqa: E402  (benchmarks/sections.py, beside this file)
from postgres_server import PostgresServer, ServerUnavailable  # noqa: E402  (tests/postgres_server.py)

from mkl_notebook.durable import records as rec  # noqa: E402
from mkl_notebook.durable.store_opening import close_store, open_store  # noqa: E402

TEXT = "A model's answer of a few sentences, as a step of a machine gets it back. " * 6


def _answer(i: int) -> dict[str, Any]:
    return {"t": "answer", "pos": f"root/{i}:s#1/produce", "fp": "f" * 64, "kind": "produce", "value": TEXT}


def _reply(i: int) -> dict[str, Any]:
    return dict(rec.reply_record(f"root/{i}:gate#1/reply", "approval", "yes", by="someone", via="cli"))


def timed(operation: Callable[[int], None], count: int) -> tuple[list[float], list[float]]:
    """Wall and CPU seconds of each of ``count`` calls of ``operation``."""
    walls, cpus = [], []
    for i in range(count):
        wall, cpu = time.perf_counter(), time.process_time()
        operation(i)
        cpus.append(time.process_time() - cpu)
        walls.append(time.perf_counter() - wall)
    return walls, cpus


def measure(location: str, kind: str, count: int) -> tuple[list[float], list[float]]:
    store = open_store(location)
    try:
        with store.lease("r"):
            store.create("r", {"t": "start", "root": "m"})
            if kind == "lease":
                return _leases(store, count)
            make = _answer if kind == "model answer" else _reply
            return timed(lambda i: store.append("r", make(i)), count)
    finally:
        close_store(store)


def _leases(store: Any, count: int) -> tuple[list[float], list[float]]:
    def one(i: int) -> None:
        with store.lease(f"other-{i}"):
            pass

    return timed(one, count)


KINDS = ("model answer", "person's answer (synced)", "lease taken and let go")


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:,.2f} ms"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--count", type=int, default=40)
    parser.add_argument("--no-write", action="store_true", help="print the section only")
    args = parser.parse_args()
    try:
        server = PostgresServer(fsync=True)
    except ServerUnavailable as why:
        raise SystemExit(f"no PostgreSQL server could be started: {why}") from None
    results: dict[tuple[str, str], tuple[list[float], list[float]]] = {}
    try:
        for _ in range(args.rounds):
            for kind in KINDS:
                short = "lease" if kind.startswith("lease") else kind
                with tempfile.TemporaryDirectory() as folder:
                    for name, location in (
                        ("SQLite", str(Path(folder) / "runs.sqlite")),
                        ("PostgreSQL", server.database()),
                    ):
                        walls, cpus = measure(location, short, args.count)
                        kept = results.setdefault((kind, name), ([], []))
                        kept[0].extend(walls)
                        kept[1].extend(cpus)
    finally:
        server.stop()
    when = datetime.datetime.now().strftime("%Y-%m-%d %H:%M")
    load = ", ".join(f"{value:.2f}" for value in os.getloadavg())
    lines = [
        "## A PostgreSQL store beside SQLite (`python benchmarks/server_store.py`)",
        "",
        f"{when}; load average (1, 5, 15 min) {load} on {os.cpu_count()} cores; a PostgreSQL server started "
        f"for the run on this machine (Unix socket, `fsync=on`), SQLite in the temporary folder; {args.rounds} "
        f"rounds of {args.count} operations per kind and store, the stores in turn. Wall and the client "
        "process's CPU per operation (the server's CPU is its own), medians (90th percentiles).",
        "",
        "| operation | SQLite wall | PostgreSQL wall | wall ratio | SQLite CPU | PostgreSQL CPU | CPU ratio |",
        "|---|---|---|---|---|---|---|",
    ]
    for kind in KINDS:
        (lw, lc), (pw, pc) = results[(kind, "SQLite")], results[(kind, "PostgreSQL")]

        def both(values: list[float]) -> str:
            ordered = sorted(values)
            return f"{_ms(statistics.median(ordered))} ({_ms(ordered[int(len(ordered) * 0.9)])})"

        lines.append(
            f"| {kind} | {both(lw)} | {both(pw)} | {statistics.median(pw) / statistics.median(lw):.1f}× | "
            f"{both(lc)} | {both(pc)} | {statistics.median(pc) / max(statistics.median(lc), 1e-9):.1f}× |"
        )
    lines += [
        "",
        "A lease on PostgreSQL holds a connection of its own (the advisory lock lives as long as its session); "
        "the store keeps those of leases let go for the next, so only its first lease pays a connection's start "
        "(a few milliseconds). Appends share a pool of connections.",
    ]
    text = "\n".join(lines)
    print(text)
    if not args.no_write:
        sections.write_section("server_store", text)


if __name__ == "__main__":
    main()
