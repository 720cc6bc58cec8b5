"""``mkl inbox``: every question waiting in reach, listed once, with the command that answers it.

Three folders, made for real: two hold notebooks whose runs wait (executed by a kernel as JupyterLab would),
one holds a run store (``mkl run --hitl``). Beside the waiting questions are those that must not be listed as
waiting: an answered run, a stale copy (an older copy of a notebook whose run was answered since), a copy of a
waiting run (the same history: one row, naming both places) and a stranger's notebook (signed by a key not
trusted here: listed only marked as such). Nothing is written by listing.
"""

from __future__ import annotations

import hashlib
import json
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from lab_client import run_all

from mkl_notebook.app.replies import os_account

from support import EXAMPLES, REFUND_SCRIPT, env_without_models, mkl_cli, refund_notebook

ME = os_account() or "nobody"


def _store_run(folder: Path, run_id: str, *more: str) -> None:
    """Run ``refund`` into the store of ``folder`` until it asks for approval."""
    code, status, _, err = mkl_cli(
        folder, "run", str(EXAMPLES / "refund.mkl"), "--id", run_id, "--hitl", "--script", str(REFUND_SCRIPT),
        "--set", f"ticket=ticket of {run_id}", *more,
    )  # fmt: skip
    assert code == 3 and status["status"] == "suspended", err


