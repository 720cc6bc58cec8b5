"""The store contract, one suite for every kind of store: in memory, an SQLite file, a PostgreSQL server.

A store keeps each run's records in order and hands them back as a fresh reader of it would read them, says
which runs it holds and where each stands, remembers what it held of a run it dropped, and lets one process at
a time advance a run (a lease), which a holder that dies lets go. The PostgreSQL tests run on a real server the
tests start (tests/postgres_server.py).
"""

from __future__ import annotations

import datetime
import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from typing import Any

import pytest

from mkl_notebook.durable import runs
from mkl_notebook.durable.errors import RunBusy, StoreError
from mkl_notebook.durable.stores import RunStatus, UnknownRun
from mkl_notebook.engine.options import RunOptions
from mkl_notebook.lang.loader import load
from mkl_notebook.providers.host import HostOracle, Registry
from mkl_notebook.providers.scripted import ScriptedOracle

from support import LOOKUP, ROOT

START = {"t": "start", "root": "m", "inputs": {"ticket": "broken"}}


def test_records_read_back_as_appended_from_any_point(store_at: Any) -> None:
    store = store_at()
    assert not store.exists("r")
    with store.lease("r"):
        assert store.create("r", START) == START
        store.append("r", {"t": "answer", "pos": "a/1", "answer": {"value": {"n": 1, "list": [1, "two", None]}}})
        store.append("r", {"t": "reply", "pos": "b/1", "reply": "approve"})
        assert [record["t"] for record in store.read("r", since=1)] == ["answer", "reply"]
    fresh = store_at()
    assert fresh.exists("r")
    held = fresh.read("r")
    assert held == [
        START,
        {"t": "answer", "pos": "a/1", "answer": {"value": {"n": 1, "list": [1, "two", None]}}},
        {"t": "reply", "pos": "b/1", "reply": "approve"},
    ]
    assert fresh.read("r", since=2) == held[2:]
    assert fresh.read("r", since=3) == []
    with pytest.raises(UnknownRun, match="no run 'other'"):
        fresh.read("other")


def test_the_runs_list_says_where_each_run_stands(store_at: Any) -> None:
    store = store_at()
    for run_id in ("first", "second"):
        with store.lease(run_id):
            store.create(run_id, START)
    store.set_status("first", "suspended", None, "gate/1")
    with store.lease("second"):
        store.append_ending("second", {"t": "finish", "pos": "end"}, RunStatus("halt", "budget spent", "x/2"))
    listed = {run.run_id: (run.machine, run.status, run.error, run.at) for run in store_at().runs()}
    assert listed == {"first": ("m", "suspended", None, "gate/1"), "second": ("m", "halt", "budget spent", "x/2")}
    assert [run.run_id for run in store_at().runs()] == ["first", "second"]  # the most recently changed last
    assert store_at().read("second")[-1] == {"t": "finish", "pos": "end"}


def test_a_dropped_run_is_gone_and_what_it_held_is_remembered(store_at: Any) -> None:
    store = store_at()
    with store.lease("r"):
        store.create("r", START)
        store.append("r", {"t": "answer", "pos": "a/1"})
        store.set_status("r", "suspended", None, None)
        store.delete("r")
    fresh = store_at()
    assert not fresh.exists("r") and fresh.runs() == []
    with pytest.raises(UnknownRun):
        fresh.read("r")
    (gone,) = fresh.forgotten("r")
    assert (gone.records, gone.status) == (2, "suspended")
    assert gone.shared([START, {"t": "answer", "pos": "a/1"}]) == 2
    with store.lease("r"):  # started over: the history it replaces is remembered too
        store.create("r", {**START, "inputs": {"ticket": "other"}})
        store.create("r", START)
    assert len(store_at().forgotten("r")) == 2
    assert store_at().read("r") == [START]


def test_a_machine_pinned_by_a_run_is_read_back_whole(store_at: Any) -> None:
    source = "machine: m\nentry: a\n" + "# a long machine\n" * 200
    pins = {"m": {"sha256": hashlib.sha256(source.encode()).hexdigest(), "source": source}}
    store = store_at()
    for run_id in ("one", "two"):
        with store.lease(run_id):
            store.create(run_id, {**START, "machines": pins})
    assert store_at().read("two")[0]["machines"] == pins


ODD = {"pair": (1, 2), "by id": {3: "int key"}, "when": datetime.date(2026, 12, 2), "nested": [("a", None)]}


def same_json(left: Any, right: Any) -> bool:
    """Equal, and of the same JSON types all the way down (a tuple is not a list, an int key not a str)."""
    if type(left) is not type(right):
        return False
    if isinstance(left, dict):
        return left.keys() == right.keys() and all(same_json(left[key], right[key]) for key in left)
    if isinstance(left, list):
        return len(left) == len(right) and all(same_json(a, b) for a, b in zip(left, right, strict=True))
    return bool(left == right)


