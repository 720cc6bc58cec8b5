"""Stores, checkpoints and notebooks written by earlier code still load, replay for free and give the same results.

``tests/fixtures/legacy/`` was written once by the code of commit 0dd9df9 (``make_legacy.py``
says how): a run store with seven runs covering every record kind, a checkpoint file and a
notebook that carries two runs in its outputs, with each run's result as that code computed it.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import nbformat
import pytest

from mkl_notebook.checkpoints import envelope
from mkl_notebook.checkpoints import notebook_file as nbfile
from mkl_notebook.durable import runs
from mkl_notebook.durable.stores import MemoryStore, SQLiteStore
from mkl_notebook.durable.taken_up import import_envelope
from mkl_notebook.engine.oracle import AwaitingHuman, Oracle, OracleRequest, ReplyRequest

from support import EXAMPLES, REFUND_RESULT, env_without_models

LEGACY = Path(__file__).resolve().parent / "fixtures" / "legacy"
EXPECTED: dict[str, dict[str, Any]] = json.loads((LEGACY / "expected.json").read_text(encoding="utf-8"))
RESULT_FIELDS = (
    "status",
    "error",
    "result",
    "at",
    "ask",
    "reply_to",
    "question",
    "usage",
    "trace",
    "context",
    "visits",
    "diagnosis",
)


class NoCalls(Oracle):
    """An oracle that must never be asked: everything has to come from the journal."""

    waits = False

    def ask(self, request: OracleRequest) -> Any:
        if isinstance(request, ReplyRequest):
            raise AwaitingHuman(request.position)  # a question no one has answered yet is not a call
        raise AssertionError(f"the journal should have answered {request.position}")


def as_json(value: Any) -> Any:
    return json.loads(json.dumps(value, default=str))


def mkl_resume(folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``mkl resume ARGS`` with the refund script, offline, in ``folder``."""
    command = [
        sys.executable,
        "-m",
        "mkl_notebook.cli",
        "resume",
        *args,
        "--script",
        str(EXAMPLES / "refund.script.yaml"),
        "--quiet",
    ]
    return subprocess.run(command, capture_output=True, text=True, cwd=folder, env=env_without_models(), check=False)


@pytest.fixture
def legacy(tmp_path: Path) -> Path:
    """A copy of the fixtures (opening a store may change it; the checked-in files stay as written)."""
    folder = tmp_path / "legacy"
    shutil.copytree(LEGACY, folder)
    return folder


def test_the_fixtures_hold_every_kind_of_record(legacy: Path) -> None:
    store = SQLiteStore(legacy / "runs.sqlite")
    kinds = {record["t"] for summary in store.runs() for record in store.read(summary.run_id)}
    assert kinds == {
        "start",
        "answer",
        "intent",
        "invalidated",
        "suspend",
        "reply",
        "resume",
        "resolve",
        "finish",
        "rerun",
    }
    assert sorted(EXPECTED) == sorted(summary.run_id for summary in store.runs())


@pytest.mark.parametrize("run_id", sorted(EXPECTED))
def test_a_run_in_an_old_store_replays_with_no_calls_and_the_same_result(legacy: Path, run_id: str) -> None:
    store = SQLiteStore(legacy / "runs.sqlite")
    outcome = runs.replay(store, run_id, NoCalls())
    expected = EXPECTED[run_id]
    got = as_json({name: getattr(outcome.result, name) for name in RESULT_FIELDS})
    assert got == {name: expected[name] for name in RESULT_FIELDS}
    answered = {record["pos"] for record in outcome.records if record["t"] == "answer"}
    assert outcome.calls == {"made": 0, "replayed": len(answered)}
    assert len(outcome.records) == expected["records"]  # a pure replay adds nothing to an old journal


def test_an_old_checkpoint_verifies_imports_and_resumes(legacy: Path) -> None:
    header, records, _ = envelope.read_file(legacy / "waiting.checkpoint.json")
    assert header["status"] == "suspended" and header["ask"] == "The draft promises a refund. Approve sending it?"
    store = MemoryStore()
    import_envelope(store, header, records)
    waiting = runs.replay(store, "refund-waiting", NoCalls())
    assert (waiting.result.status, waiting.result.at, waiting.calls["made"]) == ("suspended", "send", 0)
    question = waiting.result.question_id("refund-waiting")  # an old journal's question has an id too
    answer = (str(legacy / "waiting.checkpoint.json"), "--question", question, "--reply", "approve")
    refused = mkl_resume(legacy, *answer)  # made before checkpoints were sealed: nothing says whose it is
    assert refused.returncode == 2
    assert "run 'refund-waiting' is unsigned: nothing says who made it" in refused.stderr
    assert "--trust-file" in refused.stderr and refused.stderr.count("\n") == 1
    completed = mkl_resume(legacy, *answer, "--trust-file")
    assert completed.returncode == 0, completed.stderr
    status = json.loads(completed.stdout.splitlines()[-1])
    assert (status["result"], status["calls"]) == (REFUND_RESULT, {"made": 1, "replayed": 3})
    header, records, _ = envelope.read_file(legacy / "waiting.checkpoint.json")  # rewritten by today's code
    assert header["status"] == "done" and [r["t"] for r in records][-3:] == ["answer", "finish", "sign"]


def test_an_old_notebook_lists_its_runs_and_resumes_headless(legacy: Path) -> None:
    notebook = legacy / "shared.ipynb"
    embedded, damaged = nbfile.scan(notebook)
    assert damaged == []
    assert {run.run_id: run.header["status"] for run in embedded} == {
        "refund-waiting": "suspended",
        "refund-approved": "done",
    }
    before = nbformat.read(notebook, as_version=4)
    listed = json.loads(
        subprocess.run(
            [sys.executable, "-m", "mkl_notebook.cli", "runs", str(notebook)],
            capture_output=True,
            text=True,
            cwd=legacy,
            env=env_without_models(),
            check=True,
        ).stdout.splitlines()[-1]
    )
    question = next(run["question_id"] for run in listed["runs"] if run["run"] == "refund-waiting")
    answer = (str(notebook), "--run", "refund-waiting", "--question", question, "--set", "approval.answer=approve")
    assert mkl_resume(legacy, *answer).returncode == 2  # unsigned: taken up only by choice
    assert nbformat.read(notebook, as_version=4) == before
    completed = mkl_resume(legacy, *answer, "--trust-file")
    assert completed.returncode == 0, completed.stderr
    assert json.loads(completed.stdout.splitlines()[-1])["result"] == REFUND_RESULT
    after = nbformat.read(notebook, as_version=4)
    nbformat.validate(after)
    assert [cell.source for cell in after.cells] == [cell.source for cell in before.cells]
    assert after.cells[3] == before.cells[3]  # the other run's cell is untouched
    statuses = {run.run_id: run.header["status"] for run in nbfile.scan(notebook)[0]}
    assert statuses == {"refund-waiting": "done", "refund-approved": "done"}
