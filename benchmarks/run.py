"""Side-by-side benchmarks: mkl_notebook against the reference interpreter (mklang 1.4.0).

    python -m venv .bench && .bench/bin/pip install -e . mklang==1.4.0
    .bench/bin/python benchmarks/run.py [--repeat 21] [--quick] [--before /path/to/older/checkout]

The reference is a peer to compare with, never a dependency: it is only imported
here, inside the functions that drive it. Every number is the median of several
runs, and ratios are taken within one invocation. Results go to the main part of
benchmarks/RESULTS.md (the sections other scripts write, between their
``<!-- name:start -->`` and ``<!-- name:end -->`` markers, are kept as they are).

``--before`` names a checkout of an earlier mkl_notebook (a git worktree of the commit
to compare with): its figures are taken in a second process that imports that
checkout, driven round by round with this one, so that both see the same load.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import io
import json
import os
import platform
import re
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import yaml

HERE = Path(__file__).resolve().parent
SIMPLE_GATE = [{"when": "otherwise", "then": "ok", "to": "END"}]
LOAD_STATES = 5000  # the machine the loading rows load
RESUME_STEPS = 1000  # the run the resume rows resume, suspended one step before its end


# -- workloads ---------------------------------------------------------------------------------


def linear(n: int) -> dict[str, Any]:
    states = {}
    for index in range(n):
        previous = f"{{{{o{index - 1}}}}}" if index else "the start"
        states[f"s{index}"] = {
            "structure": "one line",
            "prompt": f"step {index} after {previous}",
            "output": f"o{index}",
            "gates": [{"when": "otherwise", "then": "ok", "to": f"s{index + 1}" if index + 1 < n else "END"}],
        }
    return {"machine": f"linear{n}", "entry": "s0", "budget": n + 5, "mklang": "0.4", "states": states}


def repair(n: int) -> dict[str, Any]:
    return {
        "machine": f"repair{n}",
        "entry": "a",
        "budget": n + 5,
        "mklang": "0.4",
        "states": {
            "a": {
                "structure": "a draft",
                "prompt": "write the draft",
                "output": "draft",
                "max_visits": n,
                "gates": [
                    {"when": "the draft has gaps", "repair": n - 1, "to": "a"},
                    {"when": "otherwise", "then": "ok", "to": "END"},
                ],
            }
        },
    }


def ceiling(n: int) -> dict[str, Any]:
    return {
        "machine": f"ceiling{n}",
        "entry": "a",
        "budget": n + 5,
        "mklang": "0.4",
        "states": {
            "a": {
                "structure": "a draft",
                "prompt": "again",
                "output": "draft",
                "max_visits": n,
                "gates": [{"when": "otherwise", "then": "ok", "to": "a"}],
            }
        },
    }


def fanout(n: int) -> dict[str, Any]:
    return {
        "machine": f"fanout{n}",
        "entry": "map",
        "budget": n + 5,
        "mklang": "0.4",
        "context": {"items": [f"item {index}" for index in range(n)]},
        "states": {
            "map": {
                "structure": "a summary",
                "prompt": "summarise {{item}}",
                "over": "{{items}}",
                "output": "parts",
                "gates": [{"when": "otherwise", "then": "ok", "to": "reduce"}],
            },
            "reduce": {
                "structure": "one summary",
                "prompt": "combine {{parts}}",
                "output": "all",
                "gates": SIMPLE_GATE,
            },
        },
    }


@dataclass
class Workload:
    name: str
    machine: dict[str, Any]
    script: dict[str, Any]
    steps: int  # steps the run takes, for per-step figures
    answers: int  # oracle answers the run records (produce + judge)
    latency: float = 0.0
    max_workers: int | None = None  # branches at a time, for both engines (None: each its own default)
    expect: str = "done"  # the status the run ends in


def workloads(quick: bool) -> list[Workload]:
    scale = 10 if quick else 1
    n_lin, n_rep, n_ceil, n_fan = 200 // scale, 1000 // scale, 1000 // scale, 500 // scale
    return [
        Workload(f"linear{n_lin}", linear(n_lin), {"llm": {"produce": []}}, n_lin, n_lin),
        Workload(f"repair{n_rep}", repair(n_rep), {"llm": {"produce": [], "judge": [0]}}, n_rep, 2 * n_rep),
        Workload(f"ceiling{n_ceil}", ceiling(n_ceil), {"llm": {"produce": []}}, n_ceil, n_ceil, expect="halt"),
        Workload(f"fanout{n_fan}", fanout(n_fan), {"llm": {"produce": []}}, n_fan + 1, n_fan + 1),
        # Both engines with the same number of branches at a time: ours by default runs 32, the reference 5.
        Workload("fanout50_latency", fanout(50), {"llm": {"produce": []}}, 51, 51, latency=0.05, max_workers=32),
    ]


# -- timing ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Elapsed:
    """What an action measured itself: it ran in another process, or prepared something it does not count."""

    seconds: float


Action = Callable[[], Any]


def interleaved_times(actions: dict[str, Action | None], repeat: int) -> dict[str, list[float]]:
    """Each action once per round, ``repeat`` rounds, after one warm-up run of each.

    Interleaving keeps the engines under the same load: on a shared machine the
    speed drifts over seconds, and timing one engine's runs as a block, then the
    other's, would put that drift into the ratio.  The order flips every round.
    An action that returns :class:`Elapsed` is timed by what it says.
    """
    present = {name: action for name, action in actions.items() if action is not None}
    for action in present.values():
        action()
    times: dict[str, list[float]] = {name: [] for name in present}
    order = list(present.items())
    for _ in range(repeat):
        for name, action in order:
            start = time.perf_counter()
            outcome = action()
            took = time.perf_counter() - start
            times[name].append(outcome.seconds if isinstance(outcome, Elapsed) else took)
        order.reverse()  # whoever runs right after another engine inherits its garbage: take turns
    return times


def median_ratio(ours: list[float], theirs: list[float]) -> float:
    """The median of the per-round ratios: robust to a slow round that hit both engines."""
    return statistics.median(a / b for a, b in zip(ours, theirs, strict=True))


def median_time(action: Callable[[], Any], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        action()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


# -- engines -----------------------------------------------------------------------------------------


def ours_runner(work: Workload, store_kind: str) -> Callable[[], Any]:
    """One run of ``work`` by mkl_notebook: ``store_kind`` "sqlite" (the default store: one file, open across the
    runs as a notebook session keeps it, a new run id each run), "memory" (the in-memory journal) or "none" (the
    bare engine, no journal)."""
    from mkl_notebook.durable import runs
    from mkl_notebook.durable.stores import MemoryStore, SQLiteStore
    from mkl_notebook.engine.options import RunOptions
    from mkl_notebook.engine.runner import run_machine
    from mkl_notebook.lang.loader import machine_from_mapping
    from mkl_notebook.providers.scripted import oracle_from_script

    machine = machine_from_mapping(work.machine, strict=False)
    options = RunOptions(**({"max_workers": work.max_workers} if work.max_workers else {}))
    sqlite = (
        SQLiteStore(Path(tempfile.mkdtemp(prefix="mkl-bench-")) / "runs.sqlite") if store_kind == "sqlite" else None
    )
    counter = iter(range(10**9))

    def run() -> Any:
        oracle = oracle_from_script(copy.deepcopy(work.script), latency=work.latency)
        if store_kind == "none":
            return run_machine(machine, oracle, options=options)
        store = sqlite or MemoryStore()
        return runs.start(machine, oracle, store=store, run_id=f"bench-{next(counter)}", options=options).result

    return run


def answer_size(work: Workload) -> int:
    """The mean length of the answer records mkl_notebook journals for ``work`` (what the floor writes)."""
    from mkl_notebook.durable import runs
    from mkl_notebook.durable.chain import canonical
    from mkl_notebook.durable.stores import MemoryStore
    from mkl_notebook.lang.loader import machine_from_mapping
    from mkl_notebook.providers.scripted import oracle_from_script

    machine = machine_from_mapping(work.machine, strict=False)
    outcome = runs.start(machine, oracle_from_script(copy.deepcopy(work.script)), store=MemoryStore(), run_id="size")
    sizes = [len(canonical(record)) for record in outcome.records if record.get("t") == "answer"]
    return round(statistics.mean(sizes))


def floor_database(path: Path) -> sqlite3.Connection:
    """A file set up as SQLiteStore sets up its own (WAL, ``synchronous=NORMAL``: ``durability="process"``),
    with the store's records table."""
    db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=NORMAL")
    db.execute(
        "CREATE TABLE records (run_id TEXT NOT NULL, seq INTEGER NOT NULL, body TEXT NOT NULL, "
        "PRIMARY KEY (run_id, seq))"
    )
    return db


