"""Crash safety of durable runs, through the ``mkl`` command in real subprocesses.

A ``--tools`` file (written by these tests) registers Python tools that leave a line in
an external ledger file for every real effect, and monkeypatches
``SQLiteStore.append`` (and ``append_ending``, an advance's last) so that the process SIGKILLs itself
at a chosen journal append:

- ``KILL_AT=N``: right after the Nth append is committed;
- ``KILL_BEFORE=N``: at the Nth append, before anything of it is written;
- ``APPEND_LOG=PATH``: log every append (type, kind, position, name) as a JSON line.

This is test-only code; the package is used exactly as a user would.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from mkl_notebook.durable.stores import SQLiteStore

TOOLS_PY = r"""
import json
import os
import signal
import time

import mkl_notebook
from mkl_notebook.durable import stores

LEDGER = os.environ.get("LEDGER", "ledger.txt")
RELEASE = os.environ.get("RELEASE", "release")


def _ledger(line):
    with open(LEDGER, "a", encoding="utf-8") as handle:
        handle.write(line + "\n")
        handle.flush()
        os.fsync(handle.fileno())


@mkl_notebook.tool(effect="effect")
def record(key, value):
    _ledger(key)
    return f"{key}={value}"


@mkl_notebook.tool(effect="effect")
def charge(amount):
    _ledger(f"charge {amount}")
    if os.environ.get("KILL_IN_TOOL"):
        os.kill(os.getpid(), signal.SIGKILL)
    return f"receipt-{amount}"


@mkl_notebook.tool(effect="read")
def slow(x):
    # The ledger line says "this process is inside the tool, holding the run"; the tool then
    # stays there until the test creates the release file, so the test decides when it ends.
    _ledger(f"slow {x} {os.getpid()}")
    deadline = time.monotonic() + 120
    while not os.path.exists(RELEASE):
        if time.monotonic() > deadline:
            raise RuntimeError(f"slow: {RELEASE} never appeared")
        time.sleep(0.01)
    return f"slow {x}"


@mkl_notebook.tool(effect="read")
def summarize(**parts):
    return "|".join(f"{key}:{parts[key]}" for key in sorted(parts))


_appends = 0


# ``commit`` is an append, or the append that ends an advance with the run's status.
def _killing(commit):
    def killing(self, run_id, record, *status):
        global _appends
        _appends += 1
        log = os.environ.get("APPEND_LOG")
        if log:
            with open(log, "a", encoding="utf-8") as handle:
                handle.write(json.dumps({"n": _appends, "t": record.get("t"), "kind": record.get("kind"),
                                         "pos": record.get("pos"), "name": record.get("name")}) + "\n")
        if os.environ.get("KILL_BEFORE") == str(_appends):
            os.kill(os.getpid(), signal.SIGKILL)
        commit(self, run_id, record, *status)
        if os.environ.get("KILL_AT") == str(_appends):
            os.kill(os.getpid(), signal.SIGKILL)
    return killing


