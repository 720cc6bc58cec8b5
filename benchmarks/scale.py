#!/usr/bin/env python
"""Batches and fan-out at scale, on threads and on a Dask LocalCluster of process workers.

    .venv/bin/python benchmarks/scale.py            # writes its section of benchmarks/RESULTS.md

Two workloads with a scripted oracle whose every call takes 100 ms (the wait of a model call):
a batch of 200 rows through a machine of 3 generative states, 50 rows at a time, and a fan-out
of 1,000 items, 32 branches at a time. Each is compared with its ideal wall time, latency ×
ceil(calls / concurrency) (the calls of one row follow each other), and the share of the wall
time spent writing the journal (SQLite, WAL) is measured by timing every append. Medians of
several runs; the machine is shared, so read the ratios.
"""

from __future__ import annotations

import argparse
import datetime
import math
import re
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from run import machine_description  # noqa: E402  (benchmarks/run.py, beside this file)

from mkl_notebook.app import batch  # noqa: E402
from mkl_notebook.durable import runs as durable  # noqa: E402
from mkl_notebook.durable.stores import RunStatus, SQLiteStore  # noqa: E402
from mkl_notebook.engine.options import RunOptions  # noqa: E402
from mkl_notebook.engine.oracle import Oracle  # noqa: E402
from mkl_notebook.executors.dask import DaskExecutor  # noqa: E402
from mkl_notebook.executors.dask_calls import DaskCalls  # noqa: E402
from mkl_notebook.lang.loader import load  # noqa: E402
from mkl_notebook.providers.scripted import oracle_from_script  # noqa: E402

LATENCY = 0.1
ROWS, ROW_CONCURRENCY = 200, 50
ITEMS, BRANCHES = 1000, 32
START, END = "<!-- scale:start -->", "<!-- scale:end -->"

THREE_STATES = """\
machine: three
entry: one
budget: 5
states:
  one:
    structure: A word.
    prompt: "First, for {{n}}."
    output: a
    gates: [{ when: otherwise, then: ok, to: two }]
  two:
    structure: A word.
    prompt: "Second, for {{n}}."
    output: b
    gates: [{ when: otherwise, then: ok, to: three }]
  three:
    structure: A word.
    prompt: "Third, for {{n}}."
    output: c
    gates: [{ when: otherwise, then: ok, to: END }]
"""

FAN_OUT = f"""\
machine: wide
entry: each
budget: {ITEMS + 5}
states:
  each:
    over: "{{{{items}}}}"
    structure: A word.
    prompt: "One word for {{{{item}}}}."
    output: words
    gates: [{{ when: otherwise, then: ok, to: END }}]
"""


class TimedStore(SQLiteStore):
    """A store that notes when each append began and ended: the journal's share of a run is the time at
    least one append was in progress (appends from many threads overlap while they wait on each other)."""

    spans: ClassVar[list[tuple[float, float]]] = []

    def append(self, run_id: str, record: Any) -> None:
        started = time.perf_counter()
        super().append(run_id, record)
        TimedStore.spans.append((started, time.perf_counter()))

    def append_ending(self, run_id: str, record: Any, status: RunStatus) -> None:
        started = time.perf_counter()
        super().append_ending(run_id, record, status)
        TimedStore.spans.append((started, time.perf_counter()))

    @classmethod
    def busy(cls) -> float:
        """The length of the union of the append spans."""
        total, reach = 0.0, float("-inf")
        for start, end in sorted(cls.spans):
            if end > reach:
                total += end - max(start, reach)
                reach = end
        return total


@dataclass
class Measured:
    wall: float
    journal: float


def _scripted(wrap: Callable[[Oracle], Oracle] | None) -> Callable[[], Oracle]:
    script = {"llm": {"produce": {"": "word"}}}
    return lambda: (wrap or (lambda oracle: oracle))(oracle_from_script(script, latency=LATENCY))


def batch_once(wrap: Callable[[Oracle], Oracle] | None, folder: Path) -> Measured:
    machine = load(THREE_STATES)
    store = TimedStore(folder / "batch.sqlite")
    TimedStore.spans = []
    rows = batch.plan([{"n": n} for n in range(ROWS)], "row")
    started = time.perf_counter()
    done = [
        row
        for row in batch.run(machine, rows, store=store, oracle_for=_scripted(wrap), concurrency=ROW_CONCURRENCY)
        if row
    ]
    wall = time.perf_counter() - started
    failed = [row for row in done if row.status != "done"]
    assert len(done) == ROWS and not failed, (batch.counts(done), batch.row_summary(failed[0]) if failed else None)
    return Measured(wall, TimedStore.busy())


def fan_out_once(wrap: Callable[[Oracle], Oracle] | None, folder: Path) -> Measured:
    machine = load(FAN_OUT)
    store = TimedStore(folder / "fan.sqlite")
    TimedStore.spans = []
    started = time.perf_counter()
    outcome = durable.start(
        machine,
        _scripted(wrap)(),
        store=store,
        run_id="wide",
        context={"items": list(range(ITEMS))},
        options=RunOptions(max_workers=BRANCHES),
    )
    wall = time.perf_counter() - started
    assert outcome.result.status == "done" and len(outcome.result.context["words"]) == ITEMS
    return Measured(wall, TimedStore.busy())


