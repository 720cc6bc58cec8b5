#!/usr/bin/env python
"""What trace export costs a run, in CPU per step: export off against today's code (before issue 54), and on.

    .venv/bin/python benchmarks/telemetry.py              # writes its section of benchmarks/RESULTS.md
    .venv/bin/python benchmarks/telemetry.py --no-write   # prints it only

Each measurement is a child process that starts ``--runs`` runs of a chain of ``--states`` generative states
(scripted answers, a SQLite store in a temporary folder) through the Workspace, as ``mkl run`` does, after one
run to warm up; its CPU time (``time.process_time``: every thread of the child, the exporter's included, until
the workspace is closed and what it queued is sent) divided by the steps. Three peers, in turn in each round:

- *today*: the package as it was before issue 54 (``git archive`` of ``--base``, default the branch's parent
  on main), no export;
- *off*: this package, no endpoint configured (no OpenTelemetry imported);
- *on*: this package, ``OTEL_EXPORTER_OTLP_ENDPOINT`` naming a receiver in this process (an ``http.server``
  thread that answers 200 to every POST), every span sent.

Medians over the rounds, and the median of each peer's ratio to *today* in the same round (a busy spell of the
shared machine then weighs on both sides of a ratio).
"""

from __future__ import annotations

import argparse
import datetime
import http.server
import json
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
import threading
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import sections  # noqa: E402  (benchmarks/sections.py, beside this file)

CHILD = r"""
import json, sys, tempfile, time
from pathlib import Path
from mkl_notebook.app.settings import Settings
from mkl_notebook.app.workspace import Workspace

states, runs = int(sys.argv[1]), int(sys.argv[2])
folder = Path(tempfile.mkdtemp())
lines = [f'machine: chain\nmklang: "0.4"\nentry: s0\nbudget: {states + 5}\nstates:']
for index in range(states):
    to = f"s{index + 1}" if index + 1 < states else "END"
    gate = f"{{when: otherwise, then: ok, to: {to}}}"
    lines.append(f"  s{index}: {{structure: s, prompt: p{index}, output: o, gates: [{gate}]}}")
(folder / "chain.mkl").write_text("\n".join(lines) + "\n", encoding="utf-8")
script = folder / "chain.script.json"
script.write_text(json.dumps({"llm": {"produce": {"p": "An answer of a sentence or two."}, "tokens": [50, 20]}}))
ws = Workspace(Settings.from_flags(store=str(folder / "runs.sqlite")), follow_files=True)
machine = ws.shelf.load(folder / "chain.mkl")
ws.start(machine.name, id="warm", script=str(script))
began = time.process_time()
for index in range(runs):
    assert ws.start(machine.name, id=f"r{index}", script=str(script)).status == "done"
ws.close()
spent = time.process_time() - began
print(json.dumps({"cpu_per_step": spent / (runs * states), "otel": "opentelemetry" in sys.modules}))
"""


class _Sink(http.server.BaseHTTPRequestHandler):
    """A receiver that takes every body and answers 200, costing the child nothing but the send."""

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", "0")))
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        return None


def base_package(commit: str, folder: Path) -> Path:
    """The package as ``commit`` has it, unpacked in ``folder`` (what PYTHONPATH names for *today*)."""
    archive = folder / "base.tar"
    subprocess.run(["git", "-C", str(ROOT), "archive", "-o", str(archive), commit, "mkl_notebook"], check=True)
    with tarfile.open(archive) as tar:
        tar.extractall(folder / "base", filter="data")
    return folder / "base"


def measure(path: Path, env: dict[str, str], args: argparse.Namespace) -> dict[str, Any]:
    clean = {key: value for key, value in os.environ.items() if not key.startswith("OTEL_")}
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(args.states), str(args.runs)],
        env={**clean, **env, "PYTHONPATH": str(path)},
        capture_output=True,
        text=True,
        check=True,
        cwd=tempfile.gettempdir(),
    )
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def section(results: dict[str, list[float]], args: argparse.Namespace, base: str) -> str:
    when = datetime.datetime.now().strftime("%Y-%m-%d %H:%M")
    load = ", ".join(f"{value:.2f}" for value in os.getloadavg())
    lines = [
        "## Trace export per step (`python benchmarks/telemetry.py`)",
        "",
        f"{when}; load average (1, 5, 15 min) {load} on {os.cpu_count()} cores. Per measurement a child process "
        f"starts {args.runs} runs of a chain of {args.states} scripted generative states through the Workspace "
        f"(SQLite store), after one to warm up; CPU time of the whole child (every thread) until the workspace is "
        f"closed, per step. The peers in turn in each of {args.rounds} rounds, each first in a third of them; "
        "medians. *today* is the package at "
        f"`{base[:10]}` (before issue 54).",
        "",
        "| peer | export | median CPU per step | median of its ÷ today in each round | range of those |",
        "|---|---|---|---|---|",
    ]
    said = {"today": "none (the code before issue 54)", "off": "off (no endpoint)", "on": "on, every span sent"}
    for name in ("today", "off", "on"):
        median = statistics.median(results[name])
        ratios = sorted(mine / today for mine, today in zip(results[name], results["today"], strict=True))
        spread = f"{ratios[0]:.2f}-{ratios[-1]:.2f}×"
        lines.append(
            f"| {name} | {said[name]} | {median * 1e6:,.0f} µs | {statistics.median(ratios):.2f}× | {spread} |"
        )
    lines += [
        "",
        "Off, a run pays one look at the environment per oracle made and one attribute read per advance: the "
        "ratio is today's within the machine's noise (a run that always measured *today* first read 1.04-1.15x: "
        "the order, not the code, hence the turns). On, each call is timed, each advance's spans are built and "
        "handed to the SDK's batch processor, whose thread encodes them in protobuf and posts them: a few tenths "
        "of a millisecond per step, against the seconds a real model call takes.",
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=7, help="rounds, the peers in turn in each")
    parser.add_argument("--runs", type=int, default=100, help="runs per measurement")
    parser.add_argument("--states", type=int, default=10, help="states of the chain each run goes through")
    parser.add_argument("--base", default="3f2b6f0", help="the commit whose package is *today*")
    parser.add_argument("--no-write", action="store_true", help="print the section only")
    args = parser.parse_args()
    base = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", args.base], capture_output=True, text=True, check=True
    ).stdout.strip()
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Sink)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    endpoint = f"http://127.0.0.1:{server.server_address[1]}"
    results: dict[str, list[float]] = {"today": [], "off": [], "on": []}
    with tempfile.TemporaryDirectory() as folder:
        old = base_package(base, Path(folder))
        peers = {"today": (old, {}), "off": (ROOT, {}), "on": (ROOT, {"OTEL_EXPORTER_OTLP_ENDPOINT": endpoint})}
        names = list(peers)
        for round_ in range(args.rounds):
            for name in names[round_ % 3 :] + names[: round_ % 3]:  # (each peer first in a third of the rounds)
                path, env = peers[name]
                measured = measure(path, env, args)
                assert measured["otel"] == (name == "on"), (name, measured)  # (off imports no OpenTelemetry)
                results[name].append(measured["cpu_per_step"])
    server.shutdown()
    text = section(results, args, base)
    print(text)
    if not args.no_write:
        sections.write_section("telemetry", text)


if __name__ == "__main__":
    main()
