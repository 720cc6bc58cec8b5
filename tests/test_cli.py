"""The `mkl` command as a user types it: exit codes, one-line errors, a JSON status line."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"


@pytest.fixture(autouse=True)
def _in_a_scratch_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Runs write their journal to .mkl/ in the working folder: keep it out of the checkout."""
    monkeypatch.chdir(tmp_path)


def mkl(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mkl_notebook.cli", *args], capture_output=True, text=True, cwd=cwd, check=False
    )


def status_line(completed: subprocess.CompletedProcess[str]) -> dict:
    return json.loads(completed.stdout.strip().splitlines()[-1])


@pytest.fixture
def broken(tmp_path: Path) -> Path:
    path = tmp_path / "broken.mkl"
    path.write_text(
        "machine: b\nentry: a\nbudget: 3\nstates:\n  a:\n    tool: t\n    tier: fast\n"
        "    output: o\n    gates: [{ when: otherwise, then: ok, to: nowhere }]\n",
        encoding="utf-8",
    )
    return path


def test_check_clean_machine_exits_zero() -> None:
    completed = mkl("check", str(EXAMPLES / "refund.mkl"))
    assert completed.returncode == 0
    assert status_line(completed)["errors"] == 0


def test_check_reports_errors_with_line_numbers(broken: Path) -> None:
    completed = mkl("check", str(broken))
    assert completed.returncode == 1  # findings exit 1, as mklang, ruff and mypy (DESIGN.md's contract)
    assert f"{broken}:7:5: error:" in completed.stdout  # `tier` on a tool state
    assert "nowhere" in completed.stdout
    assert status_line(completed)["status"] == "errors"


def test_check_unreadable_file_exits_two(tmp_path: Path) -> None:
    completed = mkl("check", str(tmp_path / "missing.mkl"))
    assert completed.returncode == 2
    assert "Traceback" not in completed.stderr
    assert "missing.mkl" in completed.stderr


def test_run_offline_to_done() -> None:
    completed = mkl(
        "run",
        str(EXAMPLES / "refund.mkl"),
        "--script",
        str(EXAMPLES / "refund.script.yaml"),
        "--set",
        "ticket=Broken parcel A-1001",
    )
    assert completed.returncode == 0, completed.stderr
    status = status_line(completed)
    assert status["status"] == "done"
    assert "approved" in status["result"]
    assert status["usage"] == {"input_tokens": 240, "output_tokens": 80}


def test_run_with_hitl_suspends_with_the_authored_question() -> None:
    completed = mkl(
        "run",
        str(EXAMPLES / "refund.mkl"),
        "--script",
        str(EXAMPLES / "refund.script.yaml"),
        "--hitl",
        "--set",
        "ticket=Broken parcel",
    )
    assert completed.returncode == 3
    status = status_line(completed)
    assert status["status"] == "suspended"
    assert status["ask"] == "The draft promises a refund. Approve sending it?"
    assert status["reply_to"] == "approval"
    assert status["at"] == "send"


@pytest.mark.parametrize(
    ("reply", "result", "last"),
    [
        ("approve", "Hello! Your order A-1001 qualifies: we will refund it today. (approved)", "send"),
        ("reject", "Hello! A colleague will look at order A-1001 and write to you again shortly.", "withhold"),
        ("not yet", "Hello! A colleague will look at order A-1001 and write to you again shortly.", "withhold"),
    ],
)
def test_the_refund_example_sends_the_refund_only_when_approved(
    tmp_path: Path, reply: str, result: str, last: str
) -> None:
    """The README's first example, answered from the terminal: approve sends the refund; reject (or any other
    reply) withholds it, and the result says so instead of promising the refund."""
    script = str(EXAMPLES / "refund.script.yaml")
    asked = mkl(
        "run", str(EXAMPLES / "refund.mkl"), "--script", script, "--hitl", "--set", "ticket=Broken", cwd=tmp_path
    )
    status = status_line(asked)
    answered = mkl(
        "resume", "--id", status["run"], "--script", script, "--question", status["question_id"], "--reply", reply,
        cwd=tmp_path,
    )  # fmt: skip
    done = status_line(answered)
    assert (answered.returncode, done["status"], done["result"]) == (0, "done", result), answered.stderr
    traced = mkl("trace", "--id", status["run"], cwd=tmp_path).stdout
    assert (" withhold " in traced) is (last == "withhold"), traced  # the withheld reply is the withhold state's
    assert ("refund it today" in done["result"]) is (reply == "approve")


