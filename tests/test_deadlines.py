"""Deadlines with safe defaults: a question no one answers in time is decided by the run's rule, journaled as a
policy decision (the rule, its digest, who set it), never as a person's answer. Whichever runs first decides it,
once: ``mkl tick`` (cron; two racing decide once), or a kernel that shows the run (its cell redraws). A person's
reply after that is refused, and ``mkl audit`` lists the decision as policy."""

from __future__ import annotations

import hashlib
import json
import shutil
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from mkl_notebook.app.errors import UsageProblem
from mkl_notebook.app.replies import os_account
from mkl_notebook.app.settings import Settings
from mkl_notebook.durable.chain import canonical

from support import REFUND_SCRIPT, env_without_models, mkl_cli, refund_notebook

ROOT = Path(__file__).resolve().parent.parent
REFUND_MKL = ROOT / "examples" / "refund.mkl"
WITHHELD = "Hello! A colleague will look at order A-1001 and write to you again shortly."
APPROVED = "Hello! Your order A-1001 qualifies: we will refund it today. (approved)"


def _records(folder: Path, kind: str | None = None) -> list[dict[str, Any]]:
    with sqlite3.connect(folder / ".mkl" / "runs.sqlite") as db:
        bodies = [json.loads(body) for (body,) in db.execute("SELECT body FROM records ORDER BY run_id, seq")]
    return [body for body in bodies if kind is None or body.get("t") == kind]


def _waiting(folder: Path, *flags: str) -> str:
    """Start the refund example to its approval gate in ``folder`` (run ``r``); the question's id."""
    code, status, out, err = mkl_cli(
        folder,
        "run",
        str(REFUND_MKL),
        "--script",
        str(REFUND_SCRIPT),
        "--set",
        "ticket=Parcel A-1001 arrived broken",
        "--hitl",
        "--id",
        "r",
        *flags,
    )
    assert code == 3 and status["status"] == "suspended", out + err
    return str(status["question_id"])


def _passed(folder: Path, seconds: float) -> None:
    """Poll until ``seconds`` have passed since the run last asked its question (by the clock its journal uses)."""
    asked = max(r["time"] for r in _records(folder) if r.get("t") in ("suspend", "policy"))
    limit = time.monotonic() + 30
    while time.time() < asked + seconds:
        assert time.monotonic() < limit, "the clock did not reach the deadline"
        time.sleep(0.05)


def _tick_until_decided(folder: Path, *args: str) -> str:
    """Run ``mkl tick`` until it decides something (polling: each tick before the deadline decides nothing)."""
    limit = time.monotonic() + 60
    while True:
        code, _, out, err = mkl_cli(folder, "tick", *args)
        assert code == 0, out + err
        if "decided by policy" in out:
            return out
        assert "no question is past its deadline" in out, out + err
        assert time.monotonic() < limit, "no tick decided the question"


def _audit(folder: Path, *target: str) -> list[dict[str, Any]]:
    code, _, out, err = mkl_cli(folder, "audit", *target, "--json")
    assert code == 0, err
    return list(json.loads(out))


def _reply(folder: Path, question: str, *flags: str) -> tuple[int, str, str]:
    code, _, out, err = mkl_cli(
        folder,
        "resume",
        "--id",
        "r",
        "--script",
        str(REFUND_SCRIPT),
        "--question",
        question,
        "--reply",
        "approve",
        *flags,
    )
    return code, out, err


