#!/usr/bin/env python
"""mkl_notebook's SQLite journal beside LangGraph + SqliteSaver and DBOS on SQLite, per step and per resume.

    python3 -m venv /work/peers-venv
    /work/peers-venv/bin/pip install -e . -r benchmarks/requirements-peers.txt
    /work/peers-venv/bin/python benchmarks/peers.py [--quick] [--rounds 11] [--no-write]

The peers are extras of this benchmark, never of the package (``benchmarks/requirements-peers.txt``);
a peer that is not installed is named as missing and left out of the table.

*Per step*: a linear workflow of ``--steps`` steps, each a call of the same trivial deterministic
"model" (a function of the step and the previous answer), every step's result durable before the next
one starts, one store file per engine kept open across the runs (a new run / thread / workflow id
each run), as a long-lived host keeps it:

- mkl_notebook: ``linear(N)`` (N generative states, one after another) run by ``runs.start`` into a
  ``SQLiteStore`` (WAL, ``synchronous=NORMAL``; each answer committed before it is used), the
  scripted oracle answering; *bare* is the same engine with no journal.
- LangGraph: a ``StateGraph`` of N nodes in a line, each node one model call, compiled with a
  ``SqliteSaver`` on one file; ``durability="sync"`` (each step's checkpoint is written before the next
  step, the guarantee the others give; LangGraph's default, ``async``, is its own row); *bare* is the
  graph with no checkpointer.
- DBOS: one ``@DBOS.workflow`` calling an ``@DBOS.step`` N times, system database on SQLite
  (``sqlite:///FILE``); each step's output is recorded before the workflow goes on. DBOS has no
  run-without-database mode, so it has no *bare* row.

*Per resume*: the same workflow stopped after N-1 steps, waiting for a person, then given the reply
``approve`` and run to its end (the reply recorded, the N-1 earlier steps restored, the last step made).
Before the timed rounds, one stopped run per round is made in each engine's store; each round resumes
another one:

- mkl_notebook: the state before the last has an escalate gate with an ``ask:`` (``hitl="asking"``, as
  in a notebook); the run suspends there. Resume is ``runs.resume_journal(..., reply="approve",
  question=ID, known={NAME: machine})``: the reply journaled, the journal replayed (N-1 answers, no calls),
  the last state run, in the machine the host holds (as the workspace passes the machines it loaded, and as
  LangGraph's host holds its compiled graph), its pinned source not parsed again.
- LangGraph: the last node starts with ``interrupt(...)``; resume is ``graph.invoke(Command(resume=
  "approve"), thread)``: the thread's latest checkpoint is loaded, the last node run again from its
  start (``interrupt`` returns the reply) and the model called.
- DBOS: after N-1 steps the workflow calls ``DBOS.recv("approval")``. A workflow waits in a live thread,
  which a process that stops loses, so each is cancelled while it waits (its N-1 step outputs stay in
  the system database): the closest to a run suspended on disk. Resume is ``DBOS.send(ID, "approve",
  "approval")`` then ``DBOS.resume_workflow(ID)`` and waiting for its result: the workflow function runs
  again from its start, the N-1 recorded step outputs are read back instead of being called, ``recv``
  takes the message and the last step is made. Its wall time includes the wait until DBOS's queue thread
  dispatches the resumed workflow (DBOS's own); the result is polled every 5 ms. A second DBOS row sends the
  reply to a workflow still waiting in ``recv`` in its thread (what DBOS does while its process lives):
  nothing is restored there, so it is not a resume from disk, and is shown beside it.

Both CPU time (``time.process_time``: every thread of this process) and wall time are reported, per
step (a whole run over N) and per resume; every engine runs once per round, in turn, the order
reversed each round, so all see the same load; ratios are the medians of the ratios within a round.
Writes the ``<!-- peers:start -->`` section of benchmarks/RESULTS.md.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import gc
import importlib.metadata
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(HERE))

import sections  # noqa: E402  (benchmarks/sections.py, beside this file)
from run import linear, machine_description  # noqa: E402  (benchmarks/run.py, beside this file)

ASK = "Approve the last step?"
# How long a DBOS workflow waits for the reply before its thread gives up; the wait is durable, so a resumed
# workflow whose message was sent before finds it however late it is resumed.
RECV_TIMEOUT = 10.0
PEERS = {"LangGraph": ("langgraph", "langgraph-checkpoint-sqlite"), "DBOS": ("dbos",)}


def model(step: int, previous: str) -> str:
    """The trivial deterministic "model" every engine calls once per step."""
    return f"answer {step} after {previous[:24]}"


@dataclass(frozen=True)
class Sample:
    cpu: float
    wall: float


Action = Callable[[], Any]


@dataclass
class Engine:
    """One column of the table: a run to time (``step``) and, when it has one, a resume (``resume``)."""

    name: str
    step: Action | None = None
    resume: Action | None = None
    versions: list[str] = field(default_factory=list)


def timed(action: Action) -> Sample:
    cpu, wall = time.process_time(), time.perf_counter()
    action()
    return Sample(time.process_time() - cpu, time.perf_counter() - wall)


def interleaved(actions: dict[str, Action], rounds: int) -> dict[str, list[Sample]]:
    """Each action once per round after one warm-up run of each, the order reversed every round."""
    for action in actions.values():
        action()
    samples: dict[str, list[Sample]] = {name: [] for name in actions}
    order = list(actions.items())
    for _ in range(rounds):
        for name, action in order:
            gc.collect()  # the garbage of the engine before is not this one's to collect
            samples[name].append(timed(action))
        order.reverse()
    return samples


# -- mkl_notebook ------------------------------------------------------------------------------------


def gated(n: int) -> dict[str, Any]:
    """``linear(n)`` whose state before the last asks a person before the last one runs."""
    document = linear(n)
    document["machine"] = f"gated{n}"
    document["states"][f"s{n - 2}"]["gates"] = [
        {"when": "the last step needs a sign-off", "escalate": True, "to": f"s{n - 1}", "ask": ASK},
        {"when": "otherwise", "then": "ok", "to": f"s{n - 1}"},
    ]
    return document


class Ours:
    """mkl_notebook: one SQLiteStore kept open across the runs, the scripted oracle answering."""

    def __init__(self, steps: int, folder: Path) -> None:
        from mkl_notebook.durable.stores import SQLiteStore
        from mkl_notebook.engine.options import RunOptions
        from mkl_notebook.lang.loader import machine_from_mapping

        self.linear = machine_from_mapping(linear(steps), strict=False)
        self.gated = machine_from_mapping(gated(steps), strict=False)
        self.store = SQLiteStore(folder / "mkl.sqlite")
        self.options = RunOptions()
        self.asking = RunOptions(hitl="asking", suspendable=True)
        self.steps = steps
        self.counter = iter(range(10**9))
        self.waiting: list[tuple[str, str]] = []

    def oracle(self, judge: bool = False) -> Any:
        from mkl_notebook.providers.scripted import oracle_from_script

        return oracle_from_script({"llm": {"produce": [], **({"judge": [0]} if judge else {})}})

    def run(self) -> None:
        from mkl_notebook.durable import runs

        outcome = runs.start(
            self.linear, self.oracle(), store=self.store, run_id=f"run-{next(self.counter)}", options=self.options
        )
        assert outcome.status == "done", outcome.status

    def bare(self) -> None:
        from mkl_notebook.engine.runner import run_machine

        assert run_machine(self.linear, self.oracle(), options=self.options).status == "done"

    def suspend(self, count: int) -> None:
        from mkl_notebook.durable import runs

        for _ in range(count):
            run_id = f"wait-{next(self.counter)}"
            outcome = runs.start(
                self.gated, self.oracle(judge=True), store=self.store, run_id=run_id, options=self.asking
            )
            question = outcome.result.question_id(run_id)
            assert outcome.status == "suspended" and question, outcome.status
            assert len(outcome.result.trace) == self.steps - 1, len(outcome.result.trace)
            self.waiting.append((run_id, question))

    def resume(self) -> None:
        from mkl_notebook.durable import runs

        run_id, question = self.waiting.pop()
        outcome = runs.resume_journal(
            self.store,
            run_id,
            self.oracle(judge=True),
            reply="approve",
            has_reply=True,
            question=question,
            known={self.gated.name: self.gated},  # the machine this host holds (LangGraph's holds its graph)
        )
        assert outcome.status == "done", outcome.status
        assert outcome.calls["made"] == 1, outcome.calls


# -- LangGraph ---------------------------------------------------------------------------------------


class LangGraph:
    """A StateGraph of N nodes in a line over a SqliteSaver on one file (and, for the bare row, none)."""

    def __init__(self, steps: int, folder: Path) -> None:
        from langgraph.checkpoint.sqlite import SqliteSaver

        self.steps = steps
        self.connection = sqlite3.connect(folder / "langgraph.sqlite", check_same_thread=False)
        self.saver = SqliteSaver(self.connection)
        self.saver.setup()
        self.graph = self._graph(gate=False).compile(checkpointer=self.saver)
        self.bare_graph = self._graph(gate=False).compile()
        self.gated = self._graph(gate=True).compile(checkpointer=self.saver)
        self.counter = iter(range(10**9))
        self.waiting: list[str] = []

    def _graph(self, gate: bool) -> Any:
        from langgraph.graph import END as LG_END
        from langgraph.graph import START as LG_START
        from langgraph.graph import StateGraph
        from langgraph.types import interrupt
        from typing_extensions import TypedDict

        class State(TypedDict):
            last: str

        def node(step: int) -> Callable[[State], dict[str, str]]:
            def call(state: State) -> dict[str, str]:
                if gate and step == self.steps - 1:
                    assert interrupt(ASK) == "approve"
                return {"last": model(step, state["last"])}

            return call

        builder = StateGraph(State)
        for step in range(self.steps):
            builder.add_node(f"s{step}", node(step))
            builder.add_edge(f"s{step - 1}" if step else LG_START, f"s{step}")
        builder.add_edge(f"s{self.steps - 1}", LG_END)
        return builder

    def _config(self, thread: str) -> dict[str, Any]:
        return {"configurable": {"thread_id": thread}, "recursion_limit": self.steps + 10}

    def run(self, durability: str = "sync") -> None:
        config = self._config(f"run-{next(self.counter)}")
        out = self.graph.invoke({"last": "the start"}, config, durability=durability)
        assert out["last"].startswith(f"answer {self.steps - 1} "), out

    def run_async(self) -> None:
        self.run("async")

    def bare(self) -> None:
        out = self.bare_graph.invoke({"last": "the start"}, self._config("bare"))
        assert out["last"].startswith(f"answer {self.steps - 1} "), out

    def suspend(self, count: int) -> None:
        for _ in range(count):
            thread = f"wait-{next(self.counter)}"
            out = self.gated.invoke({"last": "the start"}, self._config(thread), durability="sync")
            assert "__interrupt__" in out and out["last"].startswith(f"answer {self.steps - 2} "), out
            self.waiting.append(thread)

    def resume(self) -> None:
        from langgraph.types import Command

        config = self._config(self.waiting.pop())
        out = self.gated.invoke(Command(resume="approve"), config, durability="sync")
        assert out["last"].startswith(f"answer {self.steps - 1} "), out


# -- DBOS --------------------------------------------------------------------------------------------


class Dbos:
    """One DBOS workflow of N steps, its system database on SQLite."""

    def __init__(self, steps: int, folder: Path) -> None:
        from dbos import DBOS

        self.steps = steps
        # Logging at CRITICAL: each cancelled wait's thread logs an error with a traceback as it ends, which is
        # expected here (the setup then checks that no reply was recorded); what goes wrong otherwise raises.
        url = f"sqlite:///{folder / 'dbos.sqlite'}"
        DBOS(config={"name": "mkl-peers", "system_database_url": url, "log_level": "CRITICAL"})

        @DBOS.step()
        def call(step: int, previous: str) -> str:
            return model(step, previous)

        @DBOS.workflow()
        def line(n: int) -> str:
            last = "the start"
            for step in range(n):
                last = call(step, last)
            return last

        @DBOS.workflow()
        def waiting(n: int) -> str:
            last = "the start"
            for step in range(n - 1):
                last = call(step, last)
            assert DBOS.recv("approval", timeout_seconds=RECV_TIMEOUT) == "approve"
            return call(n - 1, last)

        @DBOS.workflow()
        def live(n: int) -> str:
            last = "the start"
            for step in range(n - 1):
                last = call(step, last)
            assert DBOS.recv("approval", timeout_seconds=3600) == "approve"
            return call(n - 1, last)

        self.line, self.waiting_workflow, self.live_workflow = line, waiting, live
        self.live: list[tuple[str, Any]] = []
        DBOS.launch()
        self.counter = iter(range(10**9))
        self.waiting: list[str] = []

    def run(self) -> None:
        from dbos import SetWorkflowID

        with SetWorkflowID(f"run-{next(self.counter)}"):
            assert self.line(self.steps).startswith(f"answer {self.steps - 1} ")

    def suspend(self, count: int) -> None:
        from dbos import DBOS, SetWorkflowID

        handles = []
        for _ in range(count):
            workflow = f"wait-{next(self.counter)}"
            with SetWorkflowID(workflow):
                handles.append(DBOS.start_workflow(self.waiting_workflow, self.steps))
            deadline = time.monotonic() + 120
            while not any(step["function_name"] == "DBOS.sleep" for step in DBOS.list_workflow_steps(workflow)):
                assert time.monotonic() < deadline, "a DBOS workflow never reached its wait"
                time.sleep(0.01)
            DBOS.cancel_workflow(workflow)  # while it waits: its wait ends with no reply recorded
            self.waiting.append(workflow)
        for handle in handles:
            # Its thread gives up waiting after RECV_TIMEOUT and finds itself cancelled: none is left running.
            with contextlib.suppress(Exception):
                handle.get_result()
        for workflow in self.waiting:
            names = [step["function_name"] for step in DBOS.list_workflow_steps(workflow)]
            assert DBOS.get_workflow_status(workflow).status == "CANCELLED" and "DBOS.recv" not in names, names

    def resume(self) -> None:
        from dbos import DBOS

        workflow = self.waiting.pop()
        DBOS.send(workflow, "approve", "approval")
        result = DBOS.resume_workflow(workflow).get_result(polling_interval_sec=0.005)
        assert result.startswith(f"answer {self.steps - 1} "), result

    def suspend_live(self, count: int) -> None:
        """``count`` workflows left waiting in ``recv`` in their threads (what a process that stops loses)."""
        from dbos import DBOS, SetWorkflowID

        for _ in range(count):
            workflow = f"live-{next(self.counter)}"
            with SetWorkflowID(workflow):
                self.live.append((workflow, DBOS.start_workflow(self.live_workflow, self.steps)))
        deadline = time.monotonic() + 120
        for workflow, _handle in self.live:
            while not any(step["function_name"] == "DBOS.sleep" for step in DBOS.list_workflow_steps(workflow)):
                assert time.monotonic() < deadline, "a DBOS workflow never reached its wait"
                time.sleep(0.01)

    def resume_live(self) -> None:
        from dbos import DBOS

        workflow, handle = self.live.pop()
        DBOS.send(workflow, "approve", "approval")
        result = handle.get_result()
        assert result.startswith(f"answer {self.steps - 1} "), result

    @staticmethod
    def close() -> None:
        from dbos import DBOS

        DBOS.destroy()


# -- the run -----------------------------------------------------------------------------------------


def missing(peer: str) -> str | None:
    """Why ``peer`` cannot run here, or None when every package it needs is installed."""
    absent = []
    for package in PEERS[peer]:
        try:
            importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            absent.append(package)
    if not absent:
        return None
    return (
        f"{peer} is not installed here (missing: {', '.join(absent)}); it is left out. Install the peers with "
        "`pip install -r benchmarks/requirements-peers.txt` (in a venv of their own, see this script's docstring)."
    )


def version_line(packages: tuple[str, ...]) -> str:
    return ", ".join(f"{name} {importlib.metadata.version(name)}" for name in packages)


@contextlib.contextmanager
def engines(steps: int, folder: Path) -> Iterator[tuple[dict[str, Any], list[str]]]:
    """The engines installed here, by name, and a note for each peer that is not."""
    notes: list[str] = []
    made: dict[str, Any] = {"mkl_notebook": Ours(steps, folder)}
    for peer, kind in (("LangGraph", LangGraph), ("DBOS", Dbos)):
        why = missing(peer)
        if why:
            print(why, file=sys.stderr)
            notes.append(why)
        else:
            made[peer] = kind(steps, folder)
    try:
        yield made, notes
    finally:
        if "DBOS" in made:
            Dbos.close()


def median(samples: list[Sample], kind: str) -> float:
    return statistics.median(getattr(each, kind) for each in samples)


def round_ratio(ours: list[Sample], theirs: list[Sample], kind: str) -> float:
    """The median over rounds of ``theirs`` ÷ ``ours`` (how many times mkl_notebook's cost each peer's is)."""
    return statistics.median(getattr(b, kind) / getattr(a, kind) for a, b in zip(ours, theirs, strict=True))


def uptime() -> str:
    try:
        return subprocess.run(["uptime"], capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "uptime unavailable"


def fmt_us(seconds: float) -> str:
    micro = seconds * 1e6
    return f"{micro:,.0f} µs" if micro >= 100 else f"{micro:.1f} µs"


def fmt_ratio(value: float) -> str:
    return f"{value:.2f}×" if value < 10 else f"{value:.1f}×"


def table(title: str, samples: dict[str, list[Sample]], base: str, per: int, rows: list[tuple[str, str]]) -> list[str]:
    lines = [
        title,
        "",
        "| engine | CPU | wall | CPU ÷ mkl_notebook | wall ÷ mkl_notebook |",
        "|---|---|---|---|---|",
    ]
    for name, label in rows:
        if name not in samples:
            continue
        cpu, wall = median(samples[name], "cpu") / per, median(samples[name], "wall") / per
        if name == base:
            ratios = "1.00× | 1.00×"
        else:
            ratios = " | ".join(fmt_ratio(round_ratio(samples[base], samples[name], kind)) for kind in ("cpu", "wall"))
        lines.append(f"| {label} | {fmt_us(cpu)} | {fmt_us(wall)} | {ratios} |")
    return lines


def added(samples: dict[str, list[Sample]], steps: int) -> list[str]:
    """A sentence on what durability adds per step (CPU) where an engine has a bare run: durable minus bare."""
    ours = ("mkl_notebook", "mkl_notebook bare")
    if any(name not in samples for name in (*ours, "LangGraph", "LangGraph bare")):
        return []

    def per_step(name: str, bare: str) -> float:
        return (median(samples[name], "cpu") - median(samples[bare], "cpu")) / steps

    rounds = zip(*(samples[name] for name in (*ours, "LangGraph", "LangGraph bare")), strict=True)
    quotient = statistics.median((c.cpu - d.cpu) / (a.cpu - b.cpu) for a, b, c, d in rounds if a.cpu > b.cpu)
    return [
        "What durability adds per step (CPU, the durable run less the bare one): mkl_notebook's journal "
        f"{fmt_us(per_step(*ours))}, LangGraph's SqliteSaver (`sync`) {fmt_us(per_step('LangGraph', 'LangGraph bare'))}"
        f" ({fmt_ratio(quotient)} as much, the median within a round)."
    ]


def measure(steps: int, rounds: int) -> tuple[dict[str, list[Sample]], dict[str, list[Sample]], list[str], list[str]]:
    folder = Path(tempfile.mkdtemp(prefix="mkl-peers-"))
    with engines(steps, folder) as (made, notes):
        runs: dict[str, Action] = {}
        resumes: dict[str, Action] = {}
        for name, engine in made.items():
            runs[name] = engine.run
            if hasattr(engine, "bare"):
                runs[f"{name} bare"] = engine.bare
            if hasattr(engine, "run_async"):
                runs[f"{name} async"] = engine.run_async
            engine.suspend(rounds + 1)  # the warm-up round resumes one too
            resumes[name] = engine.resume
            if hasattr(engine, "resume_live"):
                engine.suspend_live(rounds + 1)
                resumes[f"{name} live"] = engine.resume_live
        print(f"per step: {steps} steps, {rounds} rounds", file=sys.stderr)
        step_samples = interleaved(runs, rounds)
        print("per resume", file=sys.stderr)
        resume_samples = interleaved(resumes, rounds)
        versions = [f"mkl_notebook {importlib.metadata.version('mkl-notebook')}"]
        versions += [version_line(PEERS[peer]) for peer in PEERS if peer in made]
    return step_samples, resume_samples, notes, versions


def report(steps: int, rounds: int) -> str:
    load_before = uptime()
    step_samples, resume_samples, notes, versions = measure(steps, rounds)
    load_after = uptime()
    today = datetime.date.today().isoformat()
    lines = [
        "## Peers: LangGraph + SqliteSaver and DBOS on SQLite (`python benchmarks/peers.py`)",
        "",
        f"Measured {today} on {machine_description()}; {', '.join(versions)}. Load (`uptime`) before: "
        f"`{load_before}`; after: `{load_after}`. Medians of {rounds} rounds, every engine once per round in "
        "turn (the order reversed each round); a ratio is the median of the ratios within a round, and says how "
        "many times mkl_notebook's cost the peer's is. *CPU* is `process_time` (every thread of the process), "
        "*wall* is elapsed time. What each engine does is in the script's docstring.",
        "",
    ]
    lines += [line for note in notes for line in (f"> {note}", "")]
    lines += table(
        f"**Per step**: a linear workflow of {steps} steps, each one call of a trivial deterministic model, each "
        "step's result durable before the next; a whole run's time over its steps.",
        step_samples,
        "mkl_notebook",
        steps,
        [
            ("mkl_notebook", "mkl_notebook, SQLite journal"),
            ("mkl_notebook bare", "mkl_notebook, no journal"),
            ("LangGraph", "LangGraph + SqliteSaver, `durability=sync`"),
            ("LangGraph async", "LangGraph + SqliteSaver, `durability=async` (its default)"),
            ("LangGraph bare", "LangGraph, no checkpointer"),
            ("DBOS", "DBOS, SQLite system database"),
        ],
    )
    lines += ["", *added(step_samples, steps), ""]
    lines += table(
        f"**Per resume**: the same workflow stopped after {steps - 1} steps waiting for a person, given `approve` "
        "and run to its end (the reply recorded, the earlier steps restored from the store, the last step made).",
        resume_samples,
        "mkl_notebook",
        1,
        [
            ("mkl_notebook", "mkl_notebook: `resume_journal(reply=…)`, the journal replayed"),
            ("LangGraph", "LangGraph: `invoke(Command(resume=…))` from the latest checkpoint"),
            ("DBOS", "DBOS: `send` + `resume_workflow` of the cancelled wait, recorded steps read back"),
            ("DBOS live", "DBOS: `send` to a workflow still waiting in `recv` in its thread (nothing restored)"),
        ],
    )
    return "\n".join(lines)


def write_section(text: str) -> None:
    sections.write_section("peers", text)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=11)
    parser.add_argument("--quick", action="store_true", help="20 steps, 3 rounds: a check that everything runs")
    parser.add_argument("--no-write", action="store_true", help="print the section, leave RESULTS.md as it is")
    args = parser.parse_args()
    steps, rounds = (20, 3) if args.quick else (args.steps, args.rounds)
    text = report(steps, rounds)
    print(text)
    if not args.no_write:
        write_section(text)


if __name__ == "__main__":
    main()