stores.SQLiteStore.append = _killing(stores.SQLiteStore.append)
stores.SQLiteStore.append_ending = _killing(stores.SQLiteStore.append_ending)
"""

RECORD_EVERY = 5
STATES = 32


def _long_machine() -> tuple[str, dict[str, Any]]:
    """32 states: produce states (some judged), an idempotent `record` tool every 5th state, a summary tool."""
    lines = ["machine: long", "entry: s00", "budget: 40", "result: summary", "states:"]
    produce: dict[str, str] = {}
    previous = None
    for i in range(STATES):
        sid, nxt = f"s{i:02d}", (f"s{i + 1:02d}" if i + 1 < STATES else "END")
        lines.append(f"  {sid}:")
        if i == STATES - 1:
            lines += [
                "    tool: summarize",
                "    input: { " + ", ".join(f'k{j:02d}: "{{{{o{j:02d}}}}}"' for j in range(i)) + " }",
                "    output: summary",
            ]
        elif i % RECORD_EVERY == RECORD_EVERY - 1:
            lines += [
                "    tool: record",
                f'    input: {{ key: "{sid}", value: "{{{{o{i - 1:02d}}}}}" }}',
                f"    output: o{i:02d}",
            ]
        else:
            after = f" after {{{{o{previous}}}}}" if previous is not None else ""
            lines += ["    structure: one line", f'    prompt: "step {i:02d}{after}"', f"    output: o{i:02d}"]
            produce[f"step {i:02d}"] = f"answer {i:02d}"
        previous = f"{i:02d}"
        if i % 3 == 1 and i % RECORD_EVERY != RECORD_EVERY - 1 and i != STATES - 1:
            lines += [
                "    gates:",
                f"      - {{ when: the step is fine, then: ok, to: {nxt} }}",
                "      - { when: otherwise, fail: true }",
            ]
        else:
            lines += ["    gates:", f"      - {{ when: otherwise, then: ok, to: {nxt} }}"]
    return "\n".join(lines) + "\n", {"llm": {"produce": produce, "tokens": [2, 3]}}


RECORD_KEYS = [f"s{i:02d}" for i in range(STATES - 1) if i % RECORD_EVERY == RECORD_EVERY - 1]


def _mkl(
    cwd: Path, *args: str, env: dict[str, str] | None = None, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    full_env = {**os.environ, "LEDGER": str(cwd / "ledger.txt"), **(env or {})}
    for key in ("KILL_AT", "KILL_BEFORE", "KILL_IN_TOOL", "APPEND_LOG"):
        if key not in (env or {}):
            full_env.pop(key, None)
    return subprocess.run(
        [sys.executable, "-m", "mkl_notebook.cli", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=full_env,
        check=False,
        timeout=timeout,
    )


def _status(completed: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    assert completed.stdout.strip(), completed.stderr
    return json.loads(completed.stdout.strip().splitlines()[-1])


def _ledger(cwd: Path) -> list[str]:
    path = cwd / "ledger.txt"
    return path.read_text(encoding="utf-8").splitlines() if path.exists() else []


def _write_case(folder: Path, name: str, made: tuple[str, dict[str, Any]], tools: tuple[str, str]) -> Path:
    """``folder`` with the machine ``name``.mkl and its script (``made``: source and script), and a tools file
    (``tools``: its name and text)."""
    folder.mkdir(parents=True, exist_ok=True)
    source, script = made
    (folder / f"{name}.mkl").write_text(source, encoding="utf-8")
    (folder / f"{name}.script.json").write_text(json.dumps(script), encoding="utf-8")
    (folder / tools[0]).write_text(tools[1], encoding="utf-8")
    return folder


def _setup(folder: Path) -> Path:
    return _write_case(folder, "long", _long_machine(), ("tools.py", TOOLS_PY))


RUN_LONG = ("run", "long.mkl", "--id", "crash", "--script", "long.script.json", "--tools", "tools.py", "--quiet")
RESUME_LONG = ("resume", "--id", "crash", "--script", "long.script.json", "--tools", "tools.py", "--quiet")


@pytest.fixture(scope="module")
def baseline(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """One uninterrupted run: its status line, its ledger and the list of its journal appends."""
    folder = _setup(tmp_path_factory.mktemp("baseline"))
    completed = _mkl(folder, *RUN_LONG, env={"APPEND_LOG": str(folder / "appends.jsonl")})
    assert completed.returncode == 0, completed.stderr
    appends = [json.loads(line) for line in (folder / "appends.jsonl").read_text().splitlines()]
    return {"status": _status(completed), "ledger": _ledger(folder), "appends": appends}


def test_the_long_machine_is_long(baseline: dict[str, Any]) -> None:
    status, appends = baseline["status"], baseline["appends"]
    assert status["status"] == "done"
    assert baseline["ledger"] == RECORD_KEYS
    steps = [a for a in appends if a["t"] == "answer"]
    assert len(RECORD_KEYS) == 6 and len(steps) >= 38
    assert [a["t"] for a in appends[-2:]] == ["finish", "sign"]  # the run's end, then its author's signature
    assert status["calls"] == {"made": len(steps), "replayed": 0}
    assert status["result"].startswith("k00:answer 00|") and "k04:s04=answer 03" in status["result"]


def _sample(total: int, count: int) -> list[int]:
    if total <= count:
        return list(range(1, total + 1))
    return sorted({1 + round(i * (total - 1) / (count - 1)) for i in range(count)})


def _crash_and_recover(folder: Path, kill: dict[str, str], recover: tuple[str, ...]) -> dict[str, Any]:
    _setup(folder)
    crashed = _mkl(folder, *RUN_LONG, env=kill)
    recovered = _mkl(folder, *recover)
    return {
        "crashed": crashed,
        "recovered": recovered,
        "ledger": _ledger(folder),
        "records": SQLiteStore(folder / ".mkl" / "runs.sqlite").read("crash"),
    }


def test_kill_at_any_append_then_recover_gives_the_same_run(baseline: dict[str, Any], tmp_path: Path) -> None:
    """Kill right AFTER the Nth append is durable, for every append of the run.

    What is asserted, and why: a tool's effect happens between two appends, and its
    answer record is appended before the process can reach the next kill point; so
    a kill right after an append never separates an effect from its record, and
    every idempotent tool key appears in the ledger exactly once.  The recovered
    run has the uninterrupted run's result and usage, asks only for what was
    not yet journaled (replayed == answers among the first N appends), and made +
    replayed equals the uninterrupted run's number of calls.
    """
    appends = baseline["appends"]
    expected = baseline["status"]
    points = list(range(1, len(appends) + 1))
    assert len(points) >= 30

    def scenario(n: int) -> tuple[int, dict[str, Any]]:
        finished = any(a["t"] == "finish" for a in appends[:n])  # killed after the finish, before the signature
        recover = RESUME_LONG if n % 2 and not finished else RUN_LONG
        return n, _crash_and_recover(tmp_path / f"at-{n}", {"KILL_AT": str(n)}, recover)

    with ThreadPoolExecutor(max_workers=3) as pool:
        outcomes = list(pool.map(scenario, points))
    for n, outcome in outcomes:
        crashed, recovered = outcome["crashed"], outcome["recovered"]
        assert crashed.returncode == -signal.SIGKILL, (n, crashed.stderr)
        assert recovered.returncode == 0, (n, recovered.stderr)
        status = _status(recovered)
        assert (status["status"], status["result"], status["usage"]) == (
            "done",
            expected["result"],
            expected["usage"],
        ), n
        durable_answers = sum(1 for a in appends[:n] if a["t"] == "answer")
        assert status["calls"]["replayed"] == durable_answers, n
        assert status["calls"]["made"] + status["calls"]["replayed"] == expected["calls"]["made"], n
        counts = Counter(outcome["ledger"])
        assert {key: counts[key] for key in RECORD_KEYS} == dict.fromkeys(RECORD_KEYS, 1), n
        assert sum(1 for r in outcome["records"] if r["t"] == "start") == 1


def test_kill_between_a_tool_effect_and_its_record_repeats_only_that_call(
    baseline: dict[str, Any], tmp_path: Path
) -> None:
    """Kill at the Nth append BEFORE it is written, for every append that carries a `record` answer.

    The tool's effect already happened but its answer never reached the journal: the
    call in flight is lost, so recovery performs it again.  Exactly that ledger key
    appears twice (never more); every other key once; the result is unchanged.
    A kill before a non-tool append (the first one, a judge, the finish record)
    repeats no effect at all.
    """
    appends = baseline["appends"]
    expected = baseline["status"]
    tool_points = {a["n"]: a["pos"] for a in appends if a["t"] == "answer" and a["name"] == "record"}
    assert len(tool_points) == len(RECORD_KEYS)
    other_points = [1, next(a["n"] for a in appends if a["kind"] == "judge"), len(appends)]

    def scenario(n: int) -> tuple[int, dict[str, Any]]:
        return n, _crash_and_recover(tmp_path / f"before-{n}", {"KILL_BEFORE": str(n)}, RUN_LONG)

    with ThreadPoolExecutor(max_workers=3) as pool:
        outcomes = list(pool.map(scenario, [*tool_points, *other_points]))
    for n, outcome in outcomes:
        assert outcome["crashed"].returncode == -signal.SIGKILL, (n, outcome["crashed"].stderr)
        assert outcome["recovered"].returncode == 0, (n, outcome["recovered"].stderr)
        status = _status(outcome["recovered"])
        assert (status["status"], status["result"], status["usage"]) == (
            "done",
            expected["result"],
            expected["usage"],
        ), n
        counts = Counter(outcome["ledger"])
        repeated = tool_points[n].split("/")[1].split(":")[1].split("#")[0] if n in tool_points else None
        assert {key: counts[key] for key in RECORD_KEYS} == {key: 2 if key == repeated else 1 for key in RECORD_KEYS}, n
        answers = [r["pos"] for r in outcome["records"] if r["t"] == "answer"]
        assert len(answers) == len(set(answers)) == expected["calls"]["made"], n


# -- non-idempotent tools: in doubt --------------------------------------------------------------

PAY = """
machine: pay
entry: quote
budget: 10
result: receipt
states:
  quote:
    structure: an amount
    prompt: "quote the amount"
    output: amount
    gates:
      - { when: otherwise, then: ok, to: pay }
  pay:
    tool: charge
    idempotent: false
    input: { amount: "{{amount}}" }
    output: receipt
    gates:
      - { when: otherwise, then: ok, to: thank }
  thank:
    structure: one line
    prompt: "thank the customer for {{receipt}}"
    output: thanks
    gates:
      - { when: otherwise, then: ok, to: END }
