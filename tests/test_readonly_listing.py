"""Reading is read-only: listing a store, a folder or a notebook makes, migrates, chmods or writes no file.

A store is opened only when it is one of ours (its header says so, or its tables are exactly a store's of an
earlier release), and then read-only; under a listed folder no link out of it is followed. Commands that write
a store refuse a file that is there and is not one of ours, instead of adding their tables to it.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import sqlite3
from pathlib import Path

import pytest

from mkl_notebook.durable.stores import SQLiteStore

from support import EXAMPLES, REFUND, REFUND_ASK, REFUND_SCRIPT, RUN_MIME, Cells, mkl_cli

LEGACY = Path(__file__).resolve().parent / "fixtures" / "legacy" / "runs.sqlite"


def untouched(path: Path) -> tuple[str, int, int, list[str]]:
    """What a reader must leave as it was: the file's bytes (hash), mode and mtime, and the files beside it whose
    names begin with its name (``-wal``, ``-shm``, ``-journal``)."""
    status = path.stat()
    siblings = sorted(other.name for other in path.parent.iterdir() if other.name.startswith(path.name))
    return hashlib.sha256(path.read_bytes()).hexdigest(), status.st_mode, status.st_mtime_ns, siblings


def app_database(path: Path, journal: str = "delete") -> Path:
    """Someone's SQLite database that is not a run store: a table with rows, readable by all (0644)."""
    with contextlib.closing(sqlite3.connect(path)) as db:
        db.execute(f"PRAGMA journal_mode={journal}")
        with db:
            db.execute("CREATE TABLE outcomes (id INTEGER PRIMARY KEY, body TEXT)")
            db.executemany("INSERT INTO outcomes (body) VALUES (?)", [("paid",), ("refunded",)])
    path.chmod(0o644)
    return path


def waiting_run(folder: Path, run_id: str, *store: str) -> None:
    """Run ``refund`` in ``folder`` until it asks for approval (in its default store, or ``--store PATH``)."""
    folder.mkdir(parents=True, exist_ok=True)
    code, status, _, err = mkl_cli(
        folder, "run", str(EXAMPLES / "refund.mkl"), "--id", run_id, "--hitl", "--script", str(REFUND_SCRIPT),
        "--set", "ticket=broken", *store,
    )  # fmt: skip
    assert code == 3 and status["status"] == "suspended", err


@pytest.mark.parametrize("journal", ["delete", "wal"])
def test_a_listed_folder_refuses_a_store_linked_out_of_it_and_leaves_the_database_it_names_as_it_was(
    tmp_path: Path, journal: str
) -> None:
    """A cloned repository ships ``.mkl/runs.sqlite -> ../../app.db``: `mkl runs REPO` lists the questions of
    the real stores in it, says it did not follow the link, and app.db stays byte for byte as it was."""
    app = app_database(tmp_path / "app.db", journal)
    repo = tmp_path / "repo"
    (repo / ".mkl").mkdir(parents=True)
    (repo / ".mkl" / "runs.sqlite").symlink_to(Path("..") / ".." / "app.db")
    (tmp_path / "outside").mkdir()  # a store's folder that is itself a link out of the repository
    shutil.copy(app, tmp_path / "outside" / "runs.sqlite")
    (repo / "linked").mkdir()
    (repo / "linked" / ".mkl").symlink_to(tmp_path / "outside")
    waiting_run(repo / "work", "ours")
    ours = repo / "work" / ".mkl" / "runs.sqlite"
    before = untouched(app), untouched(tmp_path / "outside" / "runs.sqlite"), untouched(ours)

    code, status, out, err = mkl_cli(tmp_path, "runs", "repo")

    assert (untouched(app), untouched(tmp_path / "outside" / "runs.sqlite"), untouched(ours)) == before
    assert code == 1, err  # something under the folder was not read
    [question] = status["questions"]
    assert (question["where"], question["run"], question["ask"]) == ("repo/work/.mkl/runs.sqlite", "ours", REFUND_ASK)
    assert f"repo/work/.mkl/runs.sqlite: ours asks {REFUND_ASK!r}" in out
    assert status["not_read"] == [
        "repo/.mkl/runs.sqlite: a link out of repo, not followed",
        "repo/linked/.mkl/runs.sqlite: a link out of repo, not followed",
    ]
    assert "not read: repo/.mkl/runs.sqlite: a link out of repo, not followed" in out
    with contextlib.closing(sqlite3.connect(f"file:{app}?mode=ro", uri=True)) as db:
        assert db.execute("SELECT body FROM outcomes ORDER BY id").fetchall() == [("paid",), ("refunded",)]