def test_a_one_second_deadline_rejects_by_policy_and_the_audit_shows_policy_not_a_person(tmp_path: Path) -> None:
    question = _waiting(tmp_path, "--deadline", "1s", "--on-timeout", "reject")
    said = _tick_until_decided(tmp_path)
    assert f"question {question} decided by policy (deadline 1s, on timeout reject" in said, said
    assert "reject; the run is now done" in said, said

    [policy] = _records(tmp_path, "policy")
    rule = {"deadline": 1, "on_timeout": "reject"}
    assert policy["rule"] == rule and policy["question"] == question and policy["value"] == "reject"
    assert policy["digest"] == hashlib.sha256(canonical(rule).encode()).hexdigest()
    assert policy["set_by"] == os_account() and "by" not in policy  # who set the rule; no one answered
    assert _records(tmp_path, "reply") == []  # a policy decision is never a person's answer

    code, status, out, err = mkl_cli(tmp_path, "trace", "--id", "r")
    assert code == 0 and status["status"] == "done", out + err
    assert status["result"] == WITHHELD  # the run went on as rejected: the refund was withheld
    code, status, out, err = mkl_cli(tmp_path, "runs")
    assert "answered 'reject' (by policy (deadline 1s, on timeout reject, sha256:" in out, out
    assert status["runs"][0]["answers"][0]["by"] is None

    [row] = _audit(tmp_path)
    assert row["decided_by"] == "policy" and row["via"] == "policy" and row["value"] == "reject"
    assert row["by"] is None and row["established"] is None and row["claimed"] is None
    assert row["accepted_under"] == (
        f"policy: deadline 1s, on timeout reject, sha256:{policy['digest'][:8]}, set by {os_account()}"
    )
    code, _, text, err = mkl_cli(tmp_path, "audit")
    [line] = [line for line in text.splitlines() if line.startswith("r ")]
    assert "  policy  " in line and f" {os_account()} (" not in line and "by " not in line, line

    # A person's reply after the policy decided is refused by the late-answer rule, and nothing is journaled.
    journal = _records(tmp_path)
    code, out, err = _reply(tmp_path, question)
    assert code == 2, out + err
    [line] = err.strip().splitlines()
    assert f"question {question} was answered already: 'reject' by policy (deadline 1s" in line, line
    assert "nothing was recorded" in line, line
    assert _records(tmp_path) == journal