"""
PAY_SCRIPT = {"llm": {"produce": {"quote": "42", "thank": "thanks!"}}}
RESUME_PAY = ("resume", "--id", "P", "--script", "pay.script.json", "--tools", "tools.py", "--quiet")


def _in_doubt_run(folder: Path) -> list[subprocess.CompletedProcess[str]]:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "pay.mkl").write_text(PAY, encoding="utf-8")
    (folder / "pay.script.json").write_text(json.dumps(PAY_SCRIPT), encoding="utf-8")
    (folder / "tools.py").write_text(TOOLS_PY, encoding="utf-8")
    crashed = _mkl(
        folder,
        "run",
        "pay.mkl",
        "--id",
        "P",
        "--script",
        "pay.script.json",
        "--tools",
        "tools.py",
        env={"KILL_IN_TOOL": "1"},
    )
    doubt = _mkl(folder, *RESUME_PAY)
    again = _mkl(folder, *RESUME_PAY)
    return [crashed, doubt, again]


@pytest.mark.parametrize("resolution", ["completed=RCPT-7", "retry", "abort"])
def test_a_kill_inside_a_non_idempotent_tool_is_in_doubt_until_resolved(tmp_path: Path, resolution: str) -> None:
    crashed, doubt, again = _in_doubt_run(tmp_path)
    assert crashed.returncode == -signal.SIGKILL
    assert _ledger(tmp_path) == ["charge 42"]

    assert doubt.returncode == 4, doubt.stderr
    status = _status(doubt)
    assert status["status"] == "in_doubt" and status["at"] == "pay"
    assert status["in_doubt"]["tool"] == "charge"
    assert status["calls"]["made"] == 0
    assert _ledger(tmp_path) == ["charge 42"]  # no second call
    assert again.returncode == 2 and "--resolve" in again.stderr and "Traceback" not in again.stderr

    settled = _mkl(tmp_path, *RESUME_PAY, "--resolve", resolution)
    final = _status(settled)
    if resolution.startswith("completed="):
        assert settled.returncode == 0, settled.stderr
        assert final["result"] == "RCPT-7"
        assert _ledger(tmp_path) == ["charge 42"]
        assert final["calls"]["made"] == 1  # only `thank`, never the tool
    elif resolution == "retry":
        assert settled.returncode == 0, settled.stderr
        assert final["result"] == "receipt-42"
        assert _ledger(tmp_path) == ["charge 42", "charge 42"]
    else:
        assert settled.returncode == 1, settled.stderr
        assert final["status"] == "halt" and final["at"] == "pay"
        assert "charge" in final["error"] and final["error"].startswith("state-error")
        assert _ledger(tmp_path) == ["charge 42"]
    records = SQLiteStore(tmp_path / ".mkl" / "runs.sqlite").read("P")
    assert [r["action"] for r in records if r["t"] == "resolve"] == [resolution.partition("=")[0]]
    # the settled run stays settled: a re-run replays it without touching the tool
    rerun = _mkl(tmp_path, "run", "pay.mkl", "--id", "P", "--script", "pay.script.json", "--tools", "tools.py")
    assert rerun.returncode == settled.returncode
    assert _status(rerun)["calls"]["made"] == 0
    assert _status(rerun)["result"] == final["result"]
    assert len(_ledger(tmp_path)) == (2 if resolution == "retry" else 1)


# -- one writer per run -------------------------------------------------------------------------

SLOW = """
machine: slowpoke
entry: a
budget: 10
result: b_out
states:
  a:
    structure: s
    prompt: "first"
    output: a_out
    gates:
      - { when: otherwise, then: ok, to: wait }
  wait:
    tool: slow
    input: { x: "{{a_out}}" }
    output: waited
    gates:
      - { when: otherwise, then: ok, to: b }
  b:
    structure: s
    prompt: "second"
    output: b_out
    gates:
      - { when: otherwise, then: ok, to: END }