def test_a_store_file_under_a_listed_folder_that_is_not_ours_is_named_and_not_changed(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    (repo / ".mkl").mkdir(parents=True)
    foreign = app_database(repo / ".mkl" / "runs.sqlite")
    before = untouched(foreign)
    code, status, _, err = mkl_cli(tmp_path, "runs", "repo")
    assert code == 1, err
    assert status == {"questions": [], "stale": [], "not_read": ["repo/.mkl/runs.sqlite is not an mkl run store"]}
    assert untouched(foreign) == before


def test_listing_a_store_that_is_not_there_makes_none(tmp_path: Path) -> None:
    for args in (["runs"], ["runs", "--store", "elsewhere/runs.sqlite"], ["runs", "mine.sqlite"]):
        code, _, _, err = mkl_cli(tmp_path, *args)
        assert code == 2 and err.count("\n") == 1 and "no such run store" in err, (args, err)
        assert "Traceback" not in err
    assert sorted(os.listdir(tmp_path)) == []


def test_listing_a_file_that_is_not_a_store_says_so_in_one_line_and_leaves_it(tmp_path: Path) -> None:
    app = app_database(tmp_path / "app.db", "wal")
    text = tmp_path / "notes.sqlite"
    text.write_text("not a database\n", encoding="utf-8")
    before = untouched(app), untouched(text)
    for path in ("app.db", "notes.sqlite"):
        code, _, _, err = mkl_cli(tmp_path, "runs", "--store", path)
        assert (code, err) == (2, f"mkl: error: {path} is not an mkl run store\n")
    assert (untouched(app), untouched(text)) == before


def test_listing_our_own_store_writes_nothing_and_leaves_no_file_beside_it(tmp_path: Path) -> None:
    waiting_run(tmp_path, "mine")
    waiting_run(tmp_path, "theirs", "--store", "other.sqlite")
    store = tmp_path / ".mkl" / "runs.sqlite"
    before = untouched(store), untouched(tmp_path / "other.sqlite")
    listed = [
        mkl_cli(tmp_path, "runs"),
        mkl_cli(tmp_path, "runs", ".mkl/runs.sqlite"),
        mkl_cli(tmp_path, "runs", "--store", "other.sqlite"),
    ]
    assert [(code, [run["run"] for run in status["runs"]]) for code, status, _, _ in listed] == [
        (0, ["mine"]),
        (0, ["mine"]),
        (0, ["theirs"]),
    ]
    assert (untouched(store), untouched(tmp_path / "other.sqlite")) == before


def test_a_listing_sees_what_a_writer_that_still_has_the_store_open_committed(tmp_path: Path) -> None:
    """While a writer (a kernel, say) has the store open its last records are in the WAL file: a listing reads
    them there, and leaves no file the writer did not make."""
    waiting_run(tmp_path, "first")
    path = tmp_path / ".mkl" / "runs.sqlite"
    writer = SQLiteStore(path)
    try:
        writer.create("second", {"t": "start", "root": "refund"})
        assert Path(f"{path}-wal").exists()  # what it committed is (also) in the WAL file
        code, status, _, err = mkl_cli(tmp_path, "runs")
        assert code == 0, err
        assert [run["run"] for run in status["runs"]] == ["first", "second"]
    finally:
        writer.close()
    assert sorted(os.listdir(path.parent)) == ["locks", "runs.sqlite"]


def test_a_store_of_an_earlier_release_still_lists_and_is_not_migrated_by_listing(tmp_path: Path) -> None:
    old = tmp_path / "old.sqlite"
    shutil.copy(LEGACY, old)
    before = untouched(old)
    code, status, _, err = mkl_cli(tmp_path, "runs", "--store", "old.sqlite")
    assert code == 0, err
    assert len(status["runs"]) > 3
    assert untouched(old) == before


def test_commands_that_write_a_store_refuse_a_file_that_is_not_ours(tmp_path: Path) -> None:
    """`mkl run` with --store naming someone's database, or in a folder whose store is a link to one: one line,
    exit 2, and the database as it was. A store of an earlier release is written (and so made ours)."""
    app = app_database(tmp_path / "app.db")
    (tmp_path / "repo" / ".mkl").mkdir(parents=True)
    (tmp_path / "repo" / ".mkl" / "runs.sqlite").symlink_to(app)
    before = untouched(app)
    run = ["run", str(EXAMPLES / "refund.mkl"), "--script", str(REFUND_SCRIPT), "--set", "ticket=broken"]
    for folder, store in ((tmp_path, ["--store", "app.db"]), (tmp_path / "repo", [])):
        code, _, _, err = mkl_cli(folder, *run, *store)
        assert code == 2 and err.count("\n") == 1, err
        assert err.endswith("is not an mkl run store\n"), err
    assert untouched(app) == before

    old = tmp_path / "old.sqlite"
    shutil.copy(LEGACY, old)
    code, _, _, err = mkl_cli(tmp_path, *run, "--store", "old.sqlite", "--id", "new-here")
    assert code == 0, err
    assert "new-here" in [run["run"] for run in mkl_cli(tmp_path, "runs", "--store", "old.sqlite")[1]["runs"]]


def test_the_magics_listings_make_no_store(ip: Cells, capsys: pytest.CaptureFixture[str]) -> None:
    ip.define(REFUND)
    ip.run("%mkl runs")
    ip.run("%mkl pending")
    assert "No run is waiting for a person." in capsys.readouterr().out
    assert not (ip.tmp / ".mkl").exists()


def test_the_magics_list_a_store_they_have_not_opened_without_writing_it(
    ip: Cells, capsys: pytest.CaptureFixture[str]
) -> None:
    waiting_run(ip.tmp, "from-the-terminal")
    store = ip.tmp / ".mkl" / "runs.sqlite"
    before = untouched(store)
    ip.define(REFUND)
    ip.out.clear()
    ip.run("%mkl runs")
    assert "from-the-terminal" in ip.out.last("text/html")["text/plain"]
    assert untouched(store) == before
    ip.run("%mkl pending")
    assert json.dumps(ip.out.last(RUN_MIME)).count("from-the-terminal")


def test_a_trace_of_a_run_in_a_folder_without_a_store_makes_no_store(tmp_path: Path) -> None:
    """Asking for a run where there is none says so in one line and leaves the folder as it was."""
    code, status, _, err = mkl_cli(tmp_path, "trace", "--id", "nope")
    assert code == 2 and "no run 'nope'" in err and status["status"] == "error", err
    assert list(tmp_path.iterdir()) == []