@pytest.mark.parametrize("store_at", ["sqlite", "postgres"], indirect=True)
def test_the_records_a_run_hands_back_are_the_stores_down_to_their_types(store_at: Any) -> None:
    """While a store holds a run's lease it keeps what it commits and reads that back: nothing a caller sees
    differs from what a fresh reader of the store would see, down to the JSON types and the order of keys."""
    registry = Registry()

    @registry.tool(effect="read")
    def lookup(q: str) -> dict[Any, Any]:
        return dict(ODD)  # a tuple, an int key and a date: none of them JSON as they are

    outcome = runs.start(
        load(LOOKUP),
        HostOracle(ScriptedOracle({"produce": ["used it"]}), registry),
        store=store_at(),
        run_id="odd",
        options=RunOptions(suspendable=True),
    )
    assert outcome.result.status == "done"
    fresh = store_at().read("odd")
    assert len(fresh) == len(outcome.records) == 4
    assert same_json(outcome.records, fresh)
    # ... and in the same order of keys: a notebook's checkpoint is their JSON text, byte for byte
    assert json.dumps(outcome.records) == json.dumps(fresh)
    assert outcome.records[1]["answer"]["value"] == {
        "pair": [1, 2],
        "by id": {"3": "int key"},
        "when": "2026-12-02",
        "nested": [["a", None]],
    }


@pytest.mark.parametrize("store_at", ["sqlite", "postgres"], indirect=True)
def test_a_store_reads_its_runs_again_once_it_lets_the_lease_go(store_at: Any) -> None:
    """Two stores on one file or database, as a notebook session and a `mkl resume` in a terminal: each
    advance under its own lease sees what the other wrote, and numbers its records after them."""
    notebook, terminal = store_at(), store_at()
    with notebook.lease("r"):
        notebook.create("r", {"t": "start", "root": "m"})
        notebook.append("r", {"t": "answer", "pos": "a/1"})
        assert [record["t"] for record in notebook.read("r", since=1)] == ["answer"]
    with terminal.lease("r"):
        assert len(terminal.read("r")) == 2
        terminal.append("r", {"t": "reply", "pos": "b/1"})
    with notebook.lease("r"):
        assert [record["pos"] for record in notebook.read("r", since=1)] == ["a/1", "b/1"]
        notebook.append("r", {"t": "finish", "pos": "c/1"})  # the next number after the terminal's record
        assert [record["t"] for record in notebook.read("r", since=2)] == ["reply", "finish"]
    assert [record["t"] for record in terminal.read("r")] == ["start", "answer", "reply", "finish"]


def test_a_bad_run_id_is_refused_before_anything_is_kept(store_at: Any) -> None:
    store = store_at()
    with pytest.raises(StoreError, match="run id 'no good!' is not usable"):
        runs.start(load(LOOKUP), ScriptedOracle({}), store=store, run_id="no good!")
    assert store.runs() == []


def test_a_run_leased_here_is_refused_to_another_lease(store_at: Any) -> None:
    store = store_at()
    with store.lease("r"):
        with pytest.raises(RunBusy, match="run 'r' is already being advanced"), store_at().lease("r"):
            pass
        with store_at().lease("another"):  # other runs are not held
            pass
    with store_at().lease("r"):  # let go with the block
        pass


_HOLDER = """
import sys
from mkl_notebook.durable.store_opening import open_store
store = open_store(sys.argv[1])
with store.lease("r"):
    print("held", flush=True)
    sys.stdin.read()
"""


def _holder(location: str) -> subprocess.Popen[str]:
    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLDER, location],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert holder.stdout is not None
    assert holder.stdout.readline() == "held\n"
    return holder


def _lease_when_free(store: Any, within: float = 30) -> None:
    deadline = time.monotonic() + within
    while True:  # polled: the server ends a dead client's session when it sees its socket closed
        try:
            with store.lease("r"):
                return
        except RunBusy:
            if time.monotonic() > deadline:
                raise


@pytest.mark.parametrize("store_at", ["sqlite", "postgres"], indirect=True)
def test_another_process_holding_the_lease_is_waited_for_and_a_killed_one_lets_go(store_at: Any) -> None:
    store = store_at()
    with store.lease("r"):
        store.create("r", START)
    holder = _holder(store_at.location)
    try:
        with pytest.raises(RunBusy, match="already being advanced by another process"), store.lease("r"):
            pass
        holder.send_signal(signal.SIGKILL)
        holder.wait()
        _lease_when_free(store)
        with store.lease("r"):
            store.append("r", {"t": "answer", "pos": "a/1"})
        assert [record["t"] for record in store_at().read("r")] == ["start", "answer"]
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait()


_WRITER = """
import sys
from mkl_notebook.durable.store_opening import open_store
store = open_store(sys.argv[1])
with store.lease("r"):
    store.create("r", {"t": "start", "root": "m"})
    for n in range(1_000_000):
        store.append("r", {"t": "answer", "pos": f"a/{n}", "n": n, "text": "x" * 2000})
        if n == 20:
            print("writing", flush=True)
"""


@pytest.mark.parametrize("store_at", ["sqlite", "postgres"], indirect=True)
def test_a_writer_killed_mid_commit_leaves_every_record_whole_and_in_order(store_at: Any) -> None:
    writer = subprocess.Popen(
        [sys.executable, "-c", _WRITER, store_at.location],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert writer.stdout is not None and writer.stdout.readline() == "writing\n"
    writer.send_signal(signal.SIGKILL)  # while it commits one record after another
    writer.wait()
    store = store_at()
    _lease_when_free(store)
    with store.lease("r"):
        held = store.read("r")
        assert [record.get("n") for record in held[1:]] == list(range(len(held) - 1))
        assert all(record["text"] == "x" * 2000 for record in held[1:])
        assert len(held) > 21
        store.append("r", {"t": "answer", "pos": "after", "n": len(held) - 1, "text": ""})
    assert store_at().read("r")[-1]["pos"] == "after"
