"""Headless write-backs never corrupt a notebook: one writer at a time, whatever its store.

Two approvers resume the same shared notebook at once, each from a folder of their own (so with
stores of their own): the file stays valid, exactly one reply wins, the other gets one line.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from lab_client import run_all

from mkl_notebook.durable import nbfile

from support import REFUND, REFUND_SCRIPT, RUN_MIME, env_without_models

PAIRS = 50


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("author")
    path = folder / "shared.ipynb"
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell("%load_ext mkl_notebook"),
        nbformat.v4.new_code_cell("%%mkl\n" + REFUND),
        nbformat.v4.new_code_cell(f"%mkl run refund --script {REFUND_SCRIPT} --set ticket=broken"),
        nbformat.v4.new_code_cell("print('a cell of the author')"),
    ]
    nbformat.write(nb, path)
    run_all(path)
    shutil.rmtree(folder / ".mkl")  # only the file carries the run
    return path


def _resume(path: Path, cwd: Path, value: str, question: str) -> subprocess.Popen[str]:
    command = [
        sys.executable,
        "-m",
        "mkl_notebook.cli",
        "resume",
        str(path),
        "--run",
        "refund",
        "--question",
        question,
        "--set",
        f"approval.answer={value}",
        "--script",
        str(REFUND_SCRIPT),
        "--quiet",
    ]
    return subprocess.Popen(
        command, cwd=cwd, env=env_without_models(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def test_concurrent_headless_resumes_from_different_stores_never_corrupt_the_notebook(
    shared: Path, tmp_path: Path
) -> None:
    question = _question_of(shared, "refund")
    outcomes = []
    for pair in range(PAIRS):
        folder = tmp_path / f"pair{pair}"
        alice, bob = folder / "alice", folder / "bob"
        alice.mkdir(parents=True)
        bob.mkdir()
        path = folder / "shared.ipynb"
        shutil.copy(shared, path)
        racers = {"alice": _resume(path, alice, "approve", question), "bob": _resume(path, bob, "reject", question)}
        results = {name: (process.wait(timeout=120), *process.communicate()) for name, process in racers.items()}
        text = path.read_text(encoding="utf-8")
        nbformat.validate(nbformat.reads(text, as_version=4))  # valid JSON, valid notebook, every time
        winners = [name for name, (code, _, _) in results.items() if code != 2]
        assert len(winners) == 1, results
        [loser] = [name for name in results if name not in winners]
        _, _, error = results[loser]
        assert error.count("\n") == 1 and "Traceback" not in error, error
        assert "is not pending" in error or "not waiting" in error, error
        [run] = nbfile.embedded_runs(path)
        replies = [record["value"] for record in run.records if record["t"] == "reply"]
        assert replies == [{"alice": "approve", "bob": "reject"}[winners[0]]]  # the winner's reply, only it
        assert not list(folder.glob(".shared.ipynb.*.mkl-tmp"))  # no temp file left behind
        outcomes.append(winners[0])
    assert len(outcomes) == PAIRS


def test_a_write_back_keeps_another_runs_update_in_the_same_file(shared: Path, tmp_path: Path) -> None:
    """Two runs in one notebook, resumed one after the other from different stores: both updates stay."""
    nb = nbformat.read(shared, as_version=4)
    second = nbformat.v4.new_code_cell(f"%mkl run refund --id other --script {REFUND_SCRIPT} --set ticket=broken")
    nb.cells.append(second)
    path = tmp_path / "two.ipynb"
    nbformat.write(nb, path)
    run_all(path)
    shutil.rmtree(tmp_path / ".mkl")
    questions = {run_id: _question_of(path, run_id) for run_id in ("refund", "other")}
    for run_id, store in (("refund", "one"), ("other", "two")):
        (tmp_path / store).mkdir()
        command = [
            sys.executable,
            "-m",
            "mkl_notebook.cli",
            "resume",
            str(path),
            "--run",
            run_id,
            "--question",
            questions[run_id],
            "--set",
            "approval.answer=approve",
            "--script",
            str(REFUND_SCRIPT),
            "--quiet",
        ]
        done = subprocess.run(command, cwd=tmp_path / store, env=env_without_models(), capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
    statuses = {run.run_id: run.header["status"] for run in nbfile.embedded_runs(path)}
    assert statuses == {"refund": "done", "other": "done"}
    outputs = [o for cell in nbformat.read(path, as_version=4).cells for o in cell.get("outputs", [])]
    assert sum(RUN_MIME in o.get("data", {}) for o in outputs) == 2


def _question_of(path: Path, run_id: str) -> str:
    listing = subprocess.run(
        [sys.executable, "-m", "mkl_notebook.cli", "runs", path.name],
        cwd=path.parent,
        env=env_without_models(),
        capture_output=True,
        text=True,
        check=True,
    )
    runs = json.loads(listing.stdout.splitlines()[-1])["runs"]
    return str(next(run["question_id"] for run in runs if run["run"] == run_id))
