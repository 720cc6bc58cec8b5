#!/usr/bin/env python
"""Batches and fan-out at scale, on threads and on a Dask LocalCluster of process workers.

    .venv/bin/python benchmarks/scale.py            # writes its section of benchmarks/RESULTS.md

Two workloads with a scripted oracle whose every call takes 100 ms (the wait of a model call):
a batch of 200 rows through a machine of 3 generative states, 50 rows at a time, and a fan-out
of 1,000 items, 32 branches at a time. Each is compared with its ideal wall time, latency ×
ceil(calls / concurrency) (the calls of one row follow each other), and the share of the wall
time spent writing the journal (SQLite, WAL) is measured by timing every append. Medians of
several runs; the machine is shared, so read the ratios.

Then the same kind of work through the command line exactly as a user runs it (``--cli``): the real
``mkl`` in a subprocess, ``--executor dask`` starting its own LocalCluster as it always does, against
``--executor threads``: ``mkl map`` over 2,000 rows of 3 states at ``--concurrency 32`` and ``mkl run``
of a fan-out over 1,000 items (32 branches, the default), each call a host tool that waits 100 ms. The
wall time is the whole command's (start, cluster, journal, exit). The client's CPU per call is measured
in this process through the app function the command uses (``Workspace.map`` with ``start_local``), so
the worker processes' CPU is not in it.

    .venv/bin/python benchmarks/scale.py --cli-only --cli-rows 200 --rounds 1   # small, while developing
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import re
import statistics
import subprocess
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
CLI_ROWS, CLI_CONCURRENCY, CLI_ITEMS, CLI_BRANCHES = 2000, 32, 1000, 32
CLI_HEADING = "### As the command line runs it (`python benchmarks/scale.py --cli-only`)"

THREE_TOOLS = """\
machine: waits
entry: one
budget: 5
result: c
context:
  n: 0
states:
  one:
    tool: wait
    input: { n: "{{n}}" }
    output: a
    gates: [{ when: otherwise, then: ok, to: two }]
  two:
    tool: wait
    input: { n: "{{n}}" }
    output: b
    gates: [{ when: otherwise, then: ok, to: three }]
  three:
    tool: wait
    input: { n: "{{n}}" }
    output: c
    gates: [{ when: otherwise, then: ok, to: END }]
"""

WIDE_TOOLS = """\
machine: wide_waits
entry: each
budget: 5
context:
  items: []
states:
  each:
    over: "{{items}}"
    tool: wait
    input: { n: "{{item}}" }
    output: waited
    gates: [{ when: otherwise, then: ok, to: END }]
"""

WAIT_TOOL = f"""\
import time

import mkl_notebook


@mkl_notebook.tool(effect="read")
def wait(n: str) -> str:
    time.sleep({LATENCY})
    return "waited " + str(n)
