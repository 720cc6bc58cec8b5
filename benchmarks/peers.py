#!/usr/bin/env python
"""mkl_notebook's SQLite journal beside LangGraph + SqliteSaver and DBOS on SQLite, per step and per resume;
with ``--postgres``, its PostgreSQL store beside LangGraph + PostgresSaver and DBOS on the same PostgreSQL server.

    python3 -m venv /work/peers-venv
    /work/peers-venv/bin/pip install -e . -r benchmarks/requirements-peers.txt
    /work/peers-venv/bin/python benchmarks/peers.py [--quick] [--rounds 11] [--no-write] [--postgres]

(The script imports the mkl_notebook of the checkout it is in, whatever the venv has installed.)

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

``--postgres``: the same workflows and the same timings, every engine on one PostgreSQL server started for the
run (tests/postgres_server.py: ``initdb`` in a temporary folder, a Unix socket, ``fsync=on``; PostgreSQL and
``psycopg``/``psycopg-pool`` needed), a database of its own per engine, kept open across the runs:

- mkl_notebook: ``open_store("postgresql://…")`` (its ``PostgresStore``), ``durability="process"`` (the
  default: model answers committed with ``synchronous_commit=off``, a person's answer with ``on``) and, as a
  second row, ``durability="power"`` (every commit with ``synchronous_commit=on``), the like-for-like row for
  the peers, which leave the server's default (``on``): every commit of theirs synced.
- LangGraph: a ``PostgresSaver`` on one autocommit connection (as ``PostgresSaver.from_conn_string`` opens it).
- DBOS: ``system_database_url`` the engine's database (DBOS makes its ``dbos`` schema there).

The server's CPU is its own processes' and not in ``process_time``: it is read from ``/proc`` (the postmaster
and its children, in clock ticks) around each timed action and shown as a column of its own, a mean over
the rounds (ticks of 10 ms are too coarse for a median of a resume). Writes the ``<!-- peers_postgres:start -->``
section of benchmarks/RESULTS.md.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import gc
import importlib.metadata
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(HERE))
sys.path.append(str(ROOT / "tests"))  # tests/postgres_server.py starts the PostgreSQL server

import sections  # noqa: E402  (benchmarks/sections.py, beside this file)
from peer_engines import Dbos, LangGraph, Ours  # noqa: E402  (benchmarks/peer_engines.py, beside this file)
from run import machine_description  # noqa: E402  (benchmarks/run.py, beside this file)

# The packages each peer needs, per kind of store (mkl_notebook's PostgreSQL store needs OURS_ON_POSTGRES).
PEERS = {
    "sqlite": {"LangGraph": ("langgraph", "langgraph-checkpoint-sqlite"), "DBOS": ("dbos",)},
    "postgres": {"LangGraph": ("langgraph", "langgraph-checkpoint-postgres"), "DBOS": ("dbos",)},
}
OURS_ON_POSTGRES = ("psycopg", "psycopg-pool")
BARE = ("mkl_notebook", "LangGraph")  # the engines that also run with no store (the *bare* rows)


@dataclass(frozen=True)
class Sample:
    cpu: float
    wall: float
    server: float = 0.0  # the PostgreSQL server's CPU seconds meanwhile (0 on SQLite)


Action = Callable[[], Any]


def timed(action: Action, server_cpu: Callable[[], float]) -> Sample:
    before = server_cpu()
    cpu, wall = time.process_time(), time.perf_counter()
    action()
    sample_cpu, sample_wall = time.process_time() - cpu, time.perf_counter() - wall
    return Sample(sample_cpu, sample_wall, server_cpu() - before)


def interleaved(actions: dict[str, Action], rounds: int, server_cpu: Callable[[], float]) -> dict[str, list[Sample]]:
    """Each action once per round after one warm-up run of each, the order reversed every round."""
    for action in actions.values():
        action()
    samples: dict[str, list[Sample]] = {name: [] for name in actions}
    order = list(actions.items())
    for _ in range(rounds):
        for name, action in order:
            gc.collect()  # the garbage of the engine before is not this one's to collect
            samples[name].append(timed(action, server_cpu))
        order.reverse()
    return samples


def no_server() -> float:
    return 0.0


# -- the engines, on SQLite or on one PostgreSQL server ---------------------------------------------


def missing(peer: str, packages: tuple[str, ...]) -> str | None:
    """Why ``peer`` cannot run here, or None when every package it needs is installed."""
    absent = []
    for package in packages:
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


def postmaster_cpu(data: Path) -> Callable[[], float]:
    """A function giving the CPU seconds used so far by the server whose data folder is ``data``: its postmaster
    and every process it started (those that ended are in the postmaster's children's times), from ``/proc``."""
    postmaster = int((data / "postmaster.pid").read_text().split()[0])
    tick = os.sysconf("SC_CLK_TCK")

    def used() -> float:
        total = 0
        for stat in Path("/proc").glob("[0-9]*/stat"):
            try:
                fields = stat.read_text().rsplit(")", 1)[1].split()  # after the command's name: state, ppid, ...
            except OSError:
                continue  # it ended meanwhile: its time is in its parent's children's times
            pid, ppid = int(stat.parent.name), int(fields[1])
            if pid == postmaster:
                total += sum(int(value) for value in fields[11:15])  # utime, stime, cutime, cstime
            elif ppid == postmaster:
                total += int(fields[11]) + int(fields[12])
        return total / tick

    return used


@contextlib.contextmanager
def server() -> Iterator[tuple[Any, Callable[[], float]]]:
    """A throwaway PostgreSQL server (tests/postgres_server.py: its own ``initdb`` folder, a Unix socket, ``fsync=on``
    as a real server runs) and what reads its CPU time; stopped and removed at the end."""
    from postgres_server import PostgresServer

    started = PostgresServer(fsync=True)
    try:
        yield started, postmaster_cpu(started.data)
    finally:
        started.stop()


@contextlib.contextmanager
def engines(kind: str, steps: int) -> Iterator[tuple[dict[str, Any], list[str], Callable[[], float]]]:
    """The engines installed here on ``kind``'s stores (``sqlite``: a file each; ``postgres``: a database each on
    one server), by name; a note for each peer that is not installed; what reads the server's CPU time."""
    with contextlib.ExitStack() as stack:
        if kind == "postgres":
            why = missing("mkl_notebook's PostgreSQL store", OURS_ON_POSTGRES)
            if why:
                raise SystemExit(why)
            pg, server_cpu = stack.enter_context(server())
            ours = [Ours(steps, pg.database()), Ours(steps, pg.database(), durability="power")]
            where: dict[str, Callable[[], str]] = {"LangGraph": pg.database, "DBOS": pg.database}
        else:
            folder = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="mkl-peers-")))
            server_cpu = no_server
            ours = [Ours(steps, str(folder / "mkl.sqlite"))]
            where = {
                "LangGraph": lambda: str(folder / "langgraph.sqlite"),
                "DBOS": lambda: f"sqlite:///{folder}/dbos.sqlite",
            }
        made: dict[str, Any] = dict(zip(("mkl_notebook", "mkl_notebook power"), ours, strict=False))
        notes: list[str] = []
        for peer, engine in (("LangGraph", LangGraph), ("DBOS", Dbos)):
            why = missing(peer, PEERS[kind][peer])
            if why:
                print(why, file=sys.stderr)
                notes.append(why)
            else:
                made[peer] = engine(steps, where[peer]())
        for each in made.values():
            stack.callback(each.close)
        yield made, notes, server_cpu


