"""A reply answers exactly the question it was shown, and says who gave it, when and through what.

Two gates ("Approve it?" then "Send it now?") make the failure this guards against possible: a
reply meant for the first question must never be taken as the answer to the second.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import mkl_notebook
from mkl_notebook.app.replies import os_account
from mkl_notebook.checkpoints import envelope
from mkl_notebook.durable import runs
from mkl_notebook.durable.reading import run_state
from mkl_notebook.durable.stores import MemoryStore
from mkl_notebook.engine.options import RunOptions
from mkl_notebook.lang.loader import load
from mkl_notebook.notebook import session as session_module
from mkl_notebook.providers.scripted import oracle_from_file
from mkl_notebook.render import views

from support import ROOT, env_without_models

DATA = ROOT / "notebooks" / "data"
TWO_GATES = (DATA / "refund.mkl").read_text(encoding="utf-8")
SCRIPT = DATA / "refund.script.yaml"
FIRST, SECOND = "The draft promises a refund. Approve it?", "Send this reply to the customer now?"
ACCOUNT = os_account()  # who answers on the command line, as the operating system establishes it


def mkl(folder: Path, *args: str, **env: str) -> tuple[int, dict[str, Any], str, str]:
    completed = subprocess.run(
        [sys.executable, "-m", "mkl_notebook.cli", *args],
        capture_output=True,
        text=True,
        cwd=folder,
        env={**env_without_models(), **env},
        check=False,
    )
    lines = completed.stdout.strip().splitlines()
    return completed.returncode, json.loads(lines[-1]) if lines else {}, completed.stdout, completed.stderr


def replies(folder: Path, run_id: str = "r") -> list[dict[str, Any]]:
    with sqlite3.connect(folder / ".mkl" / "runs.sqlite") as db:
        rows = db.execute("SELECT body FROM records WHERE run_id = ? ORDER BY seq", (run_id,)).fetchall()
    return [record for (body,) in rows if (record := json.loads(body))["t"] == "reply"]


@pytest.fixture
def waiting(tmp_path: Path) -> tuple[Path, str]:
    """A folder with the two-gate machine, run as `r` up to its first question; and that question's id."""
    (tmp_path / "refund.mkl").write_text(TWO_GATES, encoding="utf-8")
    code, status, out, _ = mkl(
        tmp_path, "run", "refund.mkl", "--id", "r", "--hitl", "--script", str(SCRIPT), "--set", "ticket=broken"
    )
    assert code == 3, out
    assert (status["ask"], status["at"]) == (FIRST, "confirm")
    assert status["question_id"].startswith("q-")
    # The command to continue is the one to type: it names the script the run was given.
    assert f"mkl resume --id r --script {SCRIPT} --question {status['question_id']} --reply approve\n" in out
    return tmp_path, status["question_id"]


def test_the_command_to_continue_names_the_answers_the_run_drew_on_but_never_a_credential() -> None:
    from mkl_notebook.render.commands import resume_command

    def command(**given: str | None) -> str:
        return resume_command("r 1", **given)

    assert command() == "mkl resume --id 'r 1'"
    stored = command(store="my runs.sqlite", tools="t.py")
    assert stored == "mkl resume --id 'r 1' --store 'my runs.sqlite' --tools t.py"
    local = command(model="openai/m", api_base="http://127.0.0.1:8000/v1")
    assert local == "mkl resume --id 'r 1' --model openai/m --api-base http://127.0.0.1:8000/v1"
    for secret in ("http://me:s3cret@127.0.0.1:8000/v1", "http://127.0.0.1:8000/v1?api_key=s3cret"):
        assert command(model="openai/m", api_base=secret) == "mkl resume --id 'r 1' --model openai/m"


