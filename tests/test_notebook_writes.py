"""Headless write-backs never corrupt a notebook: one writer at a time, whatever its store.

Two approvers resume the same shared notebook at once, each from a folder of their own (so with
stores of their own): the file stays valid, exactly one reply wins, the other gets one line.
"""

from __future__ import annotations

import contextlib
import copy
import hashlib
import json
import shlex
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from lab_client import run_all

from mkl_notebook.checkpoints import notebook_file as nbfile
from mkl_notebook.checkpoints.marks import advancing, mark_advancing

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


def _mkl(cwd: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``mkl ARGS`` run in ``cwd`` (its store is ``cwd/.mkl`` unless ARGS name another)."""
    return subprocess.run(
        [sys.executable, "-m", "mkl_notebook.cli", *args],
        cwd=cwd,
        env=env or env_without_models(),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


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
        f"approval={value}",
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
        done = _mkl(tmp_path / store, *_approval(path, run_id, questions[run_id]))
        assert done.returncode == 0, done.stderr
    statuses = {run.run_id: run.header["status"] for run in nbfile.embedded_runs(path)}
    assert statuses == {"refund": "done", "other": "done"}
    outputs = [o for cell in nbformat.read(path, as_version=4).cells for o in cell.get("outputs", [])]
    assert sum(RUN_MIME in o.get("data", {}) for o in outputs) == 2


def _approval(path: Path, run_id: str, question: str) -> list[str]:
    """The arguments of ``mkl resume`` that approve ``question`` of run ``run_id`` in notebook ``path``."""
    return ["resume", str(path), "--run", run_id, "--question", question, "--set", "approval=approve",
            "--script", str(REFUND_SCRIPT), "--quiet"]  # fmt: skip


def _question_of(path: Path, run_id: str) -> str:
    listing = _mkl(path.parent, "runs", path.name)
    assert listing.returncode == 0, listing.stderr
    runs = json.loads(listing.stdout.splitlines()[-1])["runs"]
    return str(next(run["question_id"] for run in runs if run["run"] == run_id))


# -- killed at any instant: never stranded, no effect twice ------------------------------------------

PAY = """mklang: "0.4"
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
      - when: otherwise
        escalate: true
        to: pay
        ask: "Pay the quoted amount?"
        reply_to: approval
  pay:
    tool: charge
    idempotent: false
    input: { amount: "{{amount}}" }
    output: receipt
    gates:
      - { when: otherwise, then: ok, to: END }
"""
TOOLS = """import os

import mkl_notebook


@mkl_notebook.tool(effect="effect")
def charge(amount):
    with open(os.environ["LEDGER"], "a", encoding="utf-8") as ledger:
        ledger.write(f"{amount}\\n")
        ledger.flush()
        os.fsync(ledger.fileno())
    return f"RCPT-{amount}"
"""


def _pay_notebook(folder: Path, padding: int) -> Path:
    """A notebook whose `pay` run waits for approval before its payment tool; ``padding`` bytes of text."""
    (folder / "pay.script.yaml").write_text("llm:\n  produce: {quote: '42'}\n", encoding="utf-8")
    (folder / "tools.py").write_text(TOOLS, encoding="utf-8")
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_markdown_cell("padding " + "x" * padding),
        nbformat.v4.new_code_cell("%load_ext mkl_notebook"),
        nbformat.v4.new_code_cell("%%mkl\n" + PAY),
        nbformat.v4.new_code_cell("%mkl run pay --id P --script pay.script.yaml"),
    ]
    path = folder / "pay.ipynb"
    nbformat.write(nb, path)
    run_all(path)
    shutil.rmtree(folder / ".mkl")
    return path


def _pay(path: Path, store: Path, question: str) -> list[str]:
    return [
        sys.executable, "-m", "mkl_notebook.cli", "resume", str(path), "--run", "P", "--question", question,
        "--set", "approval=approve", "--script", str(path.parent / "pay.script.yaml"),
        "--tools", str(path.parent / "tools.py"), "--store", str(store / "runs.sqlite"), "--quiet",
    ]  # fmt: skip


def _settled(result: subprocess.CompletedProcess[str]) -> None:
    """A command after a kill: it completes, or refuses in one line saying why."""
    assert "Traceback" not in result.stderr, result.stderr[-3000:]
    assert result.returncode in (0, 2, 4), (result.returncode, result.stderr)
    if result.returncode == 2:
        assert result.stderr.count("\n") == 1, result.stderr


@pytest.mark.parametrize(("padding", "kills"), [(1_000, 40), (30_000_000, 12)])
def test_a_headless_resume_killed_at_any_instant_is_never_stranded_and_pays_once(
    tmp_path: Path, padding: int, kills: int
) -> None:
    import random
    import signal
    import time

    source = tmp_path / "source"
    source.mkdir()
    shared = _pay_notebook(source, padding)
    question = _question_of(shared, "P")
    chance = random.Random(padding)
    for kill in range(kills):
        folder = tmp_path / f"kill{kill}"
        folder.mkdir()
        for name in ("pay.script.yaml", "tools.py"):
            shutil.copy(source / name, folder / name)
        path = folder / "pay.ipynb"
        shutil.copy(shared, path)
        ledger = folder / "ledger.txt"
        env = {**env_without_models(), "LEDGER": str(ledger)}
        ours, theirs = folder / "ours", folder / "theirs"
        victim = subprocess.Popen(
            _pay(path, ours, question), env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        # Every other kill at a random instant; the rest just after the payment, before the write-back.
        after_paying = kill % 2 == 1
        deadline = time.monotonic() + (30 if after_paying else chance.uniform(0.05, 1.5))
        while victim.poll() is None and time.monotonic() < deadline and not (after_paying and ledger.exists()):
            time.sleep(0.002)
        if after_paying:
            time.sleep(chance.uniform(0, 0.02))
        victim.send_signal(signal.SIGKILL)
        victim.wait(timeout=30)
        nbformat.validate(nbformat.read(path, as_version=4))  # whatever instant it died at
        # Someone else, with a store of their own, takes the file up: never a second payment.
        _settled(subprocess.run(_pay(path, theirs, question), env=env, capture_output=True, text=True))
        # The same command again, with the store the killed one used: it completes, or says why not.
        _settled(subprocess.run(_pay(path, ours, question), env=env, capture_output=True, text=True))
        paid = ledger.read_text(encoding="utf-8").splitlines() if ledger.exists() else []
        assert len(paid) <= 1, (kill, paid)  # no effect twice
        [run] = nbfile.embedded_runs(path)
        if paid and run.header["status"] != "in_doubt":
            assert run.header["status"] == "done", run.header  # the file is not stranded at the question
        assert not list(folder.glob(".pay.ipynb.*.mkl-tmp"))


def test_a_damaged_newer_copy_of_a_run_is_not_passed_over_for_an_older_one(shared: Path, tmp_path: Path) -> None:
    path = tmp_path / "shared.ipynb"
    nb = nbformat.read(shared, as_version=4)
    [holder] = [cell for cell in nb.cells if any(RUN_MIME in o.get("data", {}) for o in cell.get("outputs", []))]
    later = nbformat.v4.new_code_cell("# a later cell showed the run again")
    later.outputs = [copy.deepcopy(o) for o in holder.outputs if RUN_MIME in o.get("data", {})]
    later.outputs[0]["data"][RUN_MIME]["digest"] = "0" * 64  # damaged on the way
    nb.cells.append(later)
    nbformat.write(nb, path)
    before = path.read_bytes()
    done = _mkl(tmp_path, *_approval(path, "refund", _question_of(shared, "refund")))
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert "is not resumed in its place" in done.stderr
    assert path.read_bytes() == before  # nothing was written


def _held(path: Path) -> int:
    """How many records of run 'refund' the notebook holds: what an advance marked in it starts from."""
    return len(nbfile.find_run(path, "refund").records)


def test_mkl_runs_says_when_a_files_run_was_left_mid_advance(shared: Path, tmp_path: Path) -> None:
    path = tmp_path / "shared.ipynb"
    shutil.copy(shared, path)
    mark_advancing(path, "refund", "/elsewhere/.mkl/runs.sqlite", _held(path))
    listing = _mkl(tmp_path, "runs", path.name)
    finish = f"mkl resume shared.ipynb --run refund --store /elsewhere/.mkl/runs.sqlite --script {REFUND_SCRIPT}"
    assert f"was being advanced in the store /elsewhere/.mkl/runs.sqlite, and what it did there is not in this " \
        f"file yet; `{finish}` finishes it" in listing.stdout  # fmt: skip
    [listed] = json.loads(listing.stdout.splitlines()[-1])["runs"]
    assert listed["advancing_in"] == "/elsewhere/.mkl/runs.sqlite" and listed["finish"] == finish
    assert "--store /elsewhere/.mkl/runs.sqlite" in listed["command"]  # answering it resumes it there too


def _untouched(path: Path) -> tuple[str, int, list[str]]:
    """What must not change of a file a listing reads: its bytes' hash, its mode and the files beside it."""
    siblings = sorted(other.name for other in path.parent.iterdir() if other.name.startswith(path.name))
    return hashlib.sha256(path.read_bytes()).hexdigest(), path.stat().st_mode, siblings


def test_mkl_runs_leaves_a_write_back_a_stopped_resume_never_made_to_the_resume_in_its_store(
    shared: Path, tmp_path: Path
) -> None:
    """The state a resume killed after its store's commit leaves: the store says done, the file still shows
    the question and says in which store the run went on. The file is anyone's, and so is the store path it
    names: listing it opens and writes neither, it says where the run was left; resuming there finishes it."""
    path = tmp_path / "shared.ipynb"
    shutil.copy(shared, path)
    stranded = path.read_bytes()
    first = _question_of(path, "refund")
    done = _mkl(tmp_path, *_approval(path, "refund", first), "--store", "ours.sqlite")
    assert done.returncode == 0, done.stderr
    path.write_bytes(stranded)  # as if the write-back never came
    store = (tmp_path / "ours.sqlite").resolve()
    mark_advancing(path, "refund", str(store), _held(path))
    before = _untouched(path), _untouched(store)
    listing = _mkl(tmp_path, "runs", path.name)
    assert listing.returncode == 0, listing.stderr
    assert (_untouched(path), _untouched(store)) == before  # nothing written, nothing made beside either
    assert f"was being advanced in the store {store}" in listing.stdout
    [listed] = json.loads(listing.stdout.splitlines()[-1])["runs"]
    assert listed["advancing_in"] == str(store) and listed["status"] == "suspended"  # as the file says
    finish = _mkl(tmp_path, *shlex.split(listed["finish"])[1:], "--script", str(REFUND_SCRIPT), "--quiet")
    assert finish.returncode == 0, finish.stderr
    [listed] = json.loads(_mkl(tmp_path, "runs", path.name).stdout.splitlines()[-1])["runs"]
    assert listed["status"] == "done" and "question_id" not in listed and "advancing_in" not in listed
    assert [answer["value"] for answer in listed["answers"]] == ["approve"]
    assert advancing(path, "refund") == []
    nbformat.validate(nbformat.read(path, as_version=4))


def test_mkl_runs_never_opens_a_database_a_received_notebook_names_as_its_store(shared: Path, tmp_path: Path) -> None:
    """A notebook whose mid-advance mark names someone's unrelated SQLite database: listing it leaves that
    database and the notebook as they were, byte for byte, and says where the file claims the run was left."""
    path = tmp_path / "shared.ipynb"
    shutil.copy(shared, path)
    app = tmp_path / "app.db"
    with contextlib.closing(sqlite3.connect(app)) as db, db:
        db.execute("CREATE TABLE outcomes (id INTEGER PRIMARY KEY, body TEXT)")
        db.executemany("INSERT INTO outcomes (body) VALUES (?)", [("one",), ("two",)])
    app.chmod(0o644)
    mark_advancing(path, "refund", str(app.resolve()), _held(path))
    before = _untouched(path), _untouched(app)
    listing = _mkl(tmp_path, "runs", path.name)
    assert listing.returncode == 0, listing.stderr
    assert (_untouched(path), _untouched(app)) == before
    [listed] = json.loads(listing.stdout.splitlines()[-1])["runs"]
    assert listed["advancing_in"] == str(app.resolve())


_COUNT = """
import sys
from pathlib import Path
from mkl_notebook.checkpoints.notebook_disk import locked
notebook, counter = Path(sys.argv[1]), Path(sys.argv[2])
for _ in range(int(sys.argv[3])):
    with locked(notebook):
        value = int(counter.read_text())
        counter.write_text(str(value + 1))
"""


def test_the_notebooks_lock_lets_one_writer_in_at_a_time_and_leaves_no_file_behind(tmp_path: Path) -> None:
    """Four processes take a notebook's lock 150 times each to add one to a counter (a read, then a write: lost
    updates show two writers at once). The lock file is made for the while it is held and removed as it is let
    go; a writer that waited on a file removed meanwhile takes the new one, so none is ever let in beside another."""
    notebook, counter = tmp_path / "n.ipynb", tmp_path / "counter"
    nbformat.write(nbformat.v4.new_notebook(), notebook)
    counter.write_text("0")
    writers = [subprocess.Popen([sys.executable, "-c", _COUNT, str(notebook), str(counter), "150"]) for _ in range(4)]
    assert [writer.wait(timeout=240) for writer in writers] == [0, 0, 0, 0]
    assert counter.read_text() == "600"
    assert sorted(path.name for path in tmp_path.iterdir()) == ["counter", "n.ipynb"]