def median(samples: list[Sample], kind: str) -> float:
    return statistics.median(getattr(each, kind) for each in samples)


def mean_total(samples: list[Sample]) -> float:
    """The mean of this process's and the server's CPU together (the server's is read in 10 ms ticks: a mean)."""
    return statistics.mean(each.cpu + each.server for each in samples)


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


def table(
    title: str, samples: dict[str, list[Sample]], per: int, rows: list[tuple[str, str]], server: bool = False
) -> list[str]:
    """A table of the rows measured, each against ``mkl_notebook``'s; ``server``: with the server's CPU."""
    extra = ("server CPU | ", "---|", "(CPU + server) ÷ mkl_notebook | ", "---|") if server else ("",) * 4
    lines = [
        title,
        "",
        f"| engine | CPU | {extra[0]}wall | CPU ÷ mkl_notebook | {extra[2]}wall ÷ mkl_notebook |",
        f"|---|---|{extra[1]}---|---|{extra[3]}---|",
    ]
    base = samples["mkl_notebook"]
    for name, label in rows:
        if name not in samples:
            continue
        mine = samples[name]
        cpu, wall = median(mine, "cpu") / per, median(mine, "wall") / per
        ratios = [round_ratio(base, mine, kind) for kind in ("cpu", "wall")]
        cells = [fmt_us(cpu)]
        if server:
            cells.append(fmt_us(statistics.mean(each.server for each in mine) / per))
        cells += [fmt_us(wall), fmt_ratio(ratios[0])]
        if server:
            cells.append(fmt_ratio(mean_total(mine) / mean_total(base)))
        cells.append(fmt_ratio(ratios[1]))
        lines.append(f"| {label} | {' | '.join(cells)} |")
    return lines


