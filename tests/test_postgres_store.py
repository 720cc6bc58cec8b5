"""A run kept on a PostgreSQL server, end to end: started by one person's ``mkl run`` in one folder, answered by
``mkl resume`` in another folder that shares no file with it, listed and audited from the store alone; the
server's password in no output byte, no file and no record.

The server is real, started by the tests (tests/postgres_server.py); skipped without PostgreSQL (failed under CI).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from postgres_server import PASSWORD

from mkl_notebook.durable.store_opening import open_store

from support import ROOT, mkl_cli

EXAMPLES = ROOT / "examples"


def _files_holding(folder: Path, secret: str) -> list[str]:
    return [str(path) for path in folder.rglob("*") if path.is_file() and secret.encode() in path.read_bytes()]


def _stored_text(url: str) -> str:
    """Every row of the store's tables as text (the records, the runs list, the pins, what was forgotten)."""
    import psycopg

    with psycopg.connect(url) as connection:
        tables = ("mkl_records", "mkl_runs", "mkl_sources", "mkl_forgotten", "mkl_schema")
        return "\n".join(str(row) for table in tables for row in connection.execute(f"SELECT * FROM {table}"))


def test_a_run_started_in_one_folder_is_answered_from_another_through_the_server_store(
    postgres: Any, tmp_path: Path
) -> None:

    url = postgres.database()
    shown = url.replace(f":{PASSWORD}", "")  # the store as a printed command names it
    alice, bob = tmp_path / "alice", tmp_path / "bob"
    alice.mkdir()
    bob.mkdir()
    for name in ("refund.mkl", "refund.script.yaml"):
        shutil.copy(EXAMPLES / name, alice / name)
    bob_script = bob / "script.yaml"
    shutil.copy(EXAMPLES / "refund.script.yaml", bob_script)
    outputs: list[str] = []

    def mkl(folder: Path, *args: str, env: dict[str, str] | None = None) -> tuple[int, dict[str, Any], str]:
        code, status, out, err = mkl_cli(folder, *args, env=env)
        outputs.extend((out, err))
        return code, status, out + err

    code, asked, said = mkl(
        alice, "run", "refund.mkl", "--script", "refund.script.yaml", "--set", "ticket=Broken", "--hitl",
        "--store", url,
    )  # fmt: skip
    assert (code, asked["status"]) == (3, "suspended"), said
    assert f"--store '{shown}'" in said  # the command that answers it names the store, without its password
    assert not (alice / ".mkl").exists()  # nothing of the run is kept in the folder

    # Bob's folder holds nothing of Alice's: he names the store as the printed command does; the password
    # comes as PostgreSQL's own clients take it.
    code, done, said = mkl(
        bob, "resume", "--store", shown, "--id", asked["run"], "--script", str(bob_script),
        "--question", asked["question_id"], "--reply", "approve",
        env={"PGPASSWORD": PASSWORD},
    )  # fmt: skip
    assert (code, done["status"]) == (0, "done"), said
    assert done["result"] == "Hello! Your order A-1001 qualifies: we will refund it today. (approved)"

    code, listed, said = mkl(alice, "runs", "--store", url)
    assert code == 0, said
    assert [(run["run"], run["status"]) for run in listed["runs"]] == [(asked["run"], "done")]
    code, _audited, said = mkl(bob, "audit", "--store", shown, env={"MKL_STORE": url})  # its password, by $MKL_STORE
    assert code == 0, said
    assert "approve" in said
    code, _, said = mkl(bob, "trace", "--id", asked["run"], "--store", url)
    assert code == 0 and " send " in said, said
    code, _planned, said = mkl(alice, "plan", "refund.mkl", "--id", asked["run"], "--store", url)
    assert code == 0, said

    code, _, said = mkl(bob, "runs", "--store", shown, env={"PGPASSWORD": "wrong"})  # refused in one line
    assert code != 0 and "password authentication failed" in said and "Traceback" not in said, said

    assert not [output for output in outputs if PASSWORD in output]
    assert _files_holding(tmp_path, PASSWORD) == []
    assert PASSWORD not in _stored_text(url)


def test_a_store_url_with_its_password_in_the_query_is_named_without_it(postgres: Any) -> None:

    url = postgres.database().replace(f":{PASSWORD}@", "@") + f"&password={PASSWORD}"
    store = open_store(url)
    try:
        assert PASSWORD not in store.location and "password" not in store.location
        with store.lease("r"):
            store.create("r", {"t": "start", "root": "m"})
    finally:
        store.close()  # type: ignore[attr-defined]