def test_run_halt_exits_one(tmp_path: Path) -> None:
    machine = tmp_path / "loop.mkl"
    machine.write_text(
        "mklang: '0.4'\nmachine: loop\nentry: a\nbudget: 3\nstates:\n  a:\n    structure: s\n"
        "    prompt: again\n    output: o\n    gates: [{ when: otherwise, then: ok, to: a }]\n"
    )
    script = tmp_path / "script.yaml"
    script.write_text("llm: { produce: [] }\n")
    completed = mkl("run", str(machine), "--script", str(script))
    assert completed.returncode == 1
    status = status_line(completed)
    assert status["error"] == "budget-exhausted"
    assert "Most visited state: a (3 entries)" in completed.stdout


def test_run_budget_suspends_with_suspend_flag(tmp_path: Path) -> None:
    machine = tmp_path / "loop.mkl"
    machine.write_text(
        "machine: loop\nentry: a\nbudget: 2\nstates:\n  a:\n    structure: s\n"
        "    prompt: again\n    output: o\n    gates: [{ when: otherwise, then: ok, to: a }]\n"
    )
    script = tmp_path / "script.yaml"
    script.write_text("llm: { produce: [] }\n")
    completed = mkl("run", str(machine), "--script", str(script), "--suspend")
    assert completed.returncode == 3
    assert status_line(completed)["error"] == "budget-exhausted"


def test_more_steps_at_resume_reach_the_called_machine_that_ran_out(tmp_path: Path) -> None:
    (tmp_path / "child.mkl").write_text(
        "machine: child\nentry: a\nbudget: 1\nstates:\n"
        "  a:\n    structure: s\n    prompt: one\n    output: o\n    gates: [{ when: otherwise, then: ok, to: b }]\n"
        "  b:\n    structure: s\n    prompt: two\n    output: o\n    gates: [{ when: otherwise, then: ok, to: END }]\n"
    )
    (tmp_path / "parent.mkl").write_text(
        "machine: parent\nentry: c\nbudget: 5\nstates:\n  c:\n    call: child\n"
        "    output: sub\n    gates: [{ when: otherwise, then: ok, to: END }]\n"
    )
    (tmp_path / "script.yaml").write_text("llm: { produce: [first, second] }\n")
    started = mkl("run", "parent.mkl", "--id", "N", "--script", "script.yaml", "--suspend")
    assert started.returncode == 3
    assert "Suspended (budget-exhausted): waiting for more steps (resumes at b in called machine child)." in (
        started.stdout
    )
    assert (
        "mkl resume --id N --script script.yaml --max-steps N  # N: the new step budget of the called machine 'child'"
        in started.stdout
    )
    assert status_line(started)["called_machine"] == "child"
    lines = started.stdout.splitlines()
    open_call = next(line for line in lines if line.startswith("—     c"))
    assert open_call.endswith("(suspended inside child)")
    assert lines[lines.index(open_call) + 1] == "    ↳ sub-run trace — 1 step"  # what the child did before it ran out
    resumed = mkl("resume", "--id", "N", "--script", "script.yaml", "--max-steps", "2")
    assert resumed.returncode == 0, resumed.stdout
    assert status_line(resumed)["result"] == "second"
    assert status_line(resumed)["calls"] == {"made": 1, "replayed": 1}
    assert "called_machine" not in status_line(resumed)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--set", "novalue"], "--set expects KEY=VALUE"),
        (["--input", "{not json"], "--input is not valid JSON"),
        (["--input", "[1, 2]"], "--input must be a mapping of context keys (a JSON object or a dict), not list"),
        (["--max-steps", "0"], "at least 1"),
    ],
)
def test_run_usage_errors_are_one_line(args: list[str], message: str) -> None:
    completed = mkl("run", str(EXAMPLES / "refund.mkl"), "--script", str(EXAMPLES / "refund.script.yaml"), *args)
    assert completed.returncode == 2
    assert message in completed.stderr
    assert "Traceback" not in completed.stderr