"""
SLOW_SCRIPT = {"llm": {"produce": {"first": "one", "second": "two"}}}
SLOW_ARGS = ("--script", "slow.script.json", "--tools", "tools.py")


def _suspended_slow_run(folder: Path) -> list[dict[str, Any]]:
    (folder / "slow.mkl").write_text(SLOW, encoding="utf-8")
    (folder / "slow.script.json").write_text(json.dumps(SLOW_SCRIPT), encoding="utf-8")
    (folder / "tools.py").write_text(TOOLS_PY, encoding="utf-8")
    started = _mkl(folder, "run", "slow.mkl", "--id", "S", *SLOW_ARGS, "--suspend", "--max-steps", "1")
    assert started.returncode == 3, started.stderr
    assert _status(started)["at"] == "wait"
    return SQLiteStore(folder / ".mkl" / "runs.sqlite").read("S")


def _popen(folder: Path, *args: str) -> subprocess.Popen[str]:
    env = {key: value for key, value in os.environ.items() if key not in ("KILL_AT", "KILL_BEFORE", "APPEND_LOG")}
    env["LEDGER"] = str(folder / "ledger.txt")
    env["RELEASE"] = str(folder / "release")
    return subprocess.Popen(
        [sys.executable, "-m", "mkl_notebook.cli", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=folder,
        env=env,
    )


def _in_slow_tool(folder: Path) -> list[int]:
    """The pids that have entered the `slow` tool (complete ledger lines only)."""
    path = folder / "ledger.txt"
    lines = path.read_text(encoding="utf-8").split("\n")[:-1] if path.exists() else []
    return [int(line.split()[-1]) for line in lines if line.startswith("slow ")]


def _wait_until(condition: Any, what: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out after {timeout}s waiting until {what}"
        time.sleep(0.02)


def _settled(procs: list[subprocess.Popen[str]], folder: Path) -> bool:
    """Every process either sits inside the slow tool (holding on to the run) or has exited."""
    inside = set(_in_slow_tool(folder))
    return all(proc.pid in inside or proc.poll() is not None for proc in procs)


def test_two_processes_resuming_one_run_one_wins_the_other_is_refused(tmp_path: Path) -> None:
    before = _suspended_slow_run(tmp_path)
    procs = [_popen(tmp_path, "resume", "--id", "S", *SLOW_ARGS, "--max-steps", "10") for _ in range(2)]
    try:
        _wait_until(lambda: _settled(procs, tmp_path), "each resumer is inside the slow tool or has exited")
        # the winner is held inside the tool, so the two really overlapped: the loser was refused meanwhile
        inside = _in_slow_tool(tmp_path)
        assert len(inside) == 1, f"both resumers advanced the run at once: {inside}"
        running = [proc.pid for proc in procs if proc.poll() is None]
        assert running == inside, [(proc.pid, proc.poll()) for proc in procs]
    finally:
        (tmp_path / "release").touch()  # let the tool return, whatever happened
    results = [(proc, *proc.communicate(timeout=60)) for proc in procs]
    codes = sorted(proc.returncode for proc, _, _ in results)
    assert codes == [0, 2], [(p.returncode, err) for p, _, err in results]
    (winner,) = [r for r in results if r[0].returncode == 0]
    (loser,) = [r for r in results if r[0].returncode == 2]
    assert [winner[0].pid] == running
    assert "already being advanced" in loser[2]
    assert "Traceback" not in loser[2]
    assert len(loser[2].strip().splitlines()) == 1
    assert json.loads(winner[1].strip().splitlines()[-1])["result"] == "two"

    after = SQLiteStore(tmp_path / ".mkl" / "runs.sqlite").read("S")
    assert after[: len(before)] == before
    added = after[len(before) :]
    assert [r["t"] for r in added].count("resume") == 1  # the loser journaled nothing, not even its budget
    assert [r["t"] for r in added if r["t"] in ("finish", "suspend")] == ["finish"]
    assert [r["pos"] for r in added if r["t"] == "answer"] == ["root/1:wait#1/tool", "root/2:b#1/produce"]
    assert len([line for line in _ledger(tmp_path) if line.startswith("slow")]) == 1


def test_starting_a_run_fresh_while_another_process_advances_it_is_refused(tmp_path: Path) -> None:
    before = _suspended_slow_run(tmp_path)
    resumer = _popen(tmp_path, "resume", "--id", "S", *SLOW_ARGS, "--max-steps", "10")
    try:
        _wait_until(lambda: _settled([resumer], tmp_path), "the resumer is inside the slow tool")
        assert _in_slow_tool(tmp_path) == [resumer.pid], resumer.poll()  # it holds the run, inside the tool
        fresh = _popen(tmp_path, "run", "slow.mkl", "--id", "S", *SLOW_ARGS, "--fresh")
        _wait_until(lambda: _settled([resumer, fresh], tmp_path), "the --fresh run is refused or in the tool")
        assert resumer.poll() is None  # still inside the tool while --fresh was turned away
        assert _in_slow_tool(tmp_path) == [resumer.pid]
    finally:
        (tmp_path / "release").touch()  # let the tool return, whatever happened
    fresh_out, fresh_err = fresh.communicate(timeout=60)
    _, err = resumer.communicate(timeout=60)
    assert resumer.returncode == 0, err
    assert fresh.returncode == 2, fresh_out + fresh_err
    assert "already being advanced" in fresh_err and "Traceback" not in fresh_err
    after = SQLiteStore(tmp_path / ".mkl" / "runs.sqlite").read("S")
    assert after[: len(before)] == before  # the refused --fresh did not wipe the journal under the resumer
    assert after[-2]["t"] == "finish" and after[-2]["status"] == "done" and after[-1]["t"] == "sign"
    seqs = [
        seq
        for (seq,) in sqlite3.connect(tmp_path / ".mkl" / "runs.sqlite").execute(
            "SELECT seq FROM records WHERE run_id = 'S' ORDER BY seq"
        )
    ]
    assert seqs == list(range(len(seqs)))


def test_a_kill_during_a_retry_is_in_doubt_again_and_says_it_was_the_retry(tmp_path: Path) -> None:
    _in_doubt_run(tmp_path)
    crashed = _mkl(tmp_path, *RESUME_PAY, "--resolve", "retry", env={"KILL_IN_TOOL": "1"})
    assert crashed.returncode == -signal.SIGKILL
    assert _ledger(tmp_path) == ["charge 42", "charge 42"]
    again = _mkl(tmp_path, *RESUME_PAY)
    assert again.returncode == 2 and again.stderr.count("\n") == 1
    assert "tool 'charge' at state 'pay' may or may not have run (the retry chosen for it was started" in again.stderr
    settled = _mkl(tmp_path, *RESUME_PAY, "--resolve", "completed=RCPT-8")
    assert settled.returncode == 0, settled.stderr
    assert _status(settled)["result"] == "RCPT-8" and _ledger(tmp_path) == ["charge 42", "charge 42"]


def test_a_kill_after_a_retried_call_was_recorded_goes_on_without_asking_again(tmp_path: Path) -> None:
    """The retry's call finished and was journaled (the 3rd append: resolve, intent, its result) before the
    kill: the call is settled, so the run goes on from there and the tool is not called a third time."""
    _in_doubt_run(tmp_path)
    crashed = _mkl(tmp_path, *RESUME_PAY, "--resolve", "retry", env={"KILL_AT": "3"})
    assert crashed.returncode == -signal.SIGKILL
    assert _ledger(tmp_path) == ["charge 42", "charge 42"]
    refused = _mkl(tmp_path, *RESUME_PAY, "--resolve", "retry")
    assert refused.returncode == 2 and "is settled already; resume it without --resolve" in refused.stderr
    resumed = _mkl(tmp_path, *RESUME_PAY)
    assert resumed.returncode == 0, resumed.stderr
    assert _status(resumed)["result"] == "receipt-42"
    assert _ledger(tmp_path) == ["charge 42", "charge 42"]  # no third charge


# -- answers committed together: a fan-out's concurrent branches ------------------------------------

BRANCHES = 40
FANOUT_TOOLS_PY = r"""
import os
import signal
import threading
import time

