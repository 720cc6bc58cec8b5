"""The SQLite journal's own ways: machines pinned once in its file, JSON keys of several kinds, an ending
committed with its status. (What every store does alike, SQLite's included, is tests/test_store_contract.py.)
"""

from __future__ import annotations

import hashlib
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from mkl_notebook.durable import runs
from mkl_notebook.durable.stores import SQLiteStore, StoreError
from mkl_notebook.lang.loader import load
from mkl_notebook.providers.host import HostOracle, Registry
from mkl_notebook.providers.scripted import ScriptedOracle

from support import LOOKUP


def _pins(source: str, sha256: str | None = None) -> dict[str, Any]:
    return {"m": {"sha256": sha256 or hashlib.sha256(source.encode()).hexdigest(), "source": source}}


def test_a_machine_pinned_by_many_runs_is_kept_once_and_read_back_whole(tmp_path: Path) -> None:
    path = tmp_path / "runs.sqlite"
    store = SQLiteStore(path)
    source = "machine: m\nentry: a\n" + "# a long machine\n" * 2000
    for run_id in ("one", "two", "three"):
        with store.lease(run_id):
            store.create(run_id, {"t": "start", "root": "m", "machines": _pins(source)})
    with sqlite3.connect(path) as db:
        assert db.execute("SELECT COUNT(*) FROM sources").fetchone() == (1,)
        (body,) = db.execute("SELECT body FROM records WHERE run_id = 'two'").fetchone()
    assert len(body) < 300  # the record names the machine by its hash
    for reader in (store, SQLiteStore(path)):
        assert reader.read("three")[0]["machines"] == _pins(source)


def test_a_pin_whose_hash_is_not_its_sources_stays_in_its_record_and_never_stands_for_that_hash(
    tmp_path: Path,
) -> None:
    """A start record from someone else's notebook may claim any hash: it cannot put its text under the hash
    of a machine another run pins."""
    path = tmp_path / "runs.sqlite"
    store = SQLiteStore(path)
    honest = "machine: m\nentry: a\n"
    claimed = _pins(honest)["m"]["sha256"]
    with store.lease("forged"):
        store.create("forged", {"t": "start", "root": "m", "machines": _pins("machine: evil\n", claimed)})
    with store.lease("honest"):
        store.create("honest", {"t": "start", "root": "m", "machines": _pins(honest)})
    fresh = SQLiteStore(path)
    assert fresh.read("honest")[0]["machines"]["m"]["source"] == honest
    assert fresh.read("forged")[0]["machines"]["m"]["source"] == "machine: evil\n"


def test_a_store_that_lost_a_pinned_source_says_so(tmp_path: Path) -> None:
    path = tmp_path / "runs.sqlite"
    SQLiteStore(path).create("r", {"t": "start", "root": "m", "machines": _pins("machine: m\n")})
    with sqlite3.connect(path) as db:
        db.execute("DELETE FROM sources")
    with pytest.raises(StoreError, match=r"run 'r' pins machine 'm', which the store lacks"):
        SQLiteStore(path).read("r")


def _run_with_lookup(tmp_path: Path, value: dict[Any, Any]) -> runs.Outcome:
    registry = Registry()

    @registry.tool(effect="read")
    def lookup(q: str) -> dict[Any, Any]:
        return value  # JSON keys are text: sorting 1 beside "b" as they are fails

    oracle = HostOracle(ScriptedOracle({"produce": ["used it"]}), registry)
    return runs.start(load(LOOKUP), oracle, store=SQLiteStore(tmp_path / "runs.sqlite"), run_id="keys")


def test_a_tool_value_with_keys_of_several_kinds_is_journaled_with_json_text_keys(tmp_path: Path) -> None:
    outcome = _run_with_lookup(tmp_path, {1: "one", "b": 2, None: [{2.5: True}]})
    assert outcome.result.status == "done"
    kept = SQLiteStore(tmp_path / "runs.sqlite").read("keys")[1]["answer"]["value"]
    assert kept == {"1": "one", "b": 2, "null": [{"2.5": True}]}


def test_a_tool_value_with_two_keys_that_are_one_in_json_stops_the_run_saying_so(tmp_path: Path) -> None:
    outcome = _run_with_lookup(tmp_path, {1: "one", "1": "also one"})  # nothing guessed: which would win?
    assert outcome.result.status == "halt"
    assert "a mapping has two keys that are both '1' in JSON" in str(outcome.result.error)


def test_a_runs_ending_and_its_status_are_committed_together_or_not_at_all(tmp_path: Path) -> None:
    path = tmp_path / "runs.sqlite"
    store = SQLiteStore(path)
    with sqlite3.connect(path) as db:  # the status can no longer be written: the ending must not be either
        db.execute("CREATE TRIGGER no_status BEFORE UPDATE ON runs BEGIN SELECT RAISE(ABORT, 'status refused'); END")
    machine = load(LOOKUP)
    registry = Registry()
    registry.tool(lambda q: {"found": q}, name="lookup", effect="read")
    oracle = HostOracle(ScriptedOracle({"produce": ["used it"]}), registry)
    with pytest.raises(StoreError, match="status refused"):
        runs.start(machine, oracle, store=store, run_id="ending")
    fresh = SQLiteStore(path)
    kinds = [record["t"] for record in fresh.read("ending")]
    assert kinds == ["start", "answer", "answer"]  # every answer kept, no finish record
    assert [(run.run_id, run.status) for run in fresh.runs()] == [("ending", "running")]
    with sqlite3.connect(path) as db:
        db.execute("DROP TRIGGER no_status")
    outcome = runs.start(machine, oracle, store=SQLiteStore(path), run_id="ending")  # goes on from its answers
    assert outcome.status == "done" and outcome.calls["made"] == 0
    assert [(run.run_id, run.status) for run in SQLiteStore(path).runs()] == [("ending", "done")]
