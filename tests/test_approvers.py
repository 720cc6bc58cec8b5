"""Who may answer: a run that names its approvers takes a reply only from one of them, as the hub or the
operating system establishes who answers; anyone else is refused in one line and nothing is journaled; the
audit says which rule each answer was taken under."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

from mkl_notebook.app.replies import os_account

from support import REFUND_SCRIPT, mkl_cli

ROOT = Path(__file__).resolve().parent.parent
REFUND_MKL = ROOT / "examples" / "refund.mkl"


def _replies(folder: Path) -> list[dict[str, Any]]:
    with sqlite3.connect(folder / ".mkl" / "runs.sqlite") as db:
        bodies = [json.loads(body) for (body,) in db.execute("SELECT body FROM records ORDER BY run_id, seq")]
    return [body for body in bodies if body.get("t") == "reply"]


def _waiting(folder: Path, *flags: str, env: dict[str, str] | None = None) -> str:
    """Start the refund example to its approval gate in ``folder``; the question's id."""
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
        env=env,
    )
    assert code == 3 and status["status"] == "suspended", out + err
    return str(status["question_id"])


def _answer(folder: Path, question: str, *flags: str) -> tuple[int, dict[str, Any], str, str]:
    return mkl_cli(
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


def test_a_reply_from_someone_the_run_does_not_name_is_refused_in_one_line_and_journals_nothing(
    tmp_path: Path,
) -> None:
    question = _waiting(tmp_path, "--approvers", "alice,bob")
    me = os_account()
    for flags in ((), ("--as", "alice")):  # a name given with --as is a claim: it never makes one an approver
        code, _, _, err = _answer(tmp_path, question, *flags)
        assert code == 2, err
        [line] = err.strip().splitlines()
        assert f"question {question} of run 'r' may be answered only by alice, bob" in line, line
        assert f"you are {me} (os-account)" in line and "nothing was recorded" in line, line
    assert _replies(tmp_path) == []


def test_a_waiting_run_says_who_may_answer_it_beside_its_commands_and_in_its_status_line(tmp_path: Path) -> None:
    code, status, out, err = mkl_cli(
        tmp_path,
        "run",
        str(REFUND_MKL),
        "--script",
        str(REFUND_SCRIPT),
        "--set",
        "ticket=broken",
        "--hitl",
        "--approvers",
        "bob,alice",
    )
    assert code == 3, out + err
    assert status["approvers"] == ["alice", "bob"]
    assert "To continue (only alice, bob may answer it):" in out, out


def test_an_approver_answers_and_the_audit_says_the_rule_each_answer_was_taken_under(tmp_path: Path) -> None:
    me = os_account()
    assert me, "these tests run as an account with a name"
    named, anyone = tmp_path / "named", tmp_path / "anyone"
    named.mkdir(), anyone.mkdir()
    for folder, flags in ((named, ("--approvers", f"{me},sam")), (anyone, ())):
        question = _waiting(folder, *flags)
        code, _, out, err = _answer(folder, question)
        assert code == 0, out + err
        _, _, listed, _ = mkl_cli(folder, "audit", "--store", str(folder / ".mkl" / "runs.sqlite"), "--json")
        [row] = json.loads(listed)
        expected = f"approvers: {', '.join(sorted([me, 'sam']))}" if flags else "anyone"
        assert (row["by"], row["established"], row["accepted_under"]) == (me, "os-account", expected), row
        _, _, text, _ = mkl_cli(folder, "audit", "--store", str(folder / ".mkl" / "runs.sqlite"))
        assert "accepted under" in text and expected in text, text


def test_the_approvers_setting_names_them_for_every_run_started_where_it_is_set(tmp_path: Path) -> None:
    """A deployment names the approvers once (``MKL_APPROVERS``, as a hub sets it for every user's server)."""
    question = _waiting(tmp_path, env={"MKL_APPROVERS": "alice"})
    code, _, _, err = _answer(tmp_path, question)
    assert code == 2 and "may be answered only by alice" in err, err
    assert _replies(tmp_path) == []


def test_approvers_that_name_nobody_are_refused_before_anything_runs(tmp_path: Path) -> None:
    code, _, out, err = mkl_cli(tmp_path, "run", str(REFUND_MKL), "--script", str(REFUND_SCRIPT), "--approvers", " , ")
    assert code == 2 and "--approvers names nobody" in err, out + err
    assert not (tmp_path / ".mkl" / "runs.sqlite").exists()