def test_a_database_without_runs_lists_none_and_is_left_as_it_was(postgres: Any, tmp_path: Path) -> None:
    import psycopg

    url = postgres.database()
    code, listed, out, err = mkl_cli(tmp_path, "runs", "--store", url)
    assert (code, listed.get("runs")) == (0, []), out + err
    with psycopg.connect(url) as connection:  # listing made no table
        assert connection.execute("SELECT to_regclass('mkl_runs')").fetchone() == (None,)


@pytest.mark.parametrize("given", ["postgresql://mkl@/nowhere?host=/nonexistent-socket-folder"])
def test_a_server_that_cannot_be_reached_is_one_line(tmp_path: Path, given: str) -> None:
    code, _, _out, err = mkl_cli(tmp_path, "runs", "--store", given)
    assert code != 0 and "Traceback" not in err
    assert err.strip().count("\n") == 0 and "@/nowhere" in err and "failed" in err, err


def _kernel_runs_and_answers(ip: Any, capsys: pytest.CaptureFixture[str], url: str) -> None:
    """The refund run, asked and answered in the kernel: it is kept in the server store, not in the folder, and
    nothing the kernel showed or wrote holds the password."""

    import mkl_notebook

    from support import REFUND, REFUND_RESULT, REFUND_SCRIPT

    ip.define(REFUND)
    ip.run(f"%mkl run refund --script {REFUND_SCRIPT}")  # waits at its escalate gate (a notebook's default)
    assert mkl_notebook.get_run("refund").status == "suspended"
    ip.run(f"%mkl resume refund --question {mkl_notebook.get_run('refund').question_id} --reply approve")
    run = mkl_notebook.get_run("refund")
    assert (run.status, run.result) == ("done", REFUND_RESULT)
    store = open_store(url, read_only=True)
    try:
        assert [(summary.run_id, summary.status) for summary in store.runs()] == [("refund", "done")]
        assert [record["t"] for record in store.read("refund")].count("reply") == 1
    finally:
        store.close()  # type: ignore[attr-defined]
    assert not (ip.tmp / ".mkl" / "runs.sqlite").exists()
    ip.run("%mkl config")
    shown = capsys.readouterr().out + json.dumps([published.data for published in ip.out.published])
    assert "store = postgresql://mkl@/" in shown
    assert PASSWORD not in shown
    assert _files_holding(ip.tmp, PASSWORD) == []
    assert PASSWORD not in _stored_text(url)