def _answer(folder: Path, command: str) -> tuple[int, str]:
    """Run a printed ``mkl resume …`` command in ``folder``, as a person pastes it."""
    words = shlex.split(command)
    assert words[0].endswith("mkl") or words[:3] == [sys.executable, "-m", "mkl_notebook.cli"], words
    done = subprocess.run(
        [sys.executable, "-m", "mkl_notebook.cli", *words[1:]],
        cwd=folder,
        env=env_without_models(),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    return done.returncode, done.stderr


def _inbox(folder: Path, *args: str, env: dict[str, str] | None = None) -> list[dict[str, Any]]:
    code, _, out, err = mkl_cli(folder, "inbox", *args, "--json", env=env)
    assert code == 0, err
    rows: list[dict[str, Any]] = json.loads(out.strip().splitlines()[-1])
    return rows


def _everything(folder: Path) -> dict[str, tuple[str, int, int]]:
    """Every file under ``folder`` (hidden ones too, a store's ``-wal`` and ``-shm``) with a digest of its bytes,
    its mode and its mtime: what a reader must leave as it was. (Of a WAL store's ``-shm``, the shared-memory index
    every SQLite reader maps, the mtime is left out: mapping it is how a reader reads, as with ``mkl runs``.)"""
    return {
        str(path.relative_to(folder)): (
            hashlib.sha256(path.read_bytes()).hexdigest(),
            path.stat().st_mode,
            0 if path.name.endswith("-shm") else path.stat().st_mtime_ns,
        )
        for path in sorted(folder.rglob("*"))
        if path.is_file()
    }


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """team-a: alice.ipynb, a1 and a2 waiting, then a2 answered; team-b: bob.ipynb (b1 waiting, b2 answered),
    old-alice.ipynb (alice.ipynb before a2 was answered: a1 the same history, a2 stale) and stranger.ipynb (s1,
    made by someone whose key is not trusted here); team-c: a store, c1 waiting (anyone may answer) and c2
    (only 'someone-else' may)."""
    root = tmp_path_factory.mktemp("inbox")
    a, b, c = (root / name for name in ("team-a", "team-b", "team-c"))
    for folder in (a, b, c):
        folder.mkdir()
    refund_notebook(a / "alice.ipynb", {"a1": "Parcel A-1 arrived broken", "a2": "Parcel A-2 never came"})
    refund_notebook(b / "bob.ipynb", {"b1": "Parcel B-1 is late", "b2": "Parcel B-2 is wet"})
    home = root / "stranger-home"  # the stranger's own folder: their store stays there
    home.mkdir()
    refund_notebook(home / "stranger.ipynb", {"s1": "Parcel S-1 is odd"})
    run_all(a / "alice.ipynb")
    run_all(b / "bob.ipynb")
    run_all(home / "stranger.ipynb", env={"JUPYTER_DATA_DIR": str(root / "stranger-jupyter")})
    shutil.copy(home / "stranger.ipynb", b / "stranger.ipynb")  # the file they sent
    shutil.copy(a / "alice.ipynb", b / "old-alice.ipynb")
    _store_run(c, "c1")
    _store_run(c, "c2", "--approvers", "someone-else")
    for notebook, run_id in (("team-a/alice.ipynb", "a2"), ("team-b/bob.ipynb", "b2")):
        [row] = [row for row in _inbox(root, "team-a", "team-b") if row["run"] == run_id and row["file"] == notebook]
        code, err = _answer(root, row["command"])
        assert code in (0, 3), err
    shutil.rmtree(root / ".mkl", ignore_errors=True)  # the answers' store: only the notebooks say they were given
    return root


def test_every_waiting_question_is_listed_once_and_none_answered_stale_or_untrusted_unmarked(tree: Path) -> None:
    before = _everything(tree)
    rows = _inbox(tree, "team-a", "team-b", "team-c")
    assert _everything(tree) == before  # listing wrote nothing, made no store
    assert sorted(row["run"] for row in rows) == ["a1", "b1", "c1", "c2", "s1"]
    by_run = {row["run"]: row for row in rows}
    assert by_run["a1"]["where"] == "team-a/alice.ipynb, cell 3"
    # one history in three places (the kernel's store beside the notebook, and a copy of the file): one row
    assert by_run["a1"]["also_in"] == ["store team-a/.mkl/runs.sqlite", "team-b/old-alice.ipynb, cell 3"]
    assert by_run["c1"]["where"] == "store team-c/.mkl/runs.sqlite" and by_run["c1"]["cell"] is None
    for row in rows:
        assert (
            row["ask"].startswith("The draft promises a refund. Approve")
            and row["question_id"]
            and row["deadline"] is None
        )
        assert "order A-1001" in row["about"]  # the subject: the draft the approval is about
        assert row["commands"][0] == row["command"] and row["command"].endswith("--reply approve")
    assert all(row["trusted"] for run, row in by_run.items() if run != "s1")
    stranger = by_run["s1"]  # listed, but marked: its question may not be what a machine's author wrote
    assert stranger["trusted"] is False and "unknown key" in stranger["made_by"]
    assert "--trust-file" in stranger["command"]
    assert [row["run"] for row in rows] == [row["run"] for row in sorted(rows, key=lambda r: r["asked_at"])]

    code, _, out, err = mkl_cli(tree, "inbox", "team-a", "team-b", "team-c")
    assert code == 0, err
    fresh = tree.parent / "fresh-jupyter-data"  # someone with no key yet: listing does not make one for them
    code, _, _, err = mkl_cli(tree, "inbox", "team-a", "team-b", env={"JUPYTER_DATA_DIR": str(fresh)})
    assert code == 0 and not fresh.exists(), err
    assert "5 questions waiting" in out and "[NOT TRUSTED: made by an unknown key" in out
    assert "team-b/old-alice.ipynb" in out and out.count("--reply approve") == 5


def test_a_json_rows_command_answers_its_question_and_the_row_leaves(tree: Path, tmp_path: Path) -> None:
    work = tmp_path / "copy"
    shutil.copytree(tree / "team-c", work / "team-c")
    [row] = [row for row in _inbox(work, "team-c") if row["run"] == "c1"]
    code, err = _answer(work, row["command"])
    assert code == 0, err
    assert [row["run"] for row in _inbox(work, "team-c")] == ["c2"]


def test_mine_keeps_the_questions_i_may_answer(tree: Path) -> None:
    rows = _inbox(tree, "team-c", "--mine")
    assert [row["run"] for row in rows] == ["c1"]  # c2 may be answered only by someone-else
    everyone = {row["run"]: row for row in _inbox(tree, "team-c")}
    assert everyone["c2"]["approvers"] == ["someone-else"] and everyone["c2"]["may_answer"] is False
    code, _, out, _ = mkl_cli(tree, "inbox", "team-c")
    assert code == 0 and "someone-else (not you)" in out


def test_older_than_and_machine_filter_and_overdue_needs_a_deadline(tree: Path) -> None:
    assert _inbox(tree, "team-c", "--older-than", "1d") == []
    assert sorted(row["run"] for row in _inbox(tree, "team-c", "--older-than", "0s")) == ["c1", "c2"]
    assert _inbox(tree, "team-c", "--machine", "other") == []
    assert len(_inbox(tree, "team-c", "--machine", "refund")) == 2
    assert _inbox(tree, "team-c", "--overdue") == []  # no run there has a deadline


def test_a_store_named_and_the_configured_store_are_read_and_a_password_is_never_shown(tree: Path) -> None:
    store = tree / "team-c" / ".mkl" / "runs.sqlite"
    elsewhere = tree / "team-a"
    named = _inbox(elsewhere, "--store", str(store))
    assert {row["run"] for row in named} >= {"c1", "c2"}
    configured = _inbox(elsewhere, env={"MKL_STORE": str(store)})
    assert {row["run"] for row in configured} >= {"c1", "c2"}
    both = _inbox(elsewhere, "--store", str(store), env={"MKL_STORE": str(store)})
    assert sorted(row["run"] for row in both) == sorted(row["run"] for row in named)  # one store, read once
    assert all(row["also_in"] == [] for row in both if row["run"] in ("c1", "c2")), both


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--older-than", "soon"], "--older-than takes a duration such as 30s, 30m, 2h or 1d, not 'soon'"),
        (["no-such-folder"], "no-such-folder: no such folder"),
        (["--store", "missing.sqlite"], "missing.sqlite: no such run store"),
        (["--store", "postgresql://me:s3cret@127.0.0.1:1/db"], None),
        (["--bogus"], None),
    ],
)
def test_bad_input_is_one_line_never_a_traceback(tree: Path, args: list[str], said: str | None) -> None:
    code, _, _, err = mkl_cli(tree, "inbox", *args)
    assert code == 2, err
    assert "Traceback" not in err and "s3cret" not in err
    lines = [line for line in err.splitlines() if line.startswith("mkl: error:")]
    assert len(lines) == 1, err
    if said is not None:
        assert lines[0] == f"mkl: error: {said}"