"""

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
    rows = batch.plan_rows([{"n": n} for n in range(ROWS)], "row")
    started = time.perf_counter()
    done = [
        row
        for row in batch.run_rows(batch.RowStart(machine, store, _scripted(wrap)), rows, concurrency=ROW_CONCURRENCY)
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


def _cli_folder(folder: Path, rows: int, items: int) -> None:
    (folder / "waits.mkl").write_text(THREE_TOOLS, encoding="utf-8")
    (folder / "wide.mkl").write_text(WIDE_TOOLS, encoding="utf-8")
    (folder / "tools.py").write_text(WAIT_TOOL, encoding="utf-8")
    (folder / "none.yaml").write_text("llm: {}\n", encoding="utf-8")
    (folder / "rows.jsonl").write_text("".join(f'{{"n": {n}}}\n' for n in range(rows)), encoding="utf-8")
    (folder / "items.json").write_text(json.dumps({"items": list(range(items))}), encoding="utf-8")


def cli_once(workload: str, executor: str, rows: int, items: int) -> float:
    """The wall time of one ``mkl map`` (``batch``) or ``mkl run`` (``fan-out``) command, in a subprocess."""
    env = {key: value for key, value in os.environ.items() if not key.startswith(("OPENAI", "ANTHROPIC", "MKL_"))}
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    with tempfile.TemporaryDirectory() as name:
        folder = Path(name)
        _cli_folder(folder, rows, items)
        common = ["--tools", "tools.py", "--script", "none.yaml", "--executor", executor, "--quiet"]
        if workload != "fan-out":
            args = ["map", "waits.mkl", "--over", "rows.jsonl", "--concurrency", str(CLI_CONCURRENCY), *common]
        else:
            args = ["run", "wide.mkl", "--input", "@items.json", *common]
        started = time.perf_counter()
        done = subprocess.run(
            [sys.executable, "-m", "mkl_notebook.cli", *args], cwd=folder, env=env, capture_output=True, text=True
        )
        wall = time.perf_counter() - started
    status = json.loads(done.stdout.strip().splitlines()[-1]) if done.stdout.strip() else {}
    assert done.returncode == 0 and status.get("status") == "done", (done.returncode, status, done.stderr[-2000:])
    assert "already in use" not in done.stderr, done.stderr
    return wall


def client_cpu_per_call(executor: str | None, rows: int) -> float:
    """This process's CPU per call for ``rows`` rows of 3 calls, through ``Workspace.map`` as the command runs it
    (``start_local``: ``dask`` starts the command's LocalCluster; its workers' CPU is theirs, not counted)."""
    from mkl_notebook.app.settings import Settings
    from mkl_notebook.app.workspace import Workspace
    from mkl_notebook.providers.host import Registry

    registry = Registry()
    registry.tool(_waited, name="wait", effect="read")
    with tempfile.TemporaryDirectory() as name:
        settings = Settings.from_flags(store=str(Path(name) / "runs.sqlite"), executor=executor)
        with Workspace(settings, registry=registry, follow_files=True, start_local=True) as ws:
            ws.shelf.define(THREE_TOOLS)
            ws.map("waits", [{"n": 0}], id="warm", script={"llm": {}})  # the cluster started, the streams open
            cpu = time.process_time()
            ran = ws.map("waits", [{"n": n} for n in range(rows)], script={"llm": {}}, concurrency=CLI_CONCURRENCY)
            cpu = time.process_time() - cpu
    assert batch.counts(ran.rows) == {"done": rows}, batch.counts(ran.rows)
    return cpu / (rows * 3)


def _waited(n: str) -> str:
    time.sleep(LATENCY)
    return f"waited {n}"


def cli_section(rounds: int, rows: int, items: int) -> list[str]:
    """The table of the commands as a user runs them (and the client's CPU per call)."""
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    walls: dict[tuple[str, str], float] = {}
    for workload in ("one row", "batch", "fan-out"):
        samples: dict[str, list[float]] = {"threads": [], "dask": []}
        for _ in range(rounds):  # interleaved, so that both executors meet the same moments of a shared machine
            for executor in samples:
                samples[executor].append(cli_once(workload, executor, 1 if workload == "one row" else rows, items))
                print(workload, executor, f"{samples[executor][-1]:.2f} s", file=sys.stderr)
        for executor, walls_seen in samples.items():
            walls[(workload, executor)] = statistics.median(walls_seen)
    cpu = {
        executor: statistics.median(client_cpu_per_call(executor, min(rows, 500)) for _ in range(rounds))
        for executor in ("threads", "dask")
    }
    ideal = {
        "one row": LATENCY * 3,
        "batch": LATENCY * 3 * math.ceil(rows / CLI_CONCURRENCY),
        "fan-out": LATENCY * math.ceil(items / CLI_BRANCHES),
    }
    what = {
        "one row": "`mkl map` 1 row × 3 calls (what starting costs)",
        "batch": f"`mkl map` {rows:,} rows × 3 calls, `--concurrency {CLI_CONCURRENCY}`",
        "fan-out": f"`mkl run` over {items:,} items, {CLI_BRANCHES} branches at a time",
    }
    lines = [
        CLI_HEADING,
        "",
        f"The real `mkl` in a subprocess, each call a host tool that waits {LATENCY * 1000:.0f} ms; `--executor "
        "dask` starts the command's own LocalCluster, as it always does. Wall = the whole command (start, "
        "cluster, journal, exit); ideal = latency × calls per row × ceil(rows / concurrency). Median of "
        f"{rounds} interleaved rounds. Measured {datetime.datetime.now():%Y-%m-%d %H:%M} on {machine_description()}; "
        f"load average (1, 5, 15 min) {load} at the start, {' '.join(f'{x:.2f}' for x in os.getloadavg())} "
        "at the end.",
        "",
        "| workload | executor | wall | ideal | wall / ideal | vs threads |",
        "|---|---|---|---|---|---|",
    ]
    for (workload, executor), wall in walls.items():
        versus = wall / walls[(workload, "threads")]
        lines.append(
            f"| {what[workload]} | `{executor}` | {wall:.2f} s | {ideal[workload]:.2f} s | "
            f"{wall / ideal[workload]:.2f}× | {versus:.2f}× |"
        )
    lines += [
        "",
        f"This process's CPU per call, {min(rows, 500)} rows × 3 calls through `Workspace.map` (the app function "
        f"the command calls): threads {cpu['threads'] * 1e6:.0f} µs, dask {cpu['dask'] * 1e6:.0f} µs "
        f"({cpu['dask'] / cpu['threads']:.2f}×; the workers' CPU is theirs).",
    ]
    return lines


def median(runs: list[Measured]) -> Measured:
    return Measured(statistics.median(r.wall for r in runs), statistics.median(r.journal for r in runs))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--no-write", action="store_true", help="print the table only")
    parser.add_argument("--subprocess-scheduler", action="store_true", help="the scheduler in its own process")
    parser.add_argument("--cli", action="store_true", help="also the commands as a user runs them")
    parser.add_argument("--cli-only", action="store_true", help="only the commands as a user runs them")
    parser.add_argument("--cli-rows", type=int, default=CLI_ROWS, help="rows of the `mkl map` command")
    parser.add_argument("--cli-items", type=int, default=CLI_ITEMS, help="items of the `mkl run` fan-out")
    args = parser.parse_args()
    head = None if args.cli_only else "\n".join(pooled_section(args))
    tail = "\n".join(cli_section(args.rounds, args.cli_rows, args.cli_items)) if args.cli or args.cli_only else None
    print("\n\n".join(part for part in (head, tail) if part))
    if not args.no_write:
        write_section(head, tail)


def write_section(head: str | None, tail: str | None) -> None:
    """Replace this benchmark's section of RESULTS.md, or the part of it measured now (the other part kept)."""
    path = ROOT / "benchmarks" / "RESULTS.md"
    text = path.read_text(encoding="utf-8")
    found = re.search(re.escape(START) + "\n(.*?)\n?" + re.escape(END), text, flags=re.DOTALL)
    old_head, _, old_tail = (found.group(1) if found else "").partition(CLI_HEADING)
    head = head if head is not None else old_head.strip()
    tail = tail if tail is not None else (CLI_HEADING + old_tail).strip() if old_tail else None
    section = f"{START}\n" + "\n\n".join(part for part in (head, tail) if part) + f"\n{END}"
    before, after = (text[: found.start()], text[found.end() :]) if found else (text.rstrip() + "\n\n", "\n")
    text = before + section + after
    path.write_text(text, encoding="utf-8")


def pooled_section(args: argparse.Namespace) -> list[str]:
    """The table of the workloads run in this process, on threads and on a LocalCluster built here."""
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
    return lines


if __name__ == "__main__":
    main()