from mkl_notebook.durable import replay
from mkl_notebook.providers import scripted

USED = os.environ["USED_LOG"]
_lock = threading.Lock()
_used = 0

# Every model call takes 20 ms, so the branches' answers come back together and wait on each other's commits.
_ask = scripted.ScriptedOracle.ask


def _slow_ask(self, request):
    if request.kind == "produce":
        time.sleep(0.02)
    return _ask(self, request)


scripted.ScriptedOracle.ask = _slow_ask


def _using(method):
    # What the replay oracle returns is what the engine goes on with: note its position (durably, in a
    # file of its own), then die at the chosen answer.
    def wrapped(self, request, *args):
        global _used
        answer = method(self, request, *args)
        with _lock:
            _used += 1
            with open(USED, "a", encoding="utf-8") as handle:
                handle.write(request.position + "\n")
                handle.flush()
                os.fsync(handle.fileno())
            if os.environ.get("KILL_USED") == str(_used):
                os.kill(os.getpid(), signal.SIGKILL)
        return answer

    return wrapped


replay.ReplayOracle.ask = _using(replay.ReplayOracle.ask)
replay.ReplayOracle.stream = _using(replay.ReplayOracle.stream)
"""


def _fanout_machine() -> tuple[str, dict[str, Any]]:
    """One state over 40 items, run 32 at a time, then one that combines their summaries."""
    items = ", ".join(f'"it{i:02d}x"' for i in range(BRANCHES))
    source = f"""