def test_a_kernel_configured_with_a_server_store_runs_and_answers_there(
    postgres: Any, ip: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    url = postgres.database()
    ip.run(f"%mkl config store={url}")
    capsys.readouterr()  # (the cell itself names the password: the person typed it there)
    _kernel_runs_and_answers(ip, capsys, url)


def test_a_kernel_takes_its_store_from_mkl_store(
    postgres: Any, load_mkl: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from support import Cells, Recorder

    url = postgres.database()
    monkeypatch.setenv("MKL_STORE", url)
    recorder = Recorder()
    shell = load_mkl(recorder.publish).shell
    _kernel_runs_and_answers(Cells(shell, recorder, tmp_path), capsys, url)


# A command started once everything it loads is loaded, when the file named first appears (polled): two of them go
# on within a millisecond of each other, and race for the run.
_AT_ONCE = """
import os, sys
import mkl_notebook.app.workspace, mkl_notebook.cli.run_cmd, mkl_notebook.durable.store_opening
from mkl_notebook.cli import main
try:
    import psycopg, psycopg_pool
except ImportError:
    pass
print("ready", flush=True)
while not os.path.exists(sys.argv[1]):
    pass
sys.exit(main(sys.argv[2:]))
"""


@pytest.mark.parametrize("store_at", ["sqlite", "postgres"], indirect=True)
def test_two_processes_answering_one_question_at_once_one_reply_wins_and_nothing_is_lost(
    store_at: Any, tmp_path: Path
) -> None:
    from support import env_without_models

    location = store_at.location
    script = str(EXAMPLES / "refund.script.yaml")
    run = ["run", str(EXAMPLES / "refund.mkl"), "--script", script, "--set", "ticket=Broken", "--hitl"]
    code, asked, out, err = mkl_cli(tmp_path, *run, "--store", location)
    assert code == 3, out + err
    go = tmp_path / "go"
    answers = [
        subprocess.Popen(
            [sys.executable, "-c", _AT_ONCE, str(go), "resume", "--store", location, "--id", asked["run"],
             "--script", script, "--question", asked["question_id"], "--reply", reply, "--quiet"],
            cwd=tmp_path, env=env_without_models(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        for reply in ("approve", "reject")
    ]  # fmt: skip
    for answer in answers:  # each has loaded everything and waits for the word
        assert answer.stdout is not None and answer.stdout.readline() == "ready\n"
    go.touch()
    ended = [(answer.wait(timeout=120), *answer.communicate()) for answer in answers]
    assert sorted(code for code, _, _ in ended) == [0, 2], ended  # one answered, the other refused in one line
    (won,) = [json.loads(out.strip().splitlines()[-1]) for code, out, _ in ended if code == 0]
    (refused,) = [err for code, _, err in ended if code != 0]
    assert "Traceback" not in refused and ("already being advanced" in refused or "not waiting" in refused), refused
    held = store_at().read(asked["run"])
    replies = [record for record in held if record["t"] == "reply"]
    assert len(replies) == 1  # the winner's, and nothing of the other's
    assert won["status"] == "done" and [record["t"] for record in held].count("start") == 1
    assert len(held) == len(store_at().read(asked["run"]))


def test_mkl_map_keeps_every_rows_run_on_the_server(postgres: Any, tmp_path: Path) -> None:
    url = postgres.database()
    shutil.copy(EXAMPLES / "refund.mkl", tmp_path / "refund.mkl")
    rows = "".join(json.dumps({"id": f"T{n}", "ticket": f"ticket {n}"}) + "\n" for n in range(3))
    (tmp_path / "rows.jsonl").write_text(rows, encoding="utf-8")
    script = str(EXAMPLES / "refund.script.yaml")
    args = ("map", "refund.mkl", "--over", "rows.jsonl", "--key", "id", "--script", script, "--hitl", "--store", url)
    code, line, out, err = mkl_cli(tmp_path, *args)
    assert (code, line["status"], line["counts"]) == (3, "suspended", {"suspended": 3}), out + err
    assert "--store 'postgresql://mkl@/" in out and PASSWORD not in out + err  # each row's answering command
    code, again, out, err = mkl_cli(tmp_path, *args)  # again: every row replays from the server's journal
    assert all(row["calls"]["made"] == 0 for row in again["rows"]), out + err
    code, listed, out, err = mkl_cli(tmp_path, "runs", "--store", url)
    assert sorted(run["status"] for run in listed["runs"]) == ["suspended"] * 3
    assert not (tmp_path / ".mkl").exists()


@pytest.mark.parametrize(
    ("given", "shown"),
    [
        ("postgresql://alice:s3cret@db.example.org:5433/mkl", "postgresql://alice@db.example.org:5433/mkl"),
        ("postgres://:s3cret@db/mkl?sslmode=require", "postgres://db/mkl?sslmode=require"),
        ("postgresql://alice@db/mkl?password=s3cret&sslmode=require", "postgresql://alice@db/mkl?sslmode=require"),
        ("postgresql://db/mkl?sslpassword=s3cret", "postgresql://db/mkl"),
        ("postgresql://alice@/mkl?host=/run/postgresql", "postgresql://alice@/mkl?host=/run/postgresql"),
        ("folder/runs.sqlite", "folder/runs.sqlite"),
    ],
)
def test_a_store_is_named_without_its_password_and_nothing_else_changes(given: str, shown: str) -> None:
    from mkl_notebook.app.listing import store_flag

    assert store_flag(given) == shown


def test_without_psycopg_a_server_store_is_refused_in_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    from mkl_notebook.durable.errors import StoreError

    monkeypatch.setitem(sys.modules, "psycopg", None)  # as where the postgres extra is not installed
    with pytest.raises(
        StoreError, match=r"^a postgresql:// store needs psycopg .*pip install 'mkl-notebook\[postgres\]'"
    ):
        open_store("postgresql://alice@db/mkl")


def test_the_server_the_tests_start_is_started_without_pytest_and_missing_postgresql_is_one_line() -> None:
    """benchmarks/peers.py and server_store.py start theirs with tests/postgres_server.py, in venvs without pytest."""
    from postgres_server import INSTALL

    script = (
        "import sys\n"
        "sys.modules['pytest'] = None  # importing it fails\n"
        "import postgres_server\n"
        "postgres_server._binary = lambda name: None  # as where PostgreSQL is not installed\n"
        "try:\n"
        "    postgres_server.PostgresServer()\n"
        "except postgres_server.ServerUnavailable as why:\n"
        "    print(why)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT / "tests", capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == INSTALL
