"""A store remembers the histories it drops (a run forgotten, or started over with ``--fresh``), so that an older
copy of one put back is recognised as older: it is never taken up as if it were new (see
``test_stale_copies.py`` for the whole road, with real kernels and the ``mkl`` command)."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from mkl_notebook.app.reconcile import STALE, Copy, reconcile
from mkl_notebook.app.trust import Keyring
from mkl_notebook.durable.stores import MemoryStore, RunStore, SQLiteStore


def _history(word: str, length: int) -> list[dict[str, Any]]:
    return [{"t": "start", "run": "r", "root": "m", "word": word}] + [{"t": "step", "n": n} for n in range(length - 1)]


def _put(store: RunStore, records: list[dict[str, Any]]) -> None:
    with store.lease("r"):
        store.create("r", records[0])
        for record in records[1:]:
            store.append("r", record)
    store.set_status("r", "done", None, None)


@pytest.fixture(params=["memory", "sqlite"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> RunStore:
    return MemoryStore() if request.param == "memory" else SQLiteStore(tmp_path / "runs.sqlite")


def test_a_deleted_history_is_remembered_by_its_prefixes_only(store: RunStore) -> None:
    held = _history("a", 6)
    _put(store, held)
    assert store.forgotten("r") == []
    store.delete("r")
    assert not store.exists("r")
    [gone] = store.forgotten("r")
    assert (gone.records, gone.status) == (6, "done")
    assert "step" not in gone.encode()  # what the records said is gone with them
    assert [gone.shared(held[:n]) for n in (1, 3, 6)] == [1, 3, 6]
    assert not gone.outgrown_by(held[:3])  # older: refused
    assert gone.outgrown_by(held) and gone.outgrown_by([*held, {"t": "step", "n": 99}])  # as far or further
    assert not gone.outgrown_by([*held[:2], {"t": "step", "n": 7}])  # another way from the same start
    assert gone.outgrown_by(_history("b", 3))  # another run of that id: shares nothing


def test_a_history_started_over_is_remembered_and_its_older_copies_are_not_taken_up(store: RunStore) -> None:
    old = _history("a", 5)
    _put(store, old)
    _put(store, _history("fresh", 2))  # --fresh: a new history of the same id replaces the old one
    assert [gone.records for gone in store.forgotten("r")] == [5]
    copy = Copy({"run_id": "r"}, old[:3], None, "old.ipynb")
    reconciled = reconcile(store, "r", [copy], Keyring([]), trust_file=True)
    [judged] = reconciled.judged
    assert judged.status == STALE and not judged.taken and judged.forgotten is not None
    assert reconciled.older is not None and "old.ipynb" in str(reconciled.older)
    assert len(store.read("r")) == 2  # the new history stands, nothing of the old added or kept beside it
    assert not [summary for summary in store.runs() if summary.run_id != "r"]


def test_a_store_made_before_it_remembered_histories_reads_as_remembering_none(tmp_path: Path) -> None:
    path = tmp_path / "runs.sqlite"
    _put(SQLiteStore(path), _history("a", 3))
    with sqlite3.connect(path) as db:
        db.execute("DROP TABLE forgotten")
    assert SQLiteStore(path, read_only=True).forgotten("r") == []
    store = SQLiteStore(path)  # opened to write, it makes the table
    store.delete("r")
    assert [gone.records for gone in store.forgotten("r")] == [3]


def test_a_damaged_row_of_a_remembered_history_is_set_aside(tmp_path: Path) -> None:
    path = tmp_path / "runs.sqlite"
    store = SQLiteStore(path)
    _put(store, _history("a", 3))
    store.delete("r")
    with sqlite3.connect(path) as db:
        db.execute('UPDATE forgotten SET body = \'{"records": "x"\'')
    assert SQLiteStore(path).forgotten("r") == []
