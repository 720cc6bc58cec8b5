"""Side-by-side benchmarks: mkl_notebook against the reference interpreter (mklang 1.4.0).

    python -m venv .bench && .bench/bin/pip install -e . mklang==1.4.0
    .bench/bin/python benchmarks/run.py [--repeat 21] [--quick]

The reference is a peer to compare with, never a dependency: it is only imported
here, inside the functions that drive it. Every number is the median of several
runs, and ratios are taken within one invocation. Results go to benchmarks/RESULTS.md.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

HERE = Path(__file__).resolve().parent
SIMPLE_GATE = [{"when": "otherwise", "then": "ok", "to": "END"}]


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
    max_workers: int | None = None


def workloads(quick: bool) -> list[Workload]:
    scale = 10 if quick else 1
    n_lin, n_rep, n_ceil, n_fan = 200 // scale, 1000 // scale, 1000 // scale, 500 // scale
    return [
        Workload(f"linear{n_lin}", linear(n_lin), {"llm": {"produce": []}}, n_lin, n_lin),
        Workload(f"repair{n_rep}", repair(n_rep), {"llm": {"produce": [], "judge": [0]}}, n_rep, 2 * n_rep),
        Workload(f"ceiling{n_ceil}", ceiling(n_ceil), {"llm": {"produce": []}}, n_ceil, n_ceil),
        Workload(f"fanout{n_fan}", fanout(n_fan), {"llm": {"produce": []}}, n_fan + 1, n_fan + 1),
        Workload("fanout50_latency", fanout(50), {"llm": {"produce": []}}, 51, 51, latency=0.05),
    ]


# -- timing ------------------------------------------------------------------------------------------


def interleaved_times(actions: dict[str, Callable[[], Any] | None], repeat: int) -> dict[str, list[float]]:
    """Each action once per round, ``repeat`` rounds, after one warm-up run of each.

    Interleaving keeps the engines under the same load: on a shared machine the
    speed drifts over seconds, and timing one engine's runs as a block, then the
    other's, would put that drift into the ratio.  The order flips every round.
    """
    present = {name: action for name, action in actions.items() if action is not None}
    for action in present.values():
        action()
    times: dict[str, list[float]] = {name: [] for name in present}
    order = list(present.items())
    for _ in range(repeat):
        for name, action in order:
            start = time.perf_counter()
            action()
            times[name].append(time.perf_counter() - start)
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


def ours_runner(work: Workload, store_kind: str) -> Callable[[], Any]:
    from mkl_notebook.durable import runs
    from mkl_notebook.durable.stores import MemoryStore, SQLiteStore
    from mkl_notebook.engine.options import RunOptions
    from mkl_notebook.engine.runner import run_machine
    from mkl_notebook.lang.loader import machine_from_mapping
    from mkl_notebook.providers.scripted import oracle_from_script

    machine = machine_from_mapping(work.machine, strict=False)
    options = RunOptions(**({"max_workers": work.max_workers} if work.max_workers else {}))
    folder = tempfile.mkdtemp(prefix="mkl-bench-")
    counter = iter(range(10**9))

    def run() -> Any:
        oracle = oracle_from_script(copy.deepcopy(work.script), latency=work.latency)
        if store_kind == "none":
            return run_machine(machine, oracle, options=options)
        store = MemoryStore() if store_kind == "memory" else SQLiteStore(Path(folder) / f"{next(counter)}.sqlite")
        return runs.start(machine, oracle, store=store, run_id="bench", options=options).result

    return run


def reference_runner(work: Workload) -> Callable[[], Any] | None:
    try:
        from mklang import scripttest
    except ImportError:
        return None
    machine, registry = scripttest.build_registry({"machine": copy.deepcopy(work.machine)})
    scenario = copy.deepcopy(work.script)
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
    from mkl_notebook.durable import envelope, runs
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
    ours = len(envelope.dumps(outcome.envelope()).encode("utf-8"))
    return ours, reference_envelope_size(document, n)


def reference_envelope_size(document: dict[str, Any], n: int) -> int | None:
    """The reference's checkpoint of the same suspended run, re-serialised compactly."""
    try:
        from mklang import checkpoint, engine, scripttest
    except ImportError:
        return None
    shorter = {**copy.deepcopy(document), "budget": n - 1}
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=21, help="rounds per measurement (medians are reported)")
    parser.add_argument("--quick", action="store_true", help="one tenth of each workload, for a smoke run")
    parser.add_argument("--output", default=str(HERE / "RESULTS.md"))
    parser.add_argument("--only", nargs="+", metavar="WORKLOAD", help="time only these workloads (no report)")
    args = parser.parse_args()
    if args.only:
        for work in (w for w in workloads(args.quick) if w.name in args.only):
            times = interleaved_times(
                {"reference": reference_runner(work), "memory": ours_runner(work, "memory")}, args.repeat
            )
            print(
                f"{work.name}: median ratio {fmt_ratio(median_ratio(times['memory'], times['reference']))}, "
                f"medians {fmt_ms(statistics.median(times['reference']))} vs "
                f"{fmt_ms(statistics.median(times['memory']))}"
            )
        return

    rows = []
    journal_rows = []
    for work in workloads(args.quick):
        times = interleaved_times(
            {
                "reference": reference_runner(work),
                "memory": ours_runner(work, "memory"),
                "none": ours_runner(work, "none"),
                "sqlite": ours_runner(work, "sqlite"),
            },
            args.repeat,
        )
        theirs = statistics.median(times["reference"]) if "reference" in times else None
        memory, bare, sqlite = (statistics.median(times[name]) for name in ("memory", "none", "sqlite"))
        round_ratio = median_ratio(times["memory"], times["reference"]) if "reference" in times else None
        rows.append((work, theirs, memory, bare, round_ratio))
        journal_rows.append((work, memory, sqlite, (sqlite - memory) / work.answers))
        print(
            f"{work.name}: reference {fmt_ms(theirs)}, ours {fmt_ms(memory)} (no journal {fmt_ms(bare)}), "
            f"ratio {ratio(memory, theirs)} (per round {fmt_ratio(round_ratio)}); sqlite {fmt_ms(sqlite)}",
            file=sys.stderr,
        )

    n_replay = 100 if args.quick else 1000
    replay, replay_calls = replay_time(args.repeat, n_replay)
    ours_env, their_env = envelope_sizes(20 if args.quick else 200)
    our_import = import_time("mkl_notebook", args.repeat)
    their_import = import_time("mklang", args.repeat)

    lines = [
        "# Benchmarks: mkl_notebook vs the reference interpreter (mklang 1.4.0)",
        "",
        f"Machine: {machine_description()}. Medians of {args.repeat} rounds, both engines in one invocation "
        "(`python benchmarks/run.py`), run in turn within each round. Scripted oracles throughout; the "
        "machines are shared, so read the ratios, not the absolute times.",
        "",
        "## Engine time (in-memory journal for mkl_notebook)",
        "",
        "`ratio` is mkl_notebook's median over the reference's median; `per round` is the median of the "
        "ratios taken within each round.",
        "",
        "| workload | steps | reference | mkl_notebook | ratio | per round | per step (ours) | no journal |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for work, theirs, memory, bare, round_ratio in rows:
        lines.append(
            f"| {work.name} | {work.steps} | {fmt_ms(theirs)} | {fmt_ms(memory)} | {ratio(memory, theirs)} "
            f"| {fmt_ratio(round_ratio)} | {memory / work.steps * 1e6:.0f} µs | {fmt_ms(bare)} |"
        )
    lines += [
        "",
        "## Durable journal (SQLite, WAL) cost",
        "",
        "| workload | oracle answers | in-memory journal | SQLite journal | added per answer |",
        "|---|---|---|---|---|",
    ]
    for work, memory, sqlite, per_answer in journal_rows:
        lines.append(
            f"| {work.name} | {work.answers} | {fmt_ms(memory)} | {fmt_ms(sqlite)} | {per_answer * 1e6:.0f} µs |"
        )
    lines += [
        "",
        "## Replay, checkpoints, import",
        "",
        "| measurement | reference | mkl_notebook | ratio |",
        "|---|---|---|---|",
        f"| re-run of a finished repair{n_replay} run ({replay_calls} answers replayed, 0 calls) | — | "
        f"{fmt_ms(replay)} | — |",
        f"| checkpoint bytes, linear{20 if args.quick else 200} suspended one step before the end | "
        f"{their_env if their_env is not None else 'n/a'} | {ours_env} | {ratio(ours_env, their_env)} |",
        f"| `import` net of interpreter start-up | {fmt_ms(their_import)} | {fmt_ms(our_import)} | "
        f"{ratio(our_import, their_import)} |",
        "",
    ]
    text = "\n".join(lines)
    Path(args.output).write_text(text, encoding="utf-8")
    print(text)


if __name__ == "__main__":
    main()
