"""Durability by kind, through the ``mkl`` command in real subprocesses, and ``%mkl config durability=``.

A person's answer and a non-idempotent tool's intent are committed with ``PRAGMA synchronous=FULL`` (in WAL
mode: the WAL is synced at that commit), model answers with ``NORMAL``; ``--durability power`` (or
``$MKL_DURABILITY``) commits every record with ``FULL``. A power cut cannot be staged in a test, so the tests
show the two halves: the connection's ``PRAGMA synchronous`` read at the moment each record is committed
(a probe the tools file wraps around the store's connection), and SIGKILLs right after each kind is committed,
after which nothing journaled is lost and no tool runs twice.

The tools file (written by these tests) keeps a ledger line for every real effect of ``charge``, and:

- ``SYNC_LOG=PATH``: a JSON line per commit of the store: the kinds of the records it commits, and the
  connection's ``PRAGMA synchronous`` as the commit is made (1 NORMAL, 2 FULL);
- ``KILL_AFTER=KIND``: SIGKILL right after the first record of that kind is committed;
- ``KILL_IN_TOOL=1``: SIGKILL inside ``charge``, once its effect is in the ledger.
"""

from __future__ import annotations

import json
import signal
from pathlib import Path
from typing import Any

import pytest

from mkl_notebook.durable.stores import SQLiteStore

from support import mkl_cli

TOOLS_PY = r"""
import json
import os
import signal

import mkl_notebook
from mkl_notebook.durable import stores


@mkl_notebook.tool(effect="effect")
def charge(amount):
    with open(os.environ["LEDGER"], "a", encoding="utf-8") as handle:
        handle.write(f"charge {amount}\n")
        handle.flush()
        os.fsync(handle.fileno())
    if os.environ.get("KILL_IN_TOOL"):
        os.kill(os.getpid(), signal.SIGKILL)
    return f"receipt-{amount}"


class Probe:
    # The store's connection, noting the kinds of the records each commit holds and the connection's
    # synchronous level at that commit: a lone INSERT outside a transaction commits as it runs.
    def __init__(self, db, log):
        self._db, self._log, self._kinds = db, log, []

    def __getattr__(self, name):
        return getattr(self._db, name)

    def execute(self, sql, params=()):
        if sql.startswith("INSERT INTO records"):
            self._kinds.append(json.loads(params[-1])["t"])
            if not self._db.in_transaction:
                self._commits()
        elif sql == "COMMIT":
            self._commits()
        return self._db.execute(sql, params)

    def executemany(self, sql, rows):
        rows = list(rows)
        if sql.startswith("INSERT INTO records"):
            self._kinds += [json.loads(row[-1])["t"] for row in rows]
        return self._db.executemany(sql, rows)

    def _commits(self):
        (level,) = self._db.execute("PRAGMA synchronous").fetchone()
        with open(self._log, "a", encoding="utf-8") as handle:
            handle.write(json.dumps({"kinds": self._kinds, "synchronous": level}) + "\n")
        self._kinds = []


if os.environ.get("SYNC_LOG"):
    _connect = stores.SQLiteStore._writing_connection
    stores.SQLiteStore._writing_connection = lambda self, durability: Probe(
        _connect(self, durability), os.environ["SYNC_LOG"]
    )


def _killing(commit):
    def killing(self, run_id, record, *status):
        commit(self, run_id, record, *status)
        if os.environ.get("KILL_AFTER") == record.get("t"):
            os.kill(os.getpid(), signal.SIGKILL)
    return killing


stores.SQLiteStore.append = _killing(stores.SQLiteStore.append)
stores.SQLiteStore.append_ending = _killing(stores.SQLiteStore.append_ending)
"""