def check_floor_settings() -> None:
    """The floor must commit as the store does, or the comparison lies: same journal mode and sync level."""
    from mkl_notebook.durable.stores import SQLiteStore

    with tempfile.TemporaryDirectory() as folder:
        store = SQLiteStore(Path(folder) / "store.sqlite")
        floor = floor_database(Path(folder) / "floor.sqlite")
        for pragma in ("journal_mode", "synchronous"):
            theirs = store._db.execute(f"PRAGMA {pragma}").fetchone()  # the store's own connection
            mine = floor.execute(f"PRAGMA {pragma}").fetchone()
            assert theirs == mine, f"the floor's {pragma} is {mine}, the store's {theirs}"
        store.close()
        floor.close()


def floor_runner(work: Workload) -> Callable[[], Any]:
    """The durable floor: the least a run that commits each answer before it is used can spend.

    mkl_notebook's engine with no journal, whose every answer is first committed as one bare
    ``INSERT`` (a row the size of the answer records, no encoding, no replay) into a file set
    up as the store sets up its own (:func:`floor_database`), open across the runs as the store is.
    The time over the bare engine's is what committing costs; the journal's own time over the
    bare engine's is set against it.
    """
    from mkl_notebook.engine.options import RunOptions
    from mkl_notebook.engine.oracle import Oracle, OracleRequest, Partial
    from mkl_notebook.engine.runner import run_machine
    from mkl_notebook.lang.loader import machine_from_mapping
    from mkl_notebook.providers.scripted import oracle_from_script

    machine = machine_from_mapping(work.machine, strict=False)
    options = RunOptions(**({"max_workers": work.max_workers} if work.max_workers else {}))
    body = "x" * answer_size(work)
    db = floor_database(Path(tempfile.mkdtemp(prefix="mkl-floor-")) / "floor.sqlite")
    counter = iter(range(10**9))

    class Committing(Oracle):
        def __init__(self, inner: Oracle, run_id: str) -> None:
            self.inner, self.run_id, self.seq, self.lock = inner, run_id, 0, threading.Lock()

        def ask(self, request: OracleRequest) -> Any:
            answer = self.inner.ask(request)
            with self.lock:  # one connection, as the store has
                self.seq += 1
                db.execute("INSERT INTO records VALUES (?, ?, ?)", (self.run_id, self.seq, body))
            return answer

        def stream(self, request: OracleRequest, partial: Partial) -> Any:
            return self.ask(request)

        @property
        def waits(self) -> bool:
            return self.inner.waits

    def run() -> Any:
        oracle = Committing(oracle_from_script(copy.deepcopy(work.script), latency=work.latency), f"{next(counter)}")
        return run_machine(machine, oracle, options=options)

    return run