def _sleep(seconds: float) -> None:
    time.sleep(seconds)


def dask_alone(client: Any, calls: int, concurrency: int, chained: int) -> Measured:
    """The same calls as bare Dask tasks (a sleep each), from as many threads, each thread's ``chained``
    calls one after another: what Dask itself costs here, without mkl_notebook."""
    from concurrent.futures import ThreadPoolExecutor

    def chain(_: int) -> None:
        for _ in range(chained):
            client.submit(_sleep, LATENCY, pure=False).result()

    started = time.perf_counter()
    with ThreadPoolExecutor(concurrency) as pool:
        list(pool.map(chain, range(calls // chained)))
    return Measured(time.perf_counter() - started, 0.0)


def median(runs: list[Measured]) -> Measured:
    return Measured(statistics.median(r.wall for r in runs), statistics.median(r.journal for r in runs))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--no-write", action="store_true", help="print the table only")
    parser.add_argument("--subprocess-scheduler", action="store_true", help="the scheduler in its own process")
    args = parser.parse_args()
    import distributed

    ideal_batch = LATENCY * math.ceil(ROWS * 3 / ROW_CONCURRENCY)
    ideal_fan = LATENCY * math.ceil(ITEMS / BRANCHES)
    results: dict[tuple[str, str], Measured] = {}
    if args.subprocess_scheduler:
        from distributed.deploy.subprocess import SubprocessCluster

        cluster = SubprocessCluster(n_workers=2, threads_per_worker=64, dashboard_address=None, silence_logs=40)
    else:
        cluster = distributed.LocalCluster(
            n_workers=2, threads_per_worker=64, processes=True, dashboard_address=None, silence_logs=40
        )
    client = distributed.Client(cluster)
    servers = DaskCalls(client)
    try:
        executors: dict[str, Callable[[Oracle], Oracle] | None] = {
            "threads": None,
            "Dask LocalCluster (2 process workers)": lambda oracle: DaskExecutor(oracle, servers),
        }
        for workload, calls, concurrency, chained in (
            ("batch", ROWS * 3, ROW_CONCURRENCY, 3),
            ("fan-out", ITEMS, BRANCHES, 1),
        ):
            bare = [dask_alone(client, calls, concurrency, chained) for _ in range(args.rounds)]
            results[(workload, "Dask alone: bare tasks, same concurrency")] = median(bare)
        for name, wrap in executors.items():
            for workload, once in (("batch", batch_once), ("fan-out", fan_out_once)):
                runs = []
                for _ in range(args.rounds):
                    with tempfile.TemporaryDirectory() as folder:
                        runs.append(once(wrap, Path(folder)))
                results[(workload, name)] = median(runs)
                print(workload, name, results[(workload, name)], file=sys.stderr)
    finally:
        client.close()
        cluster.close()

    lines = [
        "## Batches and fan-out at scale (`python benchmarks/scale.py`)",
        "",
        f"A scripted oracle whose every call takes {LATENCY * 1000:.0f} ms. *batch*: {ROWS} rows × 3 generative "
        f"states, {ROW_CONCURRENCY} rows at a time ({ROWS * 3} calls); *fan-out*: one state over {ITEMS:,} items, "
        f"{BRANCHES} branches at a time. Ideal = latency × ceil(calls / concurrency). Median of {args.rounds} runs "
        "each; the journal is SQLite (WAL), and its share is the time during which an append was in progress. "
        f"Measured {datetime.date.today():%Y-%m-%d} on {machine_description()}; the machine is shared, and "
        "*Dask alone* shows how busy it was.",
        "",
        "| workload | executor | wall | ideal | wall / ideal | journal share |",
        "|---|---|---|---|---|---|",
    ]
    for (workload, name), measured in sorted(results.items(), key=lambda item: item[0][0]):
        ideal = ideal_batch if workload == "batch" else ideal_fan
        share = f"{measured.journal / measured.wall:.1%}" if measured.journal else "—"
        lines.append(
            f"| {workload} | {name} | {measured.wall:.2f} s | {ideal:.2f} s | {measured.wall / ideal:.2f}× | {share} |"
        )
    lines += [
        "",
        "*Dask alone* is the same number of bare Dask tasks (a 100 ms sleep each) submitted from as many "
        "threads: what one scheduler task per call would cost on this machine before mkl_notebook adds "
        "anything. mkl_notebook sends no task per call: this process keeps one comm open to each worker "
        "(Dask's own, through a handler a worker plugin adds), and calls and answers stream over it both ways "
        "(`mkl_notebook/executors/dask_calls.py`, `dask_worker.py`). What is left over threads is this process's "
        "share of those messages (the scheduler, both workers and this process share the machine's cores).",
    ]
    table = "\n".join(lines)
    print(table)
    if not args.no_write:
        path = ROOT / "benchmarks" / "RESULTS.md"
        text = path.read_text(encoding="utf-8")
        section = f"{START}\n{table}\n{END}"
        if START in text:
            text = re.sub(re.escape(START) + ".*?" + re.escape(END), lambda _: section, text, flags=re.DOTALL)
        else:
            text = text.rstrip() + "\n\n" + section + "\n"
        path.write_text(text, encoding="utf-8")


if __name__ == "__main__":
    main()
