#!/usr/bin/env python
"""How soon a waiting kernel redraws an answer given in another process: SQLite (the kernel looks at the store's
file every 0.5 s) beside PostgreSQL (the server tells the kernel: NOTIFY), in the same run.

    .venv/bin/python benchmarks/wake.py              # writes its section of benchmarks/RESULTS.md
    .venv/bin/python benchmarks/wake.py --no-write   # prints it only

A PostgreSQL server of its own is started as the tests start theirs (tests/postgres_server.py: ``initdb`` in a
temporary folder, a Unix socket only, ``fsync=on`` as a real server runs). Per store, one real kernel (started as
Jupyter starts one, by jupyter_client) runs the refund example until it waits for a person; another Python
process (kept running, as a colleague's kernel is) answers it through the package's API (``get_run(…).submit``)
and takes the time as soon as that returns: the answer and the run's next advance are committed. The time ends
when this process, listening on the kernel's iopub channel as a page's server does, receives the
``update_display_data`` message that redraws the cell with the answer. The stores take turns within each round
(so a busy spell of the shared machine hits both), each answer given at a moment drawn at random within the SQLite
watch's period; medians and 90th percentiles of every round.
"""

from __future__ import annotations

import argparse
import os
import queue
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

import sections  # noqa: E402  (benchmarks/sections.py, beside this file)
from postgres_server import PostgresServer  # noqa: E402  (tests/postgres_server.py)

from mkl_notebook.notebook.watch import EVERY  # noqa: E402
from mkl_notebook.providers.config import ENVIRONMENT  # noqa: E402

EXAMPLES = ROOT / "examples"
# The answering process: one line in (a run's id and its question's), one line out: the clock as soon as the
# store's commit of the answer returned, and as soon as that of the end of the advance the answer set going did.
ANSWERER = """
import sys, time
import mkl_notebook
from mkl_notebook.durable.postgres_store import PostgresStore
from mkl_notebook.durable.stores import SQLiteStore

committed = {}

def timed(kind, write):
    def timed_write(store, run_id, record, *rest):
        write(store, run_id, record, *rest)
        if kind == "end" or record.get("t") == "reply":
            committed[kind if kind == "end" else "reply"] = time.monotonic()
    return timed_write

for store in (SQLiteStore, PostgresStore):
    store.append = timed("append", store.append)
    store.append_ending = timed("end", store.append_ending)
for line in sys.stdin:
    run_id, question = line.split()
    committed.clear()
    mkl_notebook.get_run(run_id, script="refund.script.yaml").submit("approve", question=question)
    print(committed["reply"], committed["end"], flush=True)
"""


def _env() -> dict[str, str]:
    """This environment minus every model setting (the runs' model answers are scripted), this tree imported."""
    env = {key: value for key, value in os.environ.items() if key not in ENVIRONMENT}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    return env


def _folder(parent: Path, name: str) -> Path:
    folder = parent / name
    folder.mkdir()
    for file in ("refund.mkl", "refund.script.yaml"):
        shutil.copy(EXAMPLES / file, folder / file)
    return folder