def insert_loop_runner(work: Workload) -> Callable[[], Any]:
    """Only the floor's INSERTs, one after another with nothing in between (caches stay warm: a lower bound
    no engine meets)."""
    body = "x" * answer_size(work)
    db = floor_database(Path(tempfile.mkdtemp(prefix="mkl-inserts-")) / "floor.sqlite")
    counter = iter(range(10**9))

    def run() -> None:
        run_id = f"{next(counter)}"
        for seq in range(work.answers):
            db.execute("INSERT INTO records VALUES (?, ?, ?)", (run_id, seq, body))

    return run


def reference_scenario(work: Workload) -> dict[str, Any]:
    scenario = copy.deepcopy(work.script)
    if work.max_workers:
        scenario["run"] = {"max_workers": work.max_workers}  # run_scenario passes `run:` on to engine.run
    return scenario


def reference_runner(work: Workload) -> Callable[[], Any] | None:
    try:
        from mklang import scripttest
    except ImportError:
        return None
    machine, registry = scripttest.build_registry({"machine": copy.deepcopy(work.machine)})
    scenario = reference_scenario(work)
    if not work.latency:
        return lambda: scripttest.run_scenario(machine, registry, copy.deepcopy(scenario))

    def run() -> Any:  # the reference's scripted LLM has no latency knob: wrap its produce
        original = scripttest.ScriptedLLM.produce

        def slow(self: Any, *args: Any, **kwargs: Any) -> Any:
            time.sleep(work.latency)
            return original(self, *args, **kwargs)

        scripttest.ScriptedLLM.produce = slow
        try:
            return scripttest.run_scenario(machine, registry, copy.deepcopy(scenario))
        finally:
            scripttest.ScriptedLLM.produce = original

    return run


# -- the paths people run: loading, resuming, whole processes -----------------------------------------


def quiet_cli(argv: list[str]) -> int:
    """``mkl ARGV`` in this process, its output swallowed: the exit code."""
    from mkl_notebook.cli import main

    errors = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(errors):
        code = main(argv)
    if code not in (0, 3):  # 3: suspended
        print(f"mkl {' '.join(argv)}: exit {code}: {errors.getvalue().strip()}", file=sys.stderr)
    return code


def write_machine(folder: Path, document: dict[str, Any], name: str = "m.mkl") -> Path:
    path = folder / name
    path.write_text(yaml.safe_dump(document, sort_keys=False), encoding="utf-8")
    return path


def ours_load(states: int) -> Callable[[], Any]:
    """Load a ``states``-state machine file the way ``mkl run`` does."""
    from mkl_notebook.lang.loader import load_file

    path = write_machine(Path(tempfile.mkdtemp(prefix="mkl-load-")), linear(states))
    return lambda: load_file(path)


def reference_load(states: int) -> Callable[[], Any] | None:
    try:
        from mklang import loader
    except ImportError:
        return None
    path = write_machine(Path(tempfile.mkdtemp(prefix="mklang-load-")), linear(states))
    return lambda: loader.load_machine(path)  # what its `run` and `test` commands call


class ResumeBench:
    """A ``steps``-step run suspended one step before its end, in a store file copied afresh for every action.

    ``resume()`` is ``mkl resume --id r --max-steps …`` (the pinned copy replays every journaled answer and
    one call is made); ``fresh()`` is ``mkl run`` of the same machine under a new id in the same store. Only
    the command is timed, not the copy.
    """

    def __init__(self, steps: int) -> None:
        self.folder = Path(tempfile.mkdtemp(prefix="mkl-resume-"))
        self.machine = write_machine(self.folder, linear(steps))
        self.script = self.folder / "s.json"
        self.script.write_text(json.dumps({"llm": {"produce": []}}), encoding="utf-8")
        self.template = self.folder / "template.sqlite"
        self.store = self.folder / "work" / "runs.sqlite"
        self.steps = steps
        # Made by its own process: when it exits, the store's file holds everything (no WAL left beside it). It
        # runs in the temporary folder: ``-m`` puts the working folder first on the path, and from a checkout's
        # root that would import the checkout there instead of the one PYTHONPATH names (``--before``).
        completed = subprocess.run(
            [sys.executable, "-m", "mkl_notebook.cli", *self._run("r", self.template), "--suspend"],
            capture_output=True,
            text=True,
            check=False,
            cwd=self.folder,
            env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
        )
        assert completed.returncode == 3, completed.stderr  # 3: suspended
        self.counter = iter(range(10**9))

    def _run(self, run_id: str, store: Path, max_steps: int | None = None) -> list[str]:
        steps = str(max_steps if max_steps is not None else self.steps - 1)
        argv = ["run", str(self.machine), "--id", run_id, "--script", str(self.script), "--store", str(store)]
        return [*argv, "--max-steps", steps, "--quiet"]

    def _fresh_store(self) -> None:
        self.store.parent.mkdir(exist_ok=True)
        for suffix in ("", "-wal", "-shm"):
            Path(f"{self.store}{suffix}").unlink(missing_ok=True)
        shutil.copyfile(self.template, self.store)

    def resume(self) -> Elapsed:
        self._fresh_store()
        argv = ["resume", "--id", "r", "--store", str(self.store), "--script", str(self.script)]
        argv += ["--max-steps", str(self.steps + 5), "--quiet"]
        start = time.perf_counter()
        code = quiet_cli(argv)
        took = time.perf_counter() - start
        assert code == 0, code
        return Elapsed(took)

    def fresh(self) -> Elapsed:
        self._fresh_store()
        argv = self._run(f"f{next(self.counter)}", self.store, self.steps + 5)
        start = time.perf_counter()
        code = quiet_cli(argv)
        took = time.perf_counter() - start
        assert code == 0, code
        return Elapsed(took)