def test_ticks_racing_decide_a_question_once(tmp_path: Path) -> None:
    _waiting(tmp_path, "--deadline", "1s")
    _passed(tmp_path, 1.0)
    command = [sys.executable, "-m", "mkl_notebook.cli", "tick"]
    ticks = [
        subprocess.Popen(
            command, cwd=tmp_path, env=env_without_models(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        for _ in range(3)
    ]
    said = [tick.communicate(timeout=120) for tick in ticks]
    assert [tick.returncode for tick in ticks] == [0, 0, 0]
    assert sum("decided by policy" in out for out, _ in said) == 1, said
    for out, err in said:  # the others found it decided, or being decided (the lease): neither decided again
        assert "decided by policy" in out or "no question is past its deadline" in out, (out, err)
        assert not err or "is already being advanced by another process" in err, err
    assert len(_records(tmp_path, "policy")) == 1
    assert [r["status"] for r in _records(tmp_path, "finish")] == ["done"]


def test_a_decider_another_got_ahead_of_between_its_look_and_the_lease_decides_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mkl_notebook.app import deadlines
    from mkl_notebook.app.workspace import Workspace
    from mkl_notebook.durable.policy import NotDue

    _waiting(tmp_path, "--deadline", "1s")
    _passed(tmp_path, 1.0)
    advance = deadlines.durable.advance

    def another_tick_first(*args: Any, **kwargs: Any) -> Any:  # another process decides right before the lease
        code, _, out, err = mkl_cli(tmp_path, "tick")
        assert code == 0 and "decided by policy" in out, out + err
        return advance(*args, **kwargs)

    monkeypatch.setattr(deadlines.durable, "advance", another_tick_first)
    with Workspace(Settings(store=tmp_path / ".mkl" / "runs.sqlite")) as ws, pytest.raises(NotDue):
        deadlines.decide_by_deadline(ws, "r")
    assert len(_records(tmp_path, "policy")) == 1


def test_a_deadline_that_approves_lets_the_run_go_on_as_approved(tmp_path: Path) -> None:
    _waiting(tmp_path, "--deadline", "1s", "--on-timeout", "approve")
    said = _tick_until_decided(tmp_path, str(tmp_path))  # (the folder: its store found as `mkl runs DIR` finds it)
    assert "approve; the run is now done" in said, said
    _, status, _, _ = mkl_cli(tmp_path, "trace", "--id", "r")
    assert status["result"] == APPROVED
    [row] = _audit(tmp_path)
    assert row["decided_by"] == "policy" and row["value"] == "approve" and row["by"] is None


def test_a_deadline_that_escalates_asks_again_with_one_approver_then_rejects(tmp_path: Path) -> None:
    question = _waiting(tmp_path, "--deadline", "1s", "--on-timeout", "escalate:nobody-here")
    said = _tick_until_decided(tmp_path)
    assert "escalate to nobody-here; the run is now suspended" in said, said
    code, status, _, _ = mkl_cli(tmp_path, "trace", "--id", "r")
    assert status["status"] == "suspended" and status["question_id"] == question  # the same question, asked again
    assert status.get("approvers") == ["nobody-here"]

    code, out, err = _reply(tmp_path, question)  # this OS account is not the one approver now
    assert code == 2 and "may be answered only by nobody-here" in err, out + err
    assert _records(tmp_path, "reply") == []

    said = _tick_until_decided(tmp_path)  # an escalated question's own deadline: the safe default decides
    assert "reject; the run is now done" in said, said
    assert [p["action"] for p in _records(tmp_path, "policy")] == ["escalate", "reject"]
    rows = _audit(tmp_path)
    assert [(row["value"], row["decided_by"]) for row in rows] == [
        ("escalate to nobody-here", "policy"),
        ("reject", "policy"),
    ]


@pytest.mark.parametrize(
    ("flags", "named"),
    [
        (("--deadline", "5x"), "--deadline takes a duration such as 30s, 30m, 2h or 1d, not '5x'"),
        (("--deadline", "0s"), "--deadline takes a duration"),
        (("--deadline", "1m", "--on-timeout", "maybe"), "--on-timeout takes reject, approve or escalate:NAME"),
        (("--deadline", "1m", "--on-timeout", "escalate:"), "--on-timeout takes reject, approve or escalate:NAME"),
        (("--remind-after", "soon"), "--remind-after takes a duration"),
        (("--on-timeout", "approve"), "--on-timeout decides a question once its deadline passes: give --deadline"),
    ],
)
def test_a_bad_deadline_rule_is_refused_in_one_line_naming_its_flag(
    tmp_path: Path, flags: tuple[str, ...], named: str
) -> None:
    code, _, out, err = mkl_cli(tmp_path, "run", str(REFUND_MKL), "--script", str(REFUND_SCRIPT), "--hitl", *flags)
    assert code == 2, out + err
    [line] = err.strip().splitlines()
    assert named in line, line
    assert not (tmp_path / ".mkl").exists() or _records(tmp_path) == []


def test_the_deadline_settings_and_their_environment_variables_set_a_runs_rule(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = Settings()
    with pytest.raises(UsageProblem, match=r"^deadline takes a duration"):
        settings.change("deadline", "soon")
    with pytest.raises(UsageProblem, match=r"^on_timeout takes reject, approve or escalate:NAME"):
        settings.change("on_timeout", "later")
    settings.change("deadline", "2h")
    assert "deadline = 2h" in settings.lines()

    code, _, out, err = mkl_cli(
        tmp_path, "run", str(REFUND_MKL), "--script", str(REFUND_SCRIPT), "--hitl", env={"MKL_DEADLINE": "soon"}
    )
    assert code == 2 and "$MKL_DEADLINE takes a duration" in err.strip().splitlines()[-1], out + err
    code, status, out, err = mkl_cli(
        tmp_path,
        "run",
        str(REFUND_MKL),
        "--script",
        str(REFUND_SCRIPT),
        "--hitl",
        "--set",
        "ticket=broken",
        env={"MKL_DEADLINE": "30m", "MKL_ON_TIMEOUT": "approve", "MKL_REMIND_AFTER": "10m"},
    )
    assert code == 3, out + err
    assert status["deadline_at"] == max(r["time"] for r in _records(tmp_path, "suspend")) + 1800, status
    code, status, out, err = mkl_cli(tmp_path, "runs")
    [run] = status["runs"]
    assert run["deadline_at"] == run["asked_at"] + 1800, run  # when the rule decides it, for an inbox to show
    [start] = _records(tmp_path, "start")
    assert {k: start["options"].get(k) for k in ("deadline", "on_timeout", "remind_after")} == {
        "deadline": 1800,
        "on_timeout": "approve",
        "remind_after": 600,
    }


def test_a_reminder_falls_due_and_is_said_without_journaling_anything() -> None:
    from mkl_notebook.durable.policy import reminder_due

    start = {"t": "start", "run": "r", "options": {"deadline": 3600, "remind_after": 60}}
    asked = {"t": "suspend", "pos": "p", "ask": "ok?", "reply_to": "a", "time": 1000.0, "reason": "escalated"}
    assert reminder_due([start, asked], 1059.0) is None
    due = reminder_due([start, asked], 1060.0)
    assert due is not None and due.since == 1060.0 and due.question.startswith("q-")


def test_the_reminders_due_in_a_folder_are_said_and_nothing_is_journaled(tmp_path: Path) -> None:
    from mkl_notebook.app.deadlines import reminders_due

    question = _waiting(tmp_path, "--deadline", "1h", "--remind-after", "1s")
    asked = max(r["time"] for r in _records(tmp_path, "suspend"))
    journal = _records(tmp_path)
    assert reminders_due([tmp_path], [], now=asked + 0.9) == ([], [])
    limit = time.monotonic() + 30
    while not (found := reminders_due([tmp_path], [])[0]):  # poll: due one second after the question was asked
        assert time.monotonic() < limit, "no reminder fell due"
        time.sleep(0.05)
    assert [(item.run, item.question, item.since) for item in found] == [("r", question, asked + 1)]
    assert _records(tmp_path) == journal  # saying a reminder is due journals nothing


def test_tick_continues_a_run_a_notebook_holds_and_writes_the_decision_back_into_it(tmp_path: Path) -> None:
    notebook = tmp_path / "refunds.ipynb"
    refund_notebook(notebook, {"waiting": "Parcel A-1001 arrived broken"}, first=("%mkl config deadline=3s",))
    done = subprocess.run(
        [sys.executable, "-m", "jupyter", "nbconvert", "--to", "notebook", "--execute", "--inplace", str(notebook)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env=env_without_models(),
    )
    assert done.returncode == 0, done.stderr[-3000:]
    shutil.rmtree(tmp_path / ".mkl", ignore_errors=True)  # the notebook alone holds the run now
    said = _tick_until_decided(tmp_path, str(tmp_path))
    assert "refunds.ipynb: run 'waiting'" in said and "reject; the run is now done" in said, said

    code, status, out, err = mkl_cli(tmp_path, "runs", str(notebook))
    assert code == 0, out + err
    [run] = [item for item in status["runs"] if item["run"] == "waiting"]
    assert run["status"] == "done", run  # written back into the file
    [row] = _audit(tmp_path, str(notebook))
    assert row["decided_by"] == "policy" and row["by"] is None
    assert row["accepted_under"].startswith("policy: deadline 3s, on timeout reject, sha256:")


def _execute(client: Any, code: str) -> list[dict[str, Any]]:
    published: list[dict[str, Any]] = []
    reply = client.execute_interactive(code, output_hook=published.append, timeout=120)
    assert reply["content"]["status"] == "ok", reply["content"]
    return published


def _printed(messages: list[dict[str, Any]]) -> str:
    return "".join(m["content"]["text"] for m in messages if m["msg_type"] == "stream")


def test_a_kernel_showing_the_run_decides_its_due_question_itself_and_redraws(tmp_path: Path) -> None:
    from jupyter_client.manager import KernelManager

    shutil.copy(REFUND_MKL, tmp_path / "refund.mkl")
    shutil.copy(REFUND_SCRIPT, tmp_path / "refund.script.yaml")
    manager = KernelManager(kernel_name="python3")
    manager.start_kernel(cwd=str(tmp_path), env=env_without_models())
    client = manager.client()
    client.start_channels()
    try:
        client.wait_for_ready(timeout=120)
        _execute(client, "%load_ext mkl_notebook\n%mkl load refund.mkl")
        shown = _execute(client, "%mkl run refund --id r --script refund.script.yaml --set ticket=broken --deadline 1s")
        assert any(m["msg_type"] == "display_data" for m in shown)
        redrawn: list[str] = []
        limit = time.monotonic() + 60
        while not any("reject" in text and "policy" in text for text in redrawn):  # nothing executed meanwhile
            assert time.monotonic() < limit, f"the kernel's cell was not redrawn: {redrawn}"
            try:
                message = client.get_iopub_msg(timeout=1)
            except Exception:  # (queue.Empty: nothing published this second)
                continue
            if message["msg_type"] == "update_display_data":
                redrawn.append(str(message["content"]["data"].get("text/plain", "")))
        status = _printed(_execute(client, "import mkl_notebook\nprint(mkl_notebook.get_run('r').status)"))
        assert status.strip() == "done"
    finally:
        client.stop_channels()
        manager.shutdown_kernel(now=True)
    [policy] = _records(tmp_path, "policy")
    assert policy["value"] == "reject" and _records(tmp_path, "reply") == []
    _, _, out, err = mkl_cli(tmp_path, "tick")  # the kernel decided it: nothing is left to decide
    assert "no question is past its deadline" in out, out + err
    assert len(_records(tmp_path, "policy")) == 1


def test_tick_decides_a_question_waiting_in_a_postgresql_store(postgres: Any, tmp_path: Path) -> None:
    store = postgres.database()
    question = _waiting(tmp_path, "--deadline", "1s", "--store", store)
    said = _tick_until_decided(tmp_path, "--store", store)
    assert "reject; the run is now done" in said, said
    [row] = _audit(tmp_path, "--store", store)
    assert row["decided_by"] == "policy" and row["by"] is None and row["value"] == "reject"
    code, out, err = _reply(tmp_path, question, "--store", store)
    assert code == 2 and "was answered already: 'reject' by policy (deadline 1s" in err, out + err