def test_a_reply_names_its_question_and_the_same_command_again_is_refused(waiting: tuple[Path, str]) -> None:
    folder, first = waiting
    answer = ("resume", "--id", "r", "--question", first, "--reply", "approve", "--script", str(SCRIPT))
    code, status, _, _ = mkl(folder, *answer, "--as", "alice")
    assert (code, status["ask"], status["at"]) == (3, SECOND, "release")  # on to the second question
    second = status["question_id"]
    assert second != first

    code, status, _, err = mkl(folder, *answer)  # run again: it must not answer the second question
    assert code == 2
    assert err.count("\n") == 1 and "Traceback" not in err
    assert f"question {first} was answered already: 'approve' by " in err and second in err and SECOND in err
    assert [reply["question"] for reply in replies(folder)] == [first]  # nothing was journaled
    code, status, _, _ = mkl(
        folder,
        "resume",
        "--id",
        "r",
        "--question",
        second,
        "--reply",
        "no",
        "--quiet",
        "--script",
        str(SCRIPT),
        "--as",
        "bob",
    )
    assert (code, status["status"]) == (0, "done")
    assert [(r["question"], r["value"], r["by"], r["established"], r["via"]) for r in replies(folder)] == [
        (first, "approve", ACCOUNT, "os-account", "cli"),
        (second, "no", ACCOUNT, "os-account", "cli"),
    ]
    assert [r.get("claimed") for r in replies(folder)] == ["alice", "bob"]  # beside the account, never for it


def test_a_reply_without_its_question_is_refused_with_the_command_to_use(waiting: tuple[Path, str]) -> None:
    folder, first = waiting
    code, _, _, err = mkl(folder, "resume", "--id", "r", "--set", "refund_approval=approve")
    assert code == 2 and "Traceback" not in err
    assert f"--question {first}" in err and FIRST in err
    assert replies(folder) == []