class ReferenceResume:
    """The reference's ``mklang resume`` of the same run, in process: read its checkpoint, check the machine
    file's hash, load the machine and continue from the checkpoint's frames (it keeps no journal to replay)."""

    def __init__(self, steps: int) -> None:
        from mklang import checkpoint

        self.folder = Path(tempfile.mkdtemp(prefix="mklang-resume-"))
        document = linear(steps)
        self.machine = write_machine(self.folder, document)
        self.steps = steps
        machine, result = reference_suspended(document, steps)
        self.checkpoint = self.folder / "m.checkpoint.json"
        self.checkpoint.write_bytes(
            checkpoint.encode_checkpoint(
                machine.name,
                self.machine,
                result.error or "budget-exhausted",
                result.frames,
                None,
                step_budget=steps - 1,
            )
        )

    def resume(self) -> Any:
        from mklang import checkpoint, engine, loader, scripttest

        ck = checkpoint.load_checkpoint(self.checkpoint)
        assert checkpoint.verify_hash(ck, self.machine)
        machine = loader.load_machine(self.machine)
        registry = {machine.name: machine}
        result = engine.run(
            replace(machine, budget=self.steps + 5),
            dict(machine.context),
            registry,
            scripttest.ScriptedLLM({"produce": []}),
            scripttest.TIERS,
            suspendable=True,
            resume=ck["frames"],
        )
        assert result.status == "done", result.status
        return result

    def fresh(self) -> Any:
        from mklang import engine, loader, scripttest

        machine = loader.load_machine(self.machine)
        result = engine.run(
            machine,
            dict(machine.context),
            {machine.name: machine},
            scripttest.ScriptedLLM({"produce": []}),
            scripttest.TIERS,
        )
        assert result.status == "done", result.status
        return result


def reference_resume(steps: int) -> ReferenceResume | None:
    try:
        import mklang  # noqa: F401
    except ImportError:
        return None
    return ReferenceResume(steps)


def compile_bytecode(paths: list[Path]) -> None:
    """Byte-compile each package up front, so no process measured below compiles anything."""
    for path in paths:
        subprocess.run([sys.executable, "-m", "compileall", "-q", str(path)], check=True, capture_output=True)


class WholeProcess:
    """Whole processes on ``work``: the reference's ``mklang test``, ours ``mkl test`` (its scenario runner,
    in-memory journal) and ``mkl run --script`` (the default SQLite store, a new file each time)."""

    def __init__(self, work: Workload, before: Path | None) -> None:
        self.work = work
        self.folder = Path(tempfile.mkdtemp(prefix=f"mkl-proc-{work.name}-"))
        self.machine = write_machine(self.folder, work.machine)
        self.scenarios = self.folder / "m.test.yaml"
        scenario = {"name": work.name, **reference_scenario(work), "expect": {"status": work.expect}}
        self.scenarios.write_text(yaml.safe_dump({"scenarios": [scenario]}), encoding="utf-8")
        self.script = self.folder / "s.json"
        self.script.write_text(json.dumps(work.script), encoding="utf-8")
        self.before = before
        self.counter = iter(range(10**9))
        self.reference = shutil.which("mklang", path=str(Path(sys.executable).parent))

    def _time(self, argv: list[str], codes: tuple[int, ...], pythonpath: Path | None = None) -> Elapsed:
        env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
        if pythonpath is not None:
            env["PYTHONPATH"] = str(pythonpath)
        start = time.perf_counter()
        completed = subprocess.run(argv, cwd=self.folder, env=env, capture_output=True, text=True, check=False)
        took = time.perf_counter() - start
        assert completed.returncode in codes, (argv, completed.returncode, completed.stderr[-2000:])
        return Elapsed(took)

    def reference_test(self) -> Elapsed | None:
        if self.reference is None:
            return None
        return self._time([self.reference, "test", str(self.machine), "--script", str(self.scenarios)], (0,))

    def ours_test(self, pythonpath: Path | None = None) -> Elapsed:
        argv = [sys.executable, "-m", "mkl_notebook.cli", "test", str(self.machine), "--script", str(self.scenarios)]
        return self._time(argv, (0,), pythonpath)

    def ours_run(self, pythonpath: Path | None = None) -> Elapsed:
        store = self.folder / "stores" / f"{next(self.counter)}.sqlite"
        argv = [sys.executable, "-m", "mkl_notebook.cli", "run", str(self.machine), "--script", str(self.script)]
        argv += ["--store", str(store), "--id", "bench", "--quiet"]
        return self._time(argv, (0, 1), pythonpath)  # 1: the run halted, as ceiling's does

    def actions(self) -> dict[str, Action | None]:
        before = self.before
        return {
            "reference": self.reference_test if self.reference else None,
            "test": self.ours_test,
            "run": self.ours_run,
            "before test": (lambda: self.ours_test(before)) if before else None,
            "before run": (lambda: self.ours_run(before)) if before else None,
        }


# -- an earlier checkout, driven from here --------------------------------------------------------------