machine: fan
entry: map
budget: 60
result: all
context: {{ items: [{items}] }}
states:
  map:
    structure: a summary
    prompt: "summarise {{{{item}}}}"
    over: "{{{{items}}}}"
    output: parts
    gates:
      - {{ when: otherwise, then: ok, to: reduce }}
  reduce:
    structure: one summary
    prompt: "combine {{{{parts}}}}"
    output: all
    gates:
      - {{ when: otherwise, then: ok, to: END }}
"""
    produce = {f"it{i:02d}x": f"summary {i:02d}" for i in range(BRANCHES)}
    produce["combine"] = "all summarised"
    return source, {"llm": {"produce": produce, "stream": 0.001}}


RUN_FAN = ("run", "fan.mkl", "--id", "fan", "--script", "fan.script.json", "--tools", "fan_tools.py", "--quiet")


def _fan_folder(folder: Path) -> Path:
    return _write_case(folder, "fan", _fanout_machine(), ("fan_tools.py", FANOUT_TOOLS_PY))


def test_every_answer_a_fan_out_used_is_in_the_journal_after_a_kill(tmp_path: Path) -> None:
    """Kill the process as the engine takes its Nth answer, while other branches' answers are being committed.

    Appends that arrive together share one commit, but none returns before its commit: so every answer
    the engine went on with is in the journal after the kill, each position once; the run resumed from
    it asks only for the rest and ends as an uninterrupted run does.
    """
    answers = BRANCHES + 1
    baseline = _fan_folder(tmp_path / "baseline")
    whole = _mkl(baseline, *RUN_FAN, env={"USED_LOG": str(baseline / "used.txt")})
    assert whole.returncode == 0, whole.stderr
    expected = _status(whole)
    assert expected["calls"] == {"made": answers, "replayed": 0}

    def scenario(n: int) -> tuple[int, dict[str, Any]]:
        folder = _fan_folder(tmp_path / f"used-{n}")
        log = str(folder / "used.txt")
        crashed = _mkl(folder, *RUN_FAN, env={"USED_LOG": log, "KILL_USED": str(n)})
        journal = SQLiteStore(folder / ".mkl" / "runs.sqlite").read("fan")
        used = (folder / "used.txt").read_text(encoding="utf-8").split()
        recovered = _mkl(folder, *RUN_FAN, env={"USED_LOG": log})
        records = SQLiteStore(folder / ".mkl" / "runs.sqlite").read("fan")
        return n, {"crashed": crashed, "journal": journal, "used": used, "recovered": recovered, "records": records}

    with ThreadPoolExecutor(max_workers=3) as pool:
        outcomes = list(pool.map(scenario, [1, 2, 8, 17, 25, 33, 39, 40]))
    for n, outcome in outcomes:
        assert outcome["crashed"].returncode == -signal.SIGKILL, (n, outcome["crashed"].stderr)
        journaled = [r["pos"] for r in outcome["journal"] if r["t"] == "answer"]
        assert len(journaled) == len(set(journaled)), n
        assert len(outcome["used"]) == n
        missing = set(outcome["used"]) - set(journaled)
        assert not missing, f"kill at {n}: the engine used answers that are not in the journal: {sorted(missing)}"
        recovered = outcome["recovered"]
        assert recovered.returncode == 0, (n, recovered.stderr)
        status = _status(recovered)
        assert (status["status"], status["result"]) == ("done", expected["result"]), n
        assert status["calls"]["replayed"] == len(journaled), n
        assert status["calls"]["made"] + status["calls"]["replayed"] == answers, n
        positions = [r["pos"] for r in outcome["records"] if r["t"] == "answer"]
        assert len(positions) == len(set(positions)) == answers, n


def test_an_in_doubt_call_settled_as_completed_without_a_value_is_never_made_again(tmp_path: Path) -> None:
    """Through the API a person may say the call happened without saying what it returned (value None): it
    happened all the same, so the tool is not called again. (The API is driven in a subprocess, where the
    tools file registers its tool.)"""
    crashed, doubt, _ = _in_doubt_run(tmp_path)
    assert crashed.returncode == -signal.SIGKILL and doubt.returncode == 4
    assert _ledger(tmp_path) == ["charge 42"]
    resume = [sys.executable, "-c", (
        "import sys; from mkl_notebook.app.settings import Settings; from mkl_notebook.app.workspace import Workspace;"
        "from mkl_notebook.durable.runs import Resolution;"
        "ws = Workspace(Settings(store='.mkl/runs.sqlite'), follow_files=True); ws.equipment.load_tools('tools.py');"
        "out = ws.resume('P', script='pay.script.json', resolve=Resolution('completed'));"
        "print(out.result.status)"
    )]  # fmt: skip
    done = subprocess.run(resume, cwd=tmp_path, capture_output=True, text=True, env={**os.environ}, check=False)
    assert done.returncode == 0 and done.stdout.split() == ["done"], done.stderr[-2000:]
    assert _ledger(tmp_path) == ["charge 42"]  # settled as made: never made again