def added(samples: dict[str, list[Sample]], steps: int, store: str, saver: str) -> list[str]:
    """A sentence on what durability adds per step (CPU) where an engine has a bare run: durable minus bare."""
    ours = ("mkl_notebook", "mkl_notebook bare")
    if any(name not in samples for name in (*ours, "LangGraph", "LangGraph bare")):
        return []

    def per_step(name: str, bare: str) -> float:
        return (median(samples[name], "cpu") - median(samples[bare], "cpu")) / steps

    rounds = zip(*(samples[name] for name in (*ours, "LangGraph", "LangGraph bare")), strict=True)
    quotient = statistics.median((c.cpu - d.cpu) / (a.cpu - b.cpu) for a, b, c, d in rounds if a.cpu > b.cpu)
    return [
        f"What durability adds per step (CPU of this process, the durable run less the bare one): mkl_notebook's "
        f"{store} {fmt_us(per_step(*ours))}, LangGraph's {saver} (`sync`) "
        f"{fmt_us(per_step('LangGraph', 'LangGraph bare'))} ({fmt_ratio(quotient)} as much, the median within a round)."
    ]


@dataclass
class Measured:
    steps: dict[str, list[Sample]]
    resumes: dict[str, list[Sample]]
    notes: list[str]
    versions: list[str]


def measure(kind: str, steps: int, rounds: int) -> Measured:
    with engines(kind, steps) as (made, notes, server_cpu):
        runs: dict[str, Action] = {}
        resumes: dict[str, Action] = {}
        for name, engine in made.items():
            runs[name] = engine.run
            if name in BARE:
                runs[f"{name} bare"] = engine.bare
            if hasattr(engine, "run_async"):
                runs[f"{name} async"] = engine.run_async
            engine.suspend(rounds + 1)  # the warm-up round resumes one too
            resumes[name] = engine.resume
            if hasattr(engine, "resume_live"):
                engine.suspend_live(rounds + 1)
                resumes[f"{name} live"] = engine.resume_live
        print(f"{kind}, per step: {steps} steps, {rounds} rounds", file=sys.stderr)
        step_samples = interleaved(runs, rounds, server_cpu)
        print(f"{kind}, per resume", file=sys.stderr)
        resume_samples = interleaved(resumes, rounds, server_cpu)
        versions = [f"mkl_notebook {importlib.metadata.version('mkl-notebook')}"]
        if kind == "postgres":
            versions.append(version_line(OURS_ON_POSTGRES))
        versions += [version_line(needs) for peer, needs in PEERS[kind].items() if peer in made]
        if kind == "postgres":
            versions.append(postgres_version())
    return Measured(step_samples, resume_samples, notes, versions)