def our_action(name: str, quick: bool) -> Action:
    """The action ``name`` names, built with whichever mkl_notebook this process imports."""
    kind, _, what = name.partition(":")
    if kind == "run":
        workload, _, store = what.partition("/")
        work = next(w for w in workloads(quick) if w.name == workload)
        return ours_runner(work, store)
    if kind == "load":
        return ours_load(int(what))
    if kind in ("resume", "fresh"):
        bench = ResumeBench(int(what))
        return bench.resume if kind == "resume" else bench.fresh
    raise SystemExit(f"unknown action {name!r}")


def serve(quick: bool) -> None:
    """Run actions named on stdin, one JSON line each; answer each with the seconds it took."""
    import mkl_notebook

    print(json.dumps({"package": mkl_notebook.__file__}), flush=True)
    built: dict[str, Action] = {}
    for line in sys.stdin:
        name = json.loads(line)["action"]
        if name not in built:
            built[name] = our_action(name, quick)
        start = time.perf_counter()
        outcome = built[name]()
        took = time.perf_counter() - start
        print(json.dumps({"seconds": outcome.seconds if isinstance(outcome, Elapsed) else took}), flush=True)


class Before:
    """A process importing the checkout at ``path``, running the actions it is sent, one at a time."""

    def __init__(self, path: Path, quick: bool) -> None:
        env = {**os.environ, "PYTHONPATH": str(path)}
        argv = [sys.executable, str(Path(__file__).resolve()), "--serve", *(["--quick"] if quick else [])]
        self.process = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
        assert self.process.stdout is not None
        package = json.loads(self.process.stdout.readline())["package"]
        assert Path(package).resolve().is_relative_to(path.resolve()), f"the earlier checkout imported {package}"
        self.path = path

    def action(self, name: str) -> Action:
        def run() -> Elapsed:
            assert self.process.stdin is not None and self.process.stdout is not None
            self.process.stdin.write(json.dumps({"action": name}) + "\n")
            self.process.stdin.flush()
            return Elapsed(json.loads(self.process.stdout.readline())["seconds"])

        return run

    def close(self) -> None:
        if self.process.stdin is not None:
            self.process.stdin.close()
        self.process.wait(timeout=60)


# -- special measurements --------------------------------------------------------------------------


def replay_time(repeat: int, n: int) -> tuple[float, int]:
    """Re-running a finished run: every answer is replayed from the journal, none is asked for."""
    from mkl_notebook.durable import runs
    from mkl_notebook.durable.stores import MemoryStore
    from mkl_notebook.lang.loader import machine_from_mapping
    from mkl_notebook.providers.scripted import oracle_from_script

    machine = machine_from_mapping(repair(n), strict=False)
    store = MemoryStore()
    script = {"llm": {"produce": [], "judge": [0]}}
    first = runs.start(machine, oracle_from_script(copy.deepcopy(script)), store=store, run_id="r")
    assert first.result.status == "done", first.result.error

    def again() -> None:
        outcome = runs.start(machine, oracle_from_script(copy.deepcopy(script)), store=store, run_id="r")
        assert outcome.calls["made"] == 0

    return median_time(again, repeat), first.calls["made"]


def envelope_sizes(n: int) -> tuple[int, int | None]:
    from mkl_notebook.checkpoints import envelope
    from mkl_notebook.durable import runs
    from mkl_notebook.durable.stores import MemoryStore
    from mkl_notebook.engine.options import RunOptions
    from mkl_notebook.lang.loader import machine_from_mapping
    from mkl_notebook.providers.scripted import oracle_from_script

    document = linear(n)
    machine = machine_from_mapping(document, strict=False)
    options = RunOptions(suspendable=True, max_steps=n - 1)
    outcome = runs.start(
        machine, oracle_from_script({"llm": {"produce": []}}), store=MemoryStore(), run_id="e", options=options
    )
    assert outcome.result.status == "suspended"
    ours = len(envelope.dumps(envelope.checkpoint_of(outcome)).encode("utf-8"))
    return ours, reference_envelope_size(document, n)


def reference_suspended(document: dict[str, Any], steps: int) -> tuple[Any, Any]:
    """The reference's run of ``document`` suspended one step before its end (its budget one short): the
    machine it built and the result."""
    from mklang import engine, scripttest

    shorter = {**copy.deepcopy(document), "budget": steps - 1}
    machine, registry = scripttest.build_registry({"machine": shorter})
    result = engine.run(
        machine,
        dict(machine.context),
        registry,
        scripttest.ScriptedLLM({"produce": []}),
        scripttest.TIERS,
        suspendable=True,
    )
    assert result.status == "suspended", result.status
    return machine, result


def reference_envelope_size(document: dict[str, Any], n: int) -> int | None:
    """The reference's checkpoint of the same suspended run, re-serialised compactly."""
    try:
        from mklang import checkpoint
    except ImportError:
        return None
    machine, result = reference_suspended(document, n)
    with tempfile.TemporaryDirectory() as folder:
        source = Path(folder) / "m.mkl"
        source.write_text(yaml.safe_dump(document))
        data = json.loads(
            checkpoint.encode_checkpoint(
                machine.name, source, result.error or "budget-exhausted", result.frames, None, step_budget=n - 1
            )
        )
    return len(json.dumps(data, separators=(",", ":"), ensure_ascii=False).encode("utf-8"))


def import_time(module: str, repeat: int) -> float | None:
    def once(code: str) -> float:
        start = time.perf_counter()
        subprocess.run([sys.executable, "-c", code], check=True, capture_output=True)
        return time.perf_counter() - start

    try:
        subprocess.run([sys.executable, "-c", f"import {module}"], check=True, capture_output=True)
    except subprocess.CalledProcessError:
        return None
    base = statistics.median(once("pass") for _ in range(repeat))
    return statistics.median(once(f"import {module}") for _ in range(repeat)) - base