APPROVE = """
machine: approve
entry: quote
budget: 10
result: thanks
states:
  quote:
    structure: an amount
    prompt: "quote the amount"
    output: amount
    gates:
      - { when: otherwise, escalate: true, to: pay, ask: "Charge this amount?", reply_to: approval }
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
SCRIPT = {"llm": {"produce": {"quote": "42", "thank": "thanks for receipt-42!"}}}
ARGS = ("--id", "A", "--script", "approve.script.json", "--tools", "tools.py", "--quiet")
NORMAL, FULL = 1, 2
PRECIOUS = {"reply", "intent", "resolve"}


def _folder(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "approve.mkl").write_text(APPROVE, encoding="utf-8")
    (folder / "approve.script.json").write_text(json.dumps(SCRIPT), encoding="utf-8")
    (folder / "tools.py").write_text(TOOLS_PY, encoding="utf-8")
    return folder


def _mkl(folder: Path, *args: str, env: dict[str, str] | None = None) -> tuple[int, dict[str, Any], str]:
    given = {"LEDGER": str(folder / "ledger.txt"), "SYNC_LOG": str(folder / "sync.jsonl"), **(env or {})}
    code, status, _, err = mkl_cli(folder, *args, *ARGS, env=given)
    return code, status, err


def _run(folder: Path, *flags: str, env: dict[str, str] | None = None) -> tuple[int, dict[str, Any], str]:
    return _mkl(folder, "run", "approve.mkl", "--hitl", *flags, env=env)


def _approve(
    folder: Path, question: str, *flags: str, env: dict[str, str] | None = None
) -> tuple[int, dict[str, Any], str]:
    return _mkl(folder, "resume", "--question", question, "--reply", "yes", *flags, env=env)


def _ledger(folder: Path) -> list[str]:
    path = folder / "ledger.txt"
    return path.read_text(encoding="utf-8").splitlines() if path.exists() else []


def _commits(folder: Path) -> list[dict[str, Any]]:
    path = folder / "sync.jsonl"
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()] if path.exists() else []


def _journal(folder: Path) -> list[dict[str, Any]]:
    return SQLiteStore(folder / ".mkl" / "runs.sqlite").read("A")


def _levels(commits: list[dict[str, Any]]) -> dict[str, set[int]]:
    """Each kind of record committed, with the synchronous levels its commits had."""
    levels: dict[str, set[int]] = {}
    for commit in commits:
        for kind in commit["kinds"]:
            levels.setdefault(kind, set()).add(commit["synchronous"])
    return levels


@pytest.mark.parametrize("given", ["default", "flag", "environment"])
def test_each_kind_is_committed_with_the_sync_its_durability_asks_for(tmp_path: Path, given: str) -> None:
    folder = _folder(tmp_path)
    flags = ("--durability", "power") if given == "flag" else ()
    env = {"MKL_DURABILITY": "power"} if given == "environment" else {"MKL_DURABILITY": ""}
    code, status, err = _run(folder, *flags, env=env)
    assert (code, status["status"], status["at"]) == (3, "suspended", "pay"), err
    code, status, err = _approve(folder, status["question_id"], *flags, env=env)
    assert (code, status["status"], status["result"]) == (0, "done", "thanks for receipt-42!"), err
    assert _ledger(folder) == ["charge 42"]

    commits = _commits(folder)
    committed = [kind for commit in commits for kind in commit["kinds"]]
    assert committed == [record["t"] for record in _journal(folder)]  # the probe saw every record committed
    levels = _levels(commits)
    assert {"start", "answer", "suspend", "reply", "intent", "finish", "sign"} <= set(levels)
    if given == "default":
        assert {kind: levels[kind] for kind in PRECIOUS & set(levels)} == {"reply": {FULL}, "intent": {FULL}}
        assert all(levels[kind] == {NORMAL} for kind in set(levels) - PRECIOUS), levels
    else:
        assert all(level == {FULL} for level in levels.values()), levels


def test_a_bad_durability_is_one_line_and_nothing_runs(tmp_path: Path) -> None:
    folder = _folder(tmp_path)
    code, _, err = _run(folder, "--durability", "disk")
    assert code == 2 and err == "mkl: error: --durability must be one of process, power, not 'disk'\n"
    code, _, err = _run(folder, env={"MKL_DURABILITY": "fsync"})
    assert code == 2 and err == "mkl: error: $MKL_DURABILITY must be one of process, power, not 'fsync'\n"
    assert not (folder / ".mkl" / "runs.sqlite").exists() and _ledger(folder) == []


def _crash(folder: Path, kill: dict[str, str]) -> tuple[list[str], list[dict[str, Any]]]:
    """Run ``approve`` to its question and approve it, with ``kill`` in the environment of both: the kinds the
    store had committed when the process died (in order), and the commits the probe saw."""
    code, status, err = _run(folder, env=kill)
    if code == 3:
        code, _, err = _approve(folder, status["question_id"], env=kill)
    assert code == -signal.SIGKILL, err
    commits = _commits(folder)
    return [kind for commit in commits for kind in commit["kinds"]], commits


def test_a_kill_during_model_answers_loses_none_and_the_run_goes_on(tmp_path: Path) -> None:
    folder = _folder(tmp_path)
    committed, commits = _crash(folder, {"KILL_AFTER": "answer"})
    assert committed == ["start", "answer"] and commits[-1]["synchronous"] == NORMAL  # a model answer: not synced
    assert [record["t"] for record in _journal(folder)] == committed  # the kill lost nothing committed
    code, status, err = _run(folder)
    assert (code, status["calls"]) == (3, {"made": 0, "replayed": 1}), err  # the answer is not asked again
    code, status, err = _approve(folder, status["question_id"])
    assert (code, status["result"]) == (0, "thanks for receipt-42!"), err
    assert _ledger(folder) == ["charge 42"]


def test_a_kill_right_after_a_persons_answer_keeps_it_and_the_run_goes_on_from_it(tmp_path: Path) -> None:
    folder = _folder(tmp_path)
    committed, commits = _crash(folder, {"KILL_AFTER": "reply"})
    assert committed[-1] == "reply" and commits[-1] == {"kinds": ["reply"], "synchronous": FULL}
    journal = _journal(folder)
    assert [record["t"] for record in journal] == committed
    assert journal[-1]["value"] == "yes" and journal[-1]["question"].startswith("q-")
    assert _ledger(folder) == []  # the kill came before the answer was used
    code, status, err = _mkl(folder, "resume")  # no reply given again: the journaled one is used
    assert (code, status["status"], status["result"]) == (0, "done", "thanks for receipt-42!"), err
    assert _ledger(folder) == ["charge 42"]
    assert [record["value"] for record in _journal(folder) if record["t"] == "reply"] == ["yes"]


@pytest.mark.parametrize("kill", [{"KILL_AFTER": "intent"}, {"KILL_IN_TOOL": "1"}], ids=["after-intent", "in-tool"])
def test_a_kill_after_a_tools_intent_never_runs_the_tool_twice(tmp_path: Path, kill: dict[str, str]) -> None:
    folder = _folder(tmp_path)
    committed, commits = _crash(folder, kill)
    assert committed[-1] == "intent" and commits[-1] == {"kinds": ["intent"], "synchronous": FULL}
    assert [record["t"] for record in _journal(folder)] == committed
    charged = ["charge 42"] if "KILL_IN_TOOL" in kill else []
    assert _ledger(folder) == charged
    code, status, err = _mkl(folder, "resume")
    assert (code, status["status"], status["in_doubt"]["tool"]) == (4, "in_doubt", "charge"), err
    assert _ledger(folder) == charged  # in doubt: not called again blindly
    settle = "completed=receipt-42" if charged else "retry"
    code, status, err = _mkl(folder, "resume", "--resolve", settle)
    assert (code, status["result"]) == (0, "thanks for receipt-42!"), err
    assert _ledger(folder) == ["charge 42"]  # charged once, whichever way the kill fell
    assert _levels(_commits(folder))["resolve"] == {FULL}  # the person's settlement is synced too


def test_the_notebook_setting_reopens_the_store_with_every_record_synced(
    shell: Any, load_mkl: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from mkl_notebook.notebook.session import current_session

    monkeypatch.delenv("MKL_DURABILITY", raising=False)
    load_mkl(lambda *args, **kwargs: None)
    assert shell.run_cell("%mkl config").success
    assert "durability = process\n" in capsys.readouterr().out
    store = current_session().store
    assert isinstance(store, SQLiteStore) and store.durability == "process"
    assert shell.run_cell("%mkl config durability=power").success
    assert "durability = power\n" in capsys.readouterr().out
    store = current_session().store
    assert isinstance(store, SQLiteStore) and store.durability == "power"
    assert store._db.execute("PRAGMA synchronous").fetchone() == (FULL,)
    failed = shell.run_cell("%mkl config durability=disk")
    assert str(failed.error_in_exec) == "durability must be one of process, power, not 'disk'"
    assert current_session().settings.durability == "power"  # refused: nothing changed

    monkeypatch.setenv("MKL_DURABILITY", "power")
    assert shell.run_cell("%mkl config durability=process").success
    assert "durability = process\n" in capsys.readouterr().out  # the setting over the environment
    assert current_session().store._db.execute("PRAGMA synchronous").fetchone() == (NORMAL,)  # type: ignore[attr-defined]