def test_run_without_a_model_says_what_to_do() -> None:
    completed = mkl("run", str(EXAMPLES / "refund.mkl"))
    assert completed.returncode == 2
    assert "--script" in completed.stderr
    assert "Traceback" not in completed.stderr


def test_run_refuses_an_invalid_machine_with_its_line(broken: Path) -> None:
    completed = mkl("run", str(broken), "--script", str(EXAMPLES / "refund.script.yaml"))
    assert completed.returncode == 2
    assert "line 7" in completed.stderr
    assert "'tier'" in completed.stderr
    assert "Traceback" not in completed.stderr


def test_run_refuses_yaml_that_does_not_parse(tmp_path: Path) -> None:
    path = tmp_path / "bad.mkl"
    path.write_text("machine: x\nstates: [unclosed\n")
    completed = mkl("run", str(path), "--script", str(EXAMPLES / "refund.script.yaml"))
    assert completed.returncode == 2
    assert "does not parse" in completed.stderr
    assert "line " in completed.stderr


def test_scenarios_pass() -> None:
    completed = mkl("test", str(EXAMPLES / "refund.mkl"), "--script", str(EXAMPLES / "refund.test.yaml"))
    assert completed.returncode == 0
    assert completed.stdout.splitlines() == [
        "PASS refund-escalates-for-approval",
        "PASS missing-order-number-is-repaired",
        "PASS a-rejected-refund-is-withheld",
        "3 passed, 0 failed",
    ]


def test_failing_scenario_says_why(tmp_path: Path) -> None:
    scenarios = tmp_path / "s.test.yaml"
    scenarios.write_text(
        "scenarios:\n  - name: wrong\n    input: { ticket: x }\n    tools: { order_lookup: ['{}'] }\n"
        "    expect: { status: halt }\n  - name: no-expect\n"
    )
    completed = mkl("test", str(EXAMPLES / "refund.mkl"), "--script", str(scenarios))
    assert completed.returncode == 1
    lines = completed.stdout.splitlines()
    assert lines[0].startswith("FAIL wrong: status: expected 'halt', got 'done'")
    assert lines[1].startswith("FAIL no-expect:")
    assert lines[-1] == "0 passed, 2 failed"


def test_test_usage_error(tmp_path: Path) -> None:
    completed = mkl("test", str(EXAMPLES / "refund.mkl"))
    assert completed.returncode == 2
    assert "--script" in completed.stderr
    missing = mkl("test", "--case", str(tmp_path / "nope.yaml"))
    assert missing.returncode == 2
    assert "Traceback" not in missing.stderr


def test_sibling_machines_form_the_registry(tmp_path: Path) -> None:
    (tmp_path / "child.mkl").write_text(
        "machine: child\nentry: s\nbudget: 2\nstates:\n  s:\n    structure: s\n"
        "    prompt: inner {{topic}}\n    output: o\n"
        "    gates: [{ when: otherwise, then: ok, to: END }]\n"
    )
    (tmp_path / "parent.mkl").write_text(
        "machine: parent\nentry: c\nbudget: 2\nstates:\n  c:\n    call: child\n"
        "    input: { topic: cats }\n    output: sub\n"
        "    gates: [{ when: otherwise, then: ok, to: END }]\n"
    )
    (tmp_path / "p.test.yaml").write_text(
        "scenarios:\n  - name: calls-child\n"
        "    llm: { produce: { 'inner cats': meow } }\n"
        "    expect: { status: done, result: meow }\n"
    )
    completed = mkl("test", str(tmp_path / "parent.mkl"), "--script", str(tmp_path / "p.test.yaml"))
    assert completed.returncode == 0, completed.stdout