# -- report ---------------------------------------------------------------------------------------------


def fmt_ms(seconds: float | None) -> str:
    return "n/a" if seconds is None else f"{seconds * 1000:.1f} ms"


def fmt_us(seconds: float | None) -> str:
    return "n/a" if seconds is None else f"{seconds * 1e6:.0f} µs"


def fmt_ratio(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2f}×"


def ratio(ours: float | None, theirs: float | None) -> str:
    return fmt_ratio(None if ours is None or not theirs else ours / theirs)


def machine_description() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        model = next(
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("model name")
        )
        cpu = model
    except (OSError, StopIteration):
        pass
    return (
        f"{platform.system()} {platform.release()}, {cpu}, {os.cpu_count()} cores, Python {platform.python_version()}"
    )


class Times:
    """One measurement's times by action, with the figures the tables take from them."""

    def __init__(self, times: dict[str, list[float]]) -> None:
        self.times = times

    def median(self, name: str) -> float | None:
        return statistics.median(self.times[name]) if name in self.times else None

    def ratio(self, ours: str, theirs: str) -> float | None:
        """The median of the per-round ratios of two actions."""
        if ours not in self.times or theirs not in self.times:
            return None
        return median_ratio(self.times[ours], self.times[theirs])

    def added(self, name: str, base: str, count: int) -> float | None:
        """What ``name`` spends beyond ``base``, per one of ``count`` (medians)."""
        over, under = self.median(name), self.median(base)
        return None if over is None or under is None else (over - under) / count

    def added_ratio(self, name: str, base: str, floor: str = "floor", floor_base: str = "none") -> float | None:
        """The median over rounds of (``name`` − ``base``) / (``floor`` − ``floor_base``): what one costs over its
        base against what committing costs over the bare engine."""
        names = (name, base, floor, floor_base)
        if any(each not in self.times for each in names):
            return None
        rounds = zip(*(self.times[each] for each in names), strict=True)
        return statistics.median((a - b) / (f - n) for a, b, f, n in rounds if f > n)


def keep_sections(path: Path, main_part: str) -> str:
    """``main_part`` followed by every section another script wrote into ``path`` between its markers."""
    old = path.read_text(encoding="utf-8") if path.exists() else ""
    kept = [
        found.group(0) for found in re.finditer(r"<!-- ([\w.-]+):start -->.*?<!-- \1:end -->", old, flags=re.DOTALL)
    ]
    return main_part.rstrip() + "\n" + "".join(f"\n{section}\n" for section in kept)


def only(args: argparse.Namespace) -> None:
    for work in (w for w in workloads(args.quick) if w.name in args.only):
        times = Times(
            interleaved_times(
                {
                    "reference": reference_runner(work),
                    "sqlite": ours_runner(work, "sqlite"),
                    "memory": ours_runner(work, "memory"),
                },
                args.repeat,
            )
        )
        print(
            f"{work.name}: reference {fmt_ms(times.median('reference'))}, SQLite {fmt_ms(times.median('sqlite'))} "
            f"({fmt_ratio(times.ratio('sqlite', 'reference'))}), in-memory {fmt_ms(times.median('memory'))} "
            f"({fmt_ratio(times.ratio('memory', 'reference'))})"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=21, help="rounds per measurement (medians are reported)")
    parser.add_argument("--process-repeat", type=int, default=7, help="rounds of the whole-process measurements")
    parser.add_argument("--quick", action="store_true", help="one tenth of each workload, for a smoke run")
    parser.add_argument("--output", default=str(HERE / "RESULTS.md"))
    parser.add_argument("--only", nargs="+", metavar="WORKLOAD", help="time only these workloads (no report)")
    parser.add_argument("--before", metavar="CHECKOUT", help="an earlier checkout of mkl_notebook to compare with")
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)  # the --before process
    args = parser.parse_args()
    if args.serve:
        serve(args.quick)
        return
    if args.only:
        only(args)
        return
    check_floor_settings()
    before = Before(Path(args.before), args.quick) if args.before else None
    scale = 10 if args.quick else 1

    def earlier(name: str) -> Action | None:
        return before.action(name) if before else None

    rows: list[tuple[Workload, Times]] = []
    for work in workloads(args.quick):
        times = Times(
            interleaved_times(
                {
                    "reference": reference_runner(work),
                    "sqlite": ours_runner(work, "sqlite"),
                    "memory": ours_runner(work, "memory"),
                    "none": ours_runner(work, "none"),
                    "floor": floor_runner(work),
                    "inserts": insert_loop_runner(work),
                    "before sqlite": earlier(f"run:{work.name}/sqlite"),
                    "before memory": earlier(f"run:{work.name}/memory"),
                    "before none": earlier(f"run:{work.name}/none"),
                },
                args.repeat,
            )
        )
        rows.append((work, times))
        print(
            f"{work.name}: reference {fmt_ms(times.median('reference'))}, SQLite {fmt_ms(times.median('sqlite'))} "
            f"({fmt_ratio(times.ratio('sqlite', 'reference'))}), floor {fmt_ms(times.median('floor'))}",
            file=sys.stderr,
        )

    states = LOAD_STATES // scale
    loading = Times(
        interleaved_times(
            {"reference": reference_load(states), "after": ours_load(states), "before": earlier(f"load:{states}")},
            args.repeat,
        )
    )
    steps = RESUME_STEPS // scale
    ours_resume, their_resume = ResumeBench(steps), reference_resume(steps)
    resuming = Times(
        interleaved_times(
            {
                "reference resume": their_resume.resume if their_resume else None,
                "reference fresh": their_resume.fresh if their_resume else None,
                "after resume": ours_resume.resume,
                "after fresh": ours_resume.fresh,
                "before resume": earlier(f"resume:{steps}"),
                "before fresh": earlier(f"fresh:{steps}"),
            },
            args.repeat,
        )
    )
    print(f"resume: {fmt_ms(resuming.median('after resume'))}", file=sys.stderr)

    import mkl_notebook

    packages = [Path(mkl_notebook.__file__).parent]
    if before:
        packages.append(before.path / "mkl_notebook")
    with contextlib.suppress(ImportError):
        import mklang

        packages.append(Path(mklang.__file__).parent)
    compile_bytecode(packages)
    processes = [
        (
            work,
            Times(
                interleaved_times(WholeProcess(work, before.path if before else None).actions(), args.process_repeat)
            ),
        )
        for work, _ in rows
        if not work.latency
    ]
    if before:
        before.close()

    n_replay = 100 if args.quick else 1000
    replay, replay_calls = replay_time(args.repeat, n_replay)
    ours_env, their_env = envelope_sizes(20 if args.quick else 200)
    our_import = import_time("mkl_notebook", args.repeat)
    their_import = import_time("mklang", args.repeat)

    text = report(args, rows, loading, states, resuming, steps, processes, before is not None)
    text += "\n".join(
        [
            "",
            "## Replay, checkpoints, import",
            "",
            "| measurement | reference | mkl_notebook | ratio |",
            "|---|---|---|---|",
            f"| re-run of a finished repair{n_replay} run ({replay_calls} answers replayed, 0 calls; in-memory "
            f"journal) | — | {fmt_ms(replay)} | — |",
            f"| checkpoint bytes, linear{20 if args.quick else 200} suspended one step before the end | "
            f"{their_env if their_env is not None else 'n/a'} | {ours_env} | {ratio(ours_env, their_env)} |",
            f"| `import` net of interpreter start-up | {fmt_ms(their_import)} | {fmt_ms(our_import)} | "
            f"{ratio(our_import, their_import)} |",
            "",
        ]
    )
    output = Path(args.output)
    output.write_text(keep_sections(output, text), encoding="utf-8")
    print(text)