def test_fifty_concurrent_replies_to_one_question_journal_exactly_one(waiting: tuple[Path, str]) -> None:
    folder, first = waiting
    command = [
        sys.executable,
        "-m",
        "mkl_notebook.cli",
        "resume",
        "--id",
        "r",
        "--question",
        first,
        "--quiet",
        "--script",
        str(SCRIPT),
    ]
    processes = [
        subprocess.Popen(
            [*command, "--reply", "approve"],
            cwd=folder,
            env=env_without_models(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for n in range(50)
    ]
    results = [(process.wait(timeout=300), *process.communicate()) for process in processes]
    winners = [out for code, out, _ in results if code == 3]
    assert len(winners) == 1, [code for code, _, _ in results]
    losers = [err for code, _, err in results if code != 3]
    assert all(code == 2 for code, _, _ in results if code != 3)
    assert all(err.count("\n") == 1 and "Traceback" not in err for err in losers)
    assert all("already being advanced" in err or "was answered already" in err for err in losers)
    journaled = replies(folder)
    assert len(journaled) == 1 and journaled[0]["question"] == first
    assert json.loads(winners[0].splitlines()[-1])["ask"] == SECOND  # the winner's run went on


def test_the_audit_of_each_answer_shows_in_the_trace_the_listing_and_the_envelope(
    waiting: tuple[Path, str],
) -> None:
    folder, first = waiting
    code, status, _, _ = mkl(
        folder,
        "resume",
        "--id",
        "r",
        "--question",
        first,
        "--reply",
        "approve",
        "--script",
        str(SCRIPT),
        "--as",
        "alice",
        "--checkpoint",
        "r.json",
    )
    assert code == 3
    code, _, out, _ = mkl(
        folder,
        "resume",
        "--id",
        "r",
        "--question",
        status["question_id"],
        "--reply",
        "not yet, add an apology",
        "--script",
        str(SCRIPT),
        "--as",
        "bob",
    )
    assert code == 0  # anything but a plain approval withdraws the reply: the run ends
    lines = out.splitlines()
    escalated = next(number for number, line in enumerate(lines) if line.startswith("1 ") and "escalate" in line)
    assert lines[escalated + 1].startswith(
        f"  ↳ answered approve → refund_approval (by {ACCOUNT} (OS account; claims alice) · 20"
    )
    assert " · via cli · key " in lines[escalated + 1]  # the key that signed it (below: the CLI's)
    assert ") — asked: The draft promises a refund. Approve it?" in lines[escalated + 1]
    bob = f"(by {ACCOUNT} (OS account; claims bob) · 20"
    assert any(line.startswith(f"  ↳ answered not yet, add an apology → send_approval {bob}") for line in lines)
    said = json.loads(lines[-1])["answers"]  # the JSON status line
    assert [(a["by"], a["established"], a["claimed"]) for a in said] == [
        (ACCOUNT, "os-account", "alice"),
        (ACCOUNT, "os-account", "bob"),
    ]

    code, listing, out, _ = mkl(folder, "runs")
    assert f"answered 'not yet, add an apology' {bob}" in out
    answers = listing["runs"][0]["answers"]
    assert [(a["value"], a["by"], a["established"], a["claimed"], a["via"], a["question"]) for a in answers] == [
        ("approve", ACCOUNT, "os-account", "alice", "cli", first),
        ("not yet, add an apology", ACCOUNT, "os-account", "bob", "cli", status["question_id"]),
    ]
    keys = [a["key"] for a in answers]  # the fingerprint of the CLI's key, whose signature covers each answer
    assert keys[0] and keys[0] == keys[1] and f"via cli · key {keys[0]})" in out
    assert [(a["key"], a["signature"]) for a in said] == [(keys[0], "verifies")] * 2  # the status line says it too
    code, _, out, _ = mkl(folder, "trace", "--id", "r")  # read later from the journal, the trace names the key too
    assert code == 0
    assert sum(f"via cli · key {keys[0]})" in line for line in out.splitlines() if "↳ answered" in line) == 2
    code, _, out, _ = mkl(folder, "audit", "r", "--json")
    assert [(a["by"], a["established"], a["claimed"], a["key"], a["signature"]) for a in json.loads(out)] == [
        (ACCOUNT, "os-account", "alice", keys[0], "verifies"),
        (ACCOUNT, "os-account", "bob", keys[0], "verifies"),
    ]

    _, records, _ = envelope.read_file(folder / "r.json")  # the checkpoint written after the first answer
    journaled = [record for record in records if record["t"] == "reply"]
    assert [(r["value"], r["by"], r["claimed"], r["via"], r["question"]) for r in journaled] == [
        ("approve", ACCOUNT, "alice", "cli", first)
    ]
    assert isinstance(journaled[0]["time"], float)


def test_the_api_answers_the_question_its_handle_showed_and_no_later_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(session_module, "_SESSION", None)
    monkeypatch.setenv("JUPYTERHUB_USER", "carol")
    mkl_notebook.define(TWO_GATES)
    run = mkl_notebook.run("refund", id="api", script=str(SCRIPT), input={"ticket": "broken"})
    shown = run.question_id  # what a cell, a form or a person was shown
    run.submit("approve", question=shown)
    assert run.pending is not None and run.pending["ask"] == SECOND
    with pytest.raises(ValueError, match=f"question {shown} was answered already.*{run.question_id}"):
        run.submit("approve", question=shown)  # it showed the first question: it may not answer the second
    run.submit("send", by="dave")  # without a question: the one this handle shows now
    assert run.status == "done"
    answers = run.run_result.answers
    assert [(a["value"], a["by"], a["established"], a["claimed"], a["via"], a["question"]) for a in answers] == [
        ("approve", "carol", "jupyterhub", None, "api", FIRST),
        ("send", "carol", "jupyterhub", "dave", "api", SECOND),  # by= is the caller's word, beside the Hub's
    ]
    html = views.run_bundle("api", run.machine, run.run_result)["text/html"]
    assert "<strong>answered</strong> <code>approve → refund_approval</code> by carol (JupyterHub)" in html


def test_a_reply_bound_to_another_question_records_nothing_even_under_the_lease() -> None:
    """The durable layer checks the binding under the run's lease, where concurrent replies meet."""
    store = MemoryStore()
    machine = load(TWO_GATES)
    outcome = runs.start(machine, oracle_from_file(SCRIPT), store=store, run_id="d", options=RunOptions(hitl="all"))
    first = outcome.result.question_id("d")
    assert first is not None
    runs.resume_journal(store, "d", oracle_from_file(SCRIPT), reply="approve", has_reply=True, question=first)
    before = store.read("d")
    with pytest.raises(runs.RunStateError, match="is not pending"):
        runs.resume_journal(store, "d", oracle_from_file(SCRIPT), reply="approve", has_reply=True, question=first)
    assert store.read("d") == before
    assert run_state(before).shown == SECOND


def test_mkl_runs_on_a_folder_lists_every_waiting_question_with_its_command(waiting: tuple[Path, str]) -> None:
    folder, first = waiting
    deep = folder / "team" / "alice"
    deep.mkdir(parents=True)
    shared = ROOT / "notebooks" / "data" / "shared-approval.ipynb"
    (deep / "shared.ipynb").write_bytes(shared.read_bytes())
    (folder / "team" / "broken.ipynb").write_text('{"cells": 5}', encoding="utf-8")
    code, status, out, _ = mkl(folder, "runs", ".")
    assert code == 1  # one file could not be read: said, and the rest still listed
    lines = out.splitlines()
    command = f"mkl resume --id r --script {SCRIPT} --question {first} --reply"
    assert lines[:2] == [f".mkl/runs.sqlite: r asks {FIRST!r} — {command} approve", f"    or: {command} reject"]
    assert lines[2].startswith("team/alice/shared.ipynb: shared-refund [NOT TRUSTED: made by an unknown key ")
    assert (  # taken up only when the person says so; and naming no path of Alice's
        f"(signed as 'alice')] asks {FIRST!r} — mkl resume team/alice/shared.ipynb --run shared-refund --trust-file "
        "--question q-"
    ) in lines[2]
    assert lines[3].startswith("    or: mkl resume team/alice/shared.ipynb") and lines[3].endswith("--reply reject")
    assert lines[4] == "not read: team/broken.ipynb: is not a notebook (no cells)"
    assert [(q["where"], q["run"]) for q in status["questions"]] == [
        (".mkl/runs.sqlite", "r"),
        ("team/alice/shared.ipynb", "shared-refund"),
    ]
    answer = status["questions"][1]["command"].split()  # the command, as printed
    untrusting = [word for word in answer if word != "--trust-file"]
    code, refused, _, err = mkl(folder, *untrusting[1:], "--script", str(SCRIPT))
    assert code == 2 and "made by an unknown key" in refused["error"], err  # Alice's key is not trusted here
    code, done, _, err = mkl(folder, *answer[1:], "--script", str(SCRIPT))  # the choice, as printed
    assert (code, done["ask"]) == (3, SECOND), err


def test_pending_all_shows_the_same_questions_in_a_notebook(
    load_mkl: Any, shell: Any, waiting: tuple[Path, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    folder, first = waiting
    published: list[dict[str, Any]] = []
    load_mkl(lambda data, *args, **kwargs: published.append(data))
    monkeypatch.chdir(folder)
    assert shell.run_cell("%mkl pending --all").success
    text = published[-1]["text/plain"]
    assert "Waiting for a person — 1 question" in text and first in text and FIRST in text
    command = f"mkl resume --id r --script {SCRIPT} --question {first} --reply approve"
    assert f"<code>{command}</code>" in published[-1]["text/html"]


PAY_100 = """\
machine: pay
entry: quote
budget: 5
states:
  quote:
    structure: a line
    prompt: "Say the refund is ready."
    output: note
    gates:
      - { when: otherwise, escalate: true, to: pay, ask: "Pay the refund?", reply_to: approval }
  pay:
    tool: charge
    idempotent: false
    input: { amount: 100 }
    output: receipt
    gates:
      - { when: otherwise, then: ok, to: END }
"""
LEDGER_TOOL = """import os

import mkl_notebook


@mkl_notebook.tool
def charge(amount):
    with open(os.environ["LEDGER"], "a", encoding="utf-8") as ledger:
        ledger.write(f"{amount}\\n")
    return f"RCPT-{amount}"
"""


def test_a_reply_prepared_before_an_edit_of_the_amount_is_refused_after_it(tmp_path: Path) -> None:
    """The question's text and subject are the same after the edit; what would be approved is not."""
    (tmp_path / "pay.mkl").write_text(PAY_100, encoding="utf-8")
    (tmp_path / "tools.py").write_text(LEDGER_TOOL, encoding="utf-8")
    (tmp_path / "pay.script.yaml").write_text("llm:\n  produce: {refund: 'ready'}\n", encoding="utf-8")
    ledger = tmp_path / "ledger.txt"
    given = ("--script", "pay.script.yaml", "--tools", "tools.py")
    code, asked, out, _ = mkl(tmp_path, "run", "pay.mkl", "--id", "p", "--hitl", *given, LEDGER=str(ledger))
    assert code == 3, out
    prepared = asked["question_id"]

    (tmp_path / "pay.mkl").write_text(PAY_100.replace("amount: 100 }", "amount: 100000 }"), encoding="utf-8")
    code, again, out, _ = mkl(tmp_path, "run", "pay.mkl", "--id", "p", "--hitl", *given, LEDGER=str(ledger))
    assert code == 3, out
    assert (again["ask"], again["at"]) == (asked["ask"], asked["at"])  # the same words, at the same gate
    assert again["question_id"] != prepared

    code, _, out, err = mkl(
        tmp_path, "resume", "--id", "p", *given, "--question", prepared, "--set", "approval=approve",
        LEDGER=str(ledger),
    )  # fmt: skip
    assert code == 2 and err.count("\n") == 1, (out, err)
    assert again["question_id"] in err  # the refusal names the question that is waiting now
    assert not ledger.exists() and replies(tmp_path, "p") == []

    code, done, out, _ = mkl(
        tmp_path, "resume", "--id", "p", *given, "--question", again["question_id"], "--set", "approval=approve",
        LEDGER=str(ledger),
    )  # fmt: skip
    assert code == 0 and done["status"] == "done", out
    assert ledger.read_text(encoding="utf-8") == "100000\n"


def test_a_terminal_shows_what_a_question_is_about_whole_before_anyone_answers_it(tmp_path: Path) -> None:
    """An answer records the subject the person saw: from a terminal they see it too, whole (the trace's preview
    of the same output is cut), its lines kept and any control character shown, not obeyed."""
    from support import mkl_cli

    draft = "Dear customer,\n" + "we will refund order A-1001 in full, " * 8 + "\x1b[31mtoday\x1b[0m.\nRegards"
    script = ROOT / "examples" / "refund.script.yaml"
    text = script.read_text(encoding="utf-8").replace(
        '"Hello! Your order A-1001 qualifies: we will refund it today."', json.dumps(draft)
    )
    (tmp_path / "s.yaml").write_text(text, encoding="utf-8")
    machine = str(ROOT / "examples" / "refund.mkl")
    code, status, out, err = mkl_cli(tmp_path, "run", machine, "--script", "s.yaml", "--hitl", "--id", "r")
    assert (code, status["status"]) == (3, "suspended"), err
    lines = out.splitlines()
    at = lines.index(views.ABOUT_LABEL)
    shown = [line.removeprefix("    ") for line in lines[at + 1 : at + 4]]
    assert shown == ["Dear customer,", draft.splitlines()[1].replace("\x1b", "\\x1b"), "Regards"]
    assert "\x1b" not in out