def filesystem(folder: str) -> str:
    """The kind of file system ``folder`` is on (where a commit's sync goes), as ``df`` says."""
    try:
        out = subprocess.run(["df", "--output=fstype", folder], capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return "a file system of unknown kind"
    return out.split()[-1]


def postgres_version() -> str:
    from postgres_server import _binary

    postgres = _binary("postgres") or "postgres"
    try:
        out = subprocess.run([postgres, "--version"], capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return "PostgreSQL (version unknown)"
    return "PostgreSQL " + out.split()[2]  # "postgres (PostgreSQL) 15.18 (Debian …)"


def preamble(measured: Measured, rounds: int, load: tuple[str, str]) -> list[str]:
    today = datetime.date.today().isoformat()
    return [
        f"Measured {today} on {machine_description()}; {', '.join(measured.versions)}. Load (`uptime`) before: "
        f"`{load[0]}`; after: `{load[1]}`. Medians of {rounds} rounds, every engine once per round in "
        "turn (the order reversed each round); a ratio is the median of the ratios within a round, and says how "
        "many times mkl_notebook's cost the peer's is. *CPU* is `process_time` (every thread of the process), "
        "*wall* is elapsed time. What each engine does is in the script's docstring.",
        "",
        *[line for note in measured.notes for line in (f"> {note}", "")],
    ]


STEP_TITLE = (
    "**Per step**: a linear workflow of {steps} steps, each one call of a trivial deterministic model, each "
    "step's result durable before the next; a whole run's time over its steps."
)
RESUME_TITLE = (
    "**Per resume**: the same workflow stopped after {before} steps waiting for a person, given `approve` "
    "and run to its end (the reply recorded, the earlier steps restored from the store, the last step made)."
)


def report(steps: int, rounds: int) -> str:
    """The SQLite section: each engine's store a file of its own."""
    before = uptime()
    measured = measure("sqlite", steps, rounds)
    lines = [
        "## Peers: LangGraph + SqliteSaver and DBOS on SQLite (`python benchmarks/peers.py`)",
        "",
        *preamble(measured, rounds, (before, uptime())),
    ]
    lines += table(
        STEP_TITLE.format(steps=steps),
        measured.steps,
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
    lines += ["", *added(measured.steps, steps, "journal", "SqliteSaver"), ""]
    lines += table(
        RESUME_TITLE.format(before=steps - 1),
        measured.resumes,
        1,
        [
            ("mkl_notebook", "mkl_notebook: `resume_journal(reply=…)`, the journal replayed"),
            ("LangGraph", "LangGraph: `invoke(Command(resume=…))` from the latest checkpoint"),
            ("DBOS", "DBOS: `send` + `resume_workflow` of the cancelled wait, recorded steps read back"),
            ("DBOS live", "DBOS: `send` to a workflow still waiting in `recv` in its thread (nothing restored)"),
        ],
    )
    return "\n".join(lines)


def report_postgres(steps: int, rounds: int) -> str:
    """The PostgreSQL section: one server, a database per engine."""
    before = uptime()
    measured = measure("postgres", steps, rounds)
    lines = [
        "## Peers on PostgreSQL: LangGraph + PostgresSaver and DBOS beside mkl_notebook's PostgreSQL store "
        "(`python benchmarks/peers.py --postgres`)",
        "",
        *preamble(measured, rounds, (before, uptime())),
        "One PostgreSQL server started for the run on this machine (tests/postgres_server.py: its own `initdb`, a "
        f"Unix socket, its data on {filesystem(tempfile.gettempdir())}, `fsync=on` as a real server runs; everything "
        "else PostgreSQL's defaults, so "
        "`synchronous_commit=on`), a database per engine. Durability per engine: **mkl_notebook** "
        "`durability=process` (its default) commits each model answer with `synchronous_commit=off` (in the "
        "server once committed, so a killed client loses nothing; a crash of the server's machine may lose the "
        "last answers, which are made again) and a person's answer with `synchronous_commit=on`; "
        "`durability=power` commits every record with `synchronous_commit=on`. **LangGraph**'s PostgresSaver and "
        "**DBOS** set nothing, so every commit of theirs is synced (`synchronous_commit=on`): the like-for-like "
        "row for them is mkl_notebook `power`. *server CPU* is the server's processes' CPU meanwhile (from "
        "`/proc`, in 10 ms ticks: a mean over the rounds, not a median), not in *CPU*; *(CPU + server)* compares "
        "the means of both together.",
        "",
    ]
    lines += table(
        STEP_TITLE.format(steps=steps),
        measured.steps,
        steps,
        [
            ("mkl_notebook", "mkl_notebook, PostgreSQL store, `durability=process`"),
            ("mkl_notebook power", "mkl_notebook, PostgreSQL store, `durability=power` (every commit synced)"),
            ("mkl_notebook bare", "mkl_notebook, no journal"),
            ("LangGraph", "LangGraph + PostgresSaver, `durability=sync`"),
            ("LangGraph async", "LangGraph + PostgresSaver, `durability=async` (its default)"),
            ("LangGraph bare", "LangGraph, no checkpointer"),
            ("DBOS", "DBOS, PostgreSQL system database"),
        ],
        server=True,
    )
    lines += ["", *added(measured.steps, steps, "PostgreSQL store (`process`)", "PostgresSaver"), ""]
    lines += table(
        RESUME_TITLE.format(before=steps - 1),
        measured.resumes,
        1,
        [
            ("mkl_notebook", "mkl_notebook (`process`): `resume_journal(reply=…)`, the journal replayed"),
            ("mkl_notebook power", "mkl_notebook (`power`): the same"),
            ("LangGraph", "LangGraph: `invoke(Command(resume=…))` from the latest checkpoint"),
            ("DBOS", "DBOS: `send` + `resume_workflow` of the cancelled wait, recorded steps read back"),
            ("DBOS live", "DBOS: `send` to a workflow still waiting in `recv` in its thread (nothing restored)"),
        ],
        server=True,
    )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=11)
    parser.add_argument("--quick", action="store_true", help="20 steps, 3 rounds: a check that everything runs")
    parser.add_argument(
        "--postgres", action="store_true", help="on one PostgreSQL server started for the run, instead of SQLite"
    )
    parser.add_argument("--no-write", action="store_true", help="print the section, leave RESULTS.md as it is")
    args = parser.parse_args()
    steps, rounds = (20, 3) if args.quick else (args.steps, args.rounds)
    if args.postgres:
        from postgres_server import ServerUnavailable

        try:
            text = report_postgres(steps, rounds)
        except ServerUnavailable as why:
            raise SystemExit(f"no PostgreSQL server could be started: {why}") from None
    else:
        text = report(steps, rounds)
    print(text)
    if not args.no_write:
        sections.write_section("peers_postgres" if args.postgres else "peers", text)


if __name__ == "__main__":
    main()