def report(
    args: argparse.Namespace,
    rows: list[tuple[Workload, Times]],
    loading: Times,
    states: int,
    resuming: Times,
    steps: int,
    processes: list[tuple[Workload, Times]],
    with_before: bool,
) -> str:
    """The main part of RESULTS.md, up to the replay table."""
    before_note = (
        f" *before* is the checkout `{Path(args.before).name}` (an earlier commit), measured by a second process "
        "driven round by round with this one; *after* is this checkout."
        if with_before
        else ""
    )
    lines = [
        "# Benchmarks: mkl_notebook vs the reference interpreter (mklang 1.4.0)",
        "",
        f"Machine: {machine_description()}. Medians of {args.repeat} rounds, every engine once per round, in "
        "turn (`python benchmarks/run.py"
        + (f" --before {args.before}" if with_before else "")
        + "`). Scripted oracles throughout; the machine is shared, so read the ratios (each the median of "
        f"the ratios within a round), not the absolute times.{before_note}",
        "",
        "## The default path: the SQLite journal",
        "",
        "What a run costs as the CLI and the notebook run it: every answer journaled in `.mkl/runs.sqlite` "
        "(WAL, `synchronous=NORMAL`) and committed before it is used (here one store file, open across the "
        "runs, as a notebook session keeps it). The reference keeps no journal. "
        "mkl_notebook's in-memory journal, which no user path uses, is beside it. `fanout50_latency` waits "
        "50 ms for each answer and runs 32 branches at a time in both engines (`max_workers`; the reference's "
        "default is 5, ours 32).",
        "",
        "| workload | steps | reference | SQLite (default) | ratio | "
        + ("before: SQLite | ratio | " if with_before else "")
        + "in-memory | ratio | per step (SQLite) |",
        "|---|---|---|---|---|" + ("---|---|" if with_before else "") + "---|---|---|",
    ]
    for work, times in rows:
        lines.append(
            f"| {work.name} | {work.steps} | {fmt_ms(times.median('reference'))} | {fmt_ms(times.median('sqlite'))} "
            f"| {fmt_ratio(times.ratio('sqlite', 'reference'))} | "
            + (
                f"{fmt_ms(times.median('before sqlite'))} | {fmt_ratio(times.ratio('before sqlite', 'reference'))} | "
                if with_before
                else ""
            )
            + f"{fmt_ms(times.median('memory'))} | {fmt_ratio(times.ratio('memory', 'reference'))} | "
            f"{fmt_us((times.median('sqlite') or 0) / work.steps)} |"
        )
    lines += [
        "",
        "## The durable floor",
        "",
        "*Floor*: the least a run that commits each answer before it is used can spend — mkl_notebook's engine "
        "with no journal, every answer first committed as one bare `INSERT` (a row the size of the journal's "
        "answer records) into a file set up as the store sets up its own (WAL, `synchronous=NORMAL`, the "
        "same table), open across the runs as the store is (one file, a new run id each run, as in a notebook "
        "session). *Per answer* is the time over the bare engine's (no journal), divided by the answers: for "
        "the floor, what committing costs; for the *journal* (SQLite − no journal), everything journaling does "
        "(fingerprints, records, JSON, the run's rows and lease, reading back what it added); for the *store* "
        "(SQLite − in-memory journal), what keeping the records in SQLite adds to the bookkeeping any journal "
        "does. Each `× floor` is the median over rounds of the quotient with the floor's. *INSERTs alone* is "
        "the floor's INSERTs in a tight loop, with nothing in between to cool the caches: a bound no engine "
        "meets. *Whole run* is a run's whole time per answer, engine included, for the floor and for the "
        "SQLite journal (the measure the floor was first given in: a step that commits its answer costs "
        "~60 µs), and `÷ floor` their quotient. All figures are per answer.",
        "",
        "| workload | answers | whole run: floor | SQLite | ÷ floor | "
        + ("before | ÷ floor | " if with_before else "")
        + "added: floor | journal | × floor | store | × floor | "
        + ("before: journal | × floor | before: store | × floor | " if with_before else "")
        + "INSERTs alone |",
        "|---|---|---|---|---|"
        + ("---|---|" if with_before else "")
        + "---|---|---|---|---|"
        + ("---|---|---|---|" if with_before else "")
        + "---|",
    ]
    for work, times in rows:
        waits = bool(work.latency)  # the commits happen while other branches wait: per-answer figures are noise
        cells = [work.name, str(work.answers), fmt_us((times.median("floor") or 0) / work.answers)]
        for prefix in ("", "before ") if with_before else ("",):
            cells.append(fmt_us((times.median(f"{prefix}sqlite") or 0) / work.answers))
            cells.append(fmt_ratio(times.ratio(f"{prefix}sqlite", "floor")))
        cells.append(fmt_us(times.added("floor", "none", work.answers)))
        for prefix in ("", "before ") if with_before else ("",):
            for base in ("none", "memory"):
                cells.append(fmt_us(times.added(f"{prefix}sqlite", f"{prefix}{base}", work.answers)))
                cells.append("—" if waits else fmt_ratio(times.added_ratio(f"{prefix}sqlite", f"{prefix}{base}")))
        cells.append(fmt_us((times.median("inserts") or 0) / work.answers))
        lines.append("| " + " | ".join(cells) + " |")
    lines += [
        "",
        "`fanout50_latency` has no `× floor`: its commits happen while other branches wait for their answers, "
        "so what they cost hides in the 50 ms waits.",
        "",
        "## Loading and resuming",
        "",
        f"*Load*: a {states:,}-state machine file, as `mkl run` loads it (`load_file`) and as `mklang run` "
        f"does (`loader.load_machine`). *Resume*: a {steps:,}-step run suspended one step before its end, "
        f"resumed with more steps: `mkl resume --id` in process, from a SQLite store copied afresh each time "
        f"({steps - 1:,} answers replayed from the journal, 1 call); the reference reads its checkpoint, "
        "checks the machine file's hash, loads it and continues from the checkpoint's frames (it has no "
        "journal to replay). *Fresh run*: the same machine run from the start the same way (`mkl run` into "
        "the same store; the reference's engine after loading the file).",
        "",
        "| measurement | reference | "
        + ("before | " if with_before else "")
        + "after | after / reference |"
        + (" after / before |" if with_before else ""),
        "|---|---|" + ("---|" if with_before else "") + "---|---|" + ("---|" if with_before else ""),
    ]
    for label, theirs, ours in (
        (f"load a {states:,}-state machine", ("reference", loading), ("", loading)),
        (f"resume a {steps:,}-step suspended run", ("reference resume", resuming), ("resume", resuming)),
        (f"fresh run of the same {steps:,} steps", ("reference fresh", resuming), ("fresh", resuming)),
    ):
        prefix = f"{ours[0]}" if ours[0] else ""
        after_name = f"after {prefix}".strip()
        before_name = f"before {prefix}".strip()
        table = ours[1]
        lines.append(
            f"| {label} | {fmt_ms(theirs[1].median(theirs[0]))} | "
            + (f"{fmt_ms(table.median(before_name))} | " if with_before else "")
            + f"{fmt_ms(table.median(after_name))} | {fmt_ratio(table.ratio(after_name, theirs[0]))} |"
            + (f" {fmt_ratio(table.ratio(after_name, before_name))} |" if with_before else "")
        )
    lines.append(
        "| resume ÷ fresh run | "
        f"{fmt_ratio(resuming.ratio('reference resume', 'reference fresh'))} | "
        + (f"{fmt_ratio(resuming.ratio('before resume', 'before fresh'))} | " if with_before else "")
        + f"{fmt_ratio(resuming.ratio('after resume', 'after fresh'))} | — |"
        + (" — |" if with_before else "")
    )
    lines += [
        "",
        "## Whole processes",
        "",
        f"Each command as its own process, bytecode compiled beforehand for both packages (`python -m compileall`), "
        f"medians of {args.process_repeat} rounds: the reference's `mklang test MACHINE --script SCENARIOS`, "
        "`mkl test` on the same files (the scenario runner) and `mkl run MACHINE --script` (a run with the "
        "default SQLite journal, a new store file each time).",
        "",
        "| workload | `mklang test` | `mkl test` | ratio | "
        + ("before | " if with_before else "")
        + "`mkl run` (SQLite) | ratio | "
        + ("before |" if with_before else ""),
        "|---|---|---|---|" + ("---|" if with_before else "") + "---|---|" + ("---|" if with_before else ""),
    ]
    for work, times in processes:
        lines.append(
            f"| {work.name} | {fmt_ms(times.median('reference'))} | {fmt_ms(times.median('test'))} | "
            f"{fmt_ratio(times.ratio('test', 'reference'))} | "
            + (f"{fmt_ms(times.median('before test'))} | " if with_before else "")
            + f"{fmt_ms(times.median('run'))} | {fmt_ratio(times.ratio('run', 'reference'))} |"
            + (f" {fmt_ms(times.median('before run'))} |" if with_before else "")
        )
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