class Waiting:
    """One store's kernel (waiting on a run of it) and its answerer."""

    def __init__(self, parent: Path, name: str, store: str) -> None:
        from jupyter_client.manager import KernelManager

        self.store = store
        alice, bob = _folder(parent, f"{name}-alice"), _folder(parent, f"{name}-bob")
        self.manager = KernelManager(kernel_name="python3")
        self.manager.start_kernel(cwd=str(alice), env=_env())
        self.client = self.manager.client()
        self.client.start_channels()
        self.client.wait_for_ready(timeout=120)
        self.execute(f"%load_ext mkl_notebook\n%mkl load refund.mkl\n%mkl config store={store}\nimport mkl_notebook")
        self.answerer = subprocess.Popen(
            [sys.executable, "-c", ANSWERER],
            cwd=bob,
            env={**_env(), "MKL_STORE": store},
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )

    def execute(self, code: str) -> str:
        """Execute ``code`` as a cell; what it printed."""
        printed: list[str] = []

        def hook(message: dict[str, Any]) -> None:
            if message["msg_type"] == "stream":
                printed.append(message["content"]["text"])

        reply = self.client.execute_interactive(code, output_hook=hook, timeout=120)
        if reply["content"]["status"] != "ok":
            raise RuntimeError(f"{code!r} failed in the kernel: {reply['content']}")
        return "".join(printed)

    def round(self, run_id: str) -> tuple[float, float]:
        """Seconds from the answer committed in the other process to the kernel's redraw of it, and from the end
        of the advance it set going committed."""
        self.execute(f"%mkl run refund --id {run_id} --script refund.script.yaml --set ticket=broken")
        question = self.execute(f"print(mkl_notebook.get_run({run_id!r}).question_id)").strip()
        while True:  # what the run cell published is behind us
            try:
                self.client.get_iopub_msg(timeout=0.2)
            except queue.Empty:
                break
        assert self.answerer.stdin is not None and self.answerer.stdout is not None
        # A person answers at any moment, not in step with the kernel's looks at a SQLite store: a pause drawn
        # at random within one look's period (rounds of the same length would otherwise answer in one phase).
        time.sleep(random.uniform(0, EVERY))
        self.answerer.stdin.write(f"{run_id} {question}\n")
        self.answerer.stdin.flush()
        deadline = time.monotonic() + 60
        while True:
            if time.monotonic() > deadline:
                raise RuntimeError(f"{self.store}: the kernel did not redraw run {run_id} within a minute")
            try:
                message = self.client.get_iopub_msg(timeout=1)
            except queue.Empty:
                continue
            if message["msg_type"] == "update_display_data":
                text = str(message["content"]["data"].get("text/plain", ""))
                if "approve" in text:
                    redrawn = time.monotonic()
                    break
        reply, end = (float(clock) for clock in self.answerer.stdout.readline().split())
        return redrawn - reply, redrawn - end

    def close(self) -> None:
        if self.answerer.stdin is not None:
            self.answerer.stdin.close()
        self.answerer.wait(timeout=60)
        self.client.stop_channels()
        self.manager.shutdown_kernel(now=True)


def _p90(values: list[float]) -> float:
    return statistics.quantiles(values, n=10, method="inclusive")[-1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=15, help="rounds, each store answered once in each")
    parser.add_argument("--no-write", action="store_true", help="print the section only")
    args = parser.parse_args()
    server = PostgresServer(fsync=True)
    parent = Path(tempfile.mkdtemp(prefix="mkl-wake-"))
    stores = {
        "SQLite (the kernel looks every 0.5 s)": str(parent / "runs.sqlite"),
        "PostgreSQL (the server tells: LISTEN/NOTIFY)": server.database(),
    }
    waiting: dict[str, Waiting] = {}
    times: dict[str, list[tuple[float, float]]] = {name: [] for name in stores}
    try:
        for i, (name, store) in enumerate(stores.items()):
            waiting[name] = Waiting(parent, f"s{i}", store)
        for name in stores:  # a round untimed: the first run and answer load what later ones reuse
            waiting[name].round("warm")
        for n in range(args.rounds):
            for name in stores:
                times[name].append(waiting[name].round(f"r{n}"))
    finally:
        for one in waiting.values():
            one.close()
        server.stop()
        shutil.rmtree(parent, ignore_errors=True)
    lines = [
        "## A waiting kernel redraws an answer given elsewhere (`python benchmarks/wake.py`)",
        "",
        "Until the waiting kernel's `update_display_data` carrying the answer is received on its iopub channel: "
        "from the commit of the answer by another process (through `get_run(…).submit`), and from the commit "
        "that ends the advance the answer set going (the refund's scripted model steps, in that process). "
        f"{args.rounds} rounds, the stores in turn, each answer at a random moment; load average when run: "
        f"{os.getloadavg()[0]:.1f}.",
        "",
        "| store | from the answer: median | p90 | from the advance's end: median | p90 | slowest |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for name, taken in times.items():
        answer, end = [first for first, _ in taken], [last for _, last in taken]
        cells = [statistics.median(answer), _p90(answer), statistics.median(end), _p90(end), max(end)]
        lines.append(f"| {name} | " + " | ".join(f"{value * 1000:.0f} ms" for value in cells) + " |")
    sqlite, server_told = (statistics.median(first for first, _ in taken) for taken in times.values())
    lines += [
        "",
        f"From the answer, PostgreSQL's median is {sqlite / server_told:.1f}× shorter than SQLite's in this run. "
        "On SQLite the kernel's watch finds the change at its next look (every 0.5 s: a quarter of a second on "
        "average), which may fall within the answered advance (the cell then shows the answer before the run's "
        "next step, and a time from the advance's end comes out negative); on PostgreSQL the commit that ends "
        "the advance carries a NOTIFY with the run's id, which wakes the watch's own connection at once, and "
        "only that run is read again: the time from the answer is the advance's own, plus a few milliseconds.",
    ]
    text = "\n".join(lines)
    print(text)
    if not args.no_write:
        sections.write_section("wake", text)


if __name__ == "__main__":
    main()