def test_a_files_text_cannot_act_on_the_terminal(tmp_path: Path) -> None:
    """A subject with an escape sequence and a line break is shown as text, on one line."""
    from mkl_notebook.render.inbox_views import inbox_text

    row = {
        "run": "r",
        "machine": "m",
        "ask": "Approve?\x1b[2J",
        "about": "line one\nline two \u202e",
        "commands": ["mkl resume --id r --reply approve"],
        "where": "x.ipynb, cell 2",
        "age_seconds": 7300,
    }
    text = inbox_text([row], full=True)
    assert "\x1b" not in text and "\u202e" not in text and "\\x1b[2J" in text
    assert "line one\\nline two" in text and "2h 1m" in text


def test_the_magic_draws_the_same_rows_as_an_html_table_with_a_text_twin(tree: Path, ip: Any) -> None:
    ip.run(f"%mkl inbox {tree / 'team-a'} {tree / 'team-c'} --mine")
    bundle = ip.out.last("text/html")
    assert "<table>" in bundle["text/html"] and "<th" in bundle["text/html"]
    text = bundle["text/plain"]
    assert "2 questions waiting" in text and "c2" not in text  # a1 and c1; c2 is not mine to answer
    assert "mkl resume" in bundle["text/html"] and "mkl resume" in text
    error = ip.fails("%mkl inbox --older-than later")
    assert "--older-than takes a duration" in str(error)


def test_what_cannot_be_read_is_one_line_each_and_a_servers_password_is_not_among_them(tmp_path: Path) -> None:
    (tmp_path / "broken.ipynb").write_text("{not json", encoding="utf-8")
    env = {"MKL_STORE": "postgresql://me:s3cret@127.0.0.1:1/db"}  # the configured store: a server not there
    code, _, out, err = mkl_cli(tmp_path, "inbox", env=env)
    assert code == 0, err
    assert "No question waits" in out and "Not read: broken.ipynb: is not a notebook" in out
    assert "Not read: postgresql://***@127.0.0.1:1/db" in out and "s3cret" not in out + err


def test_a_server_stores_questions_are_listed_without_its_password_and_answered_by_their_command(
    postgres: Any, tmp_path: Path
) -> None:
    from postgres_server import PASSWORD

    url = postgres.database()
    shown = url.replace(f":{PASSWORD}", "")
    _store_run(tmp_path, "on-server", "--store", url)
    outputs: list[str] = []
    for env in ({}, {"MKL_STORE": url}):  # named, then configured
        given = () if env else ("--store", url)
        code, _, out, err = mkl_cli(tmp_path, "inbox", *given, "--json", env=env)
        outputs += [out, err]
        assert code == 0, err
        [row] = json.loads(out.strip().splitlines()[-1])
        assert row["run"] == "on-server" and row["where"] == f"store {shown}" and row["store"] == shown
        assert f"--store {shlex.quote(shown)}" in row["command"]
        code, _, out, err = mkl_cli(tmp_path, "inbox", *given, env=env)
        outputs += [out, err]
        assert code == 0 and shown in out, err
    assert not [output for output in outputs if PASSWORD in output]
    done = subprocess.run(
        [sys.executable, "-m", "mkl_notebook.cli", *shlex.split(row["command"])[1:]],
        cwd=tmp_path,
        env={**env_without_models(), "PGPASSWORD": PASSWORD},  # the password as PostgreSQL's own clients take it
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert _inbox(tmp_path, "--store", url) == []


def test_a_deadline_shows_in_its_row_and_overdue_keeps_the_questions_past_it(tmp_path: Path) -> None:
    import time

    _store_run(tmp_path, "soon", "--deadline", "1s")
    _store_run(tmp_path, "later", "--deadline", "1d")
    _store_run(tmp_path, "never")
    rows = {row["run"]: row for row in _inbox(tmp_path)}
    assert rows["never"]["deadline"] is None
    for run, seconds in (("soon", 1), ("later", 86400)):
        assert abs(rows[run]["deadline"] - (rows[run]["asked_at"] + seconds)) < 1, rows[run]
    deadline = time.monotonic() + 60
    while [row["run"] for row in _inbox(tmp_path, "--overdue")] != ["soon"]:  # (nothing decides it: no tick ran)
        assert time.monotonic() < deadline, _inbox(tmp_path, "--overdue")
        time.sleep(0.2)