def test_a_model_without_its_key_says_which_variable_to_set(tmp_path: Path) -> None:
    env = {
        key: value for key, value in os.environ.items() if not key.startswith("MKL_") and not key.endswith("_API_KEY")
    }
    completed = subprocess.run(
        [
            sys.executable,
            "-m",
            "mkl_notebook.cli",
            "run",
            str(EXAMPLES / "refund.mkl"),
            "--model",
            "openai/gpt-4o-mini",
            "--set",
            "ticket=x",
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        check=False,
    )
    assert completed.returncode == 2
    assert "OPENAI_API_KEY" in completed.stderr
    assert "Traceback" not in completed.stderr
    assert len(completed.stderr.strip().splitlines()) == 1


def test_the_trace_marks_the_steps_the_journal_answered(tmp_path: Path) -> None:
    """Resumed with more steps, the first steps replay from the journal and the trace says which."""
    data = Path(__file__).resolve().parent.parent / "notebooks" / "data"
    started = mkl(
        "run", str(data / "loop.mkl"), "--script", str(data / "loop.script.yaml"), "--id", "loop",
        "--suspend", "--max-steps", "3", "--set", "product=kettle",
    )  # fmt: skip
    assert status_line(started)["status"] == "suspended"
    assert "[replayed from the journal]" not in started.stdout  # every step was new
    resumed = mkl("resume", "--id", "loop", "--max-steps", "6", "--script", str(data / "loop.script.yaml"))
    rows = [line for line in resumed.stdout.splitlines() if re.match(r"\d+ +(write|critique) ", line)]
    assert [row.split()[0] for row in rows] == ["1", "2", "3", "4", "5", "6"]
    assert ["[replayed from the journal]" in row for row in rows] == [True, True, True, False, False, False]
    assert "replayed: the answers came from the run's journal" in resumed.stdout  # the legend says it once
    again = mkl("resume", "--id", "loop", "--max-steps", "6", "--script", str(data / "loop.script.yaml"))
    again_rows = [line for line in again.stdout.splitlines() if re.match(r"\d+ +(write|critique) ", line)]
    assert again_rows and all("[replayed from the journal]" in line for line in again_rows)


def test_mkl_runs_lists_the_runs_by_when_they_last_changed_the_most_recent_last(tmp_path: Path) -> None:
    """Text and JSON list the same order: three runs started one after the other, then the first taken on."""
    data = ROOT / "notebooks" / "data"
    script = str(data / "loop.script.yaml")
    for run_id in ("first", "second", "third"):
        started = mkl(
            "run", str(data / "loop.mkl"), "--script", script, "--id", run_id,
            "--suspend", "--max-steps", "1", "--set", "product=kettle",
        )  # fmt: skip
        assert status_line(started)["status"] == "suspended", started.stderr
    listed = mkl("runs")
    assert [run["run"] for run in status_line(listed)["runs"]] == ["first", "second", "third"]
    taken_on = mkl("resume", "--id", "first", "--max-steps", "2", "--script", script)
    assert status_line(taken_on)["calls"]["made"] == 1, taken_on.stderr  # one more step: its journal changed
    listed = mkl("runs")
    assert [run["run"] for run in status_line(listed)["runs"]] == ["second", "third", "first"]
    lines = [line.split()[0] for line in listed.stdout.splitlines() if re.match(r"(first|second|third)  ", line)]
    assert lines == ["second", "third", "first"]
