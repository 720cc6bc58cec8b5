"""A run's lease: one writer per run, across threads and processes, and no file left behind per run.

Batches make thousands of runs; each run's lease used to be a file of its own, created on first
use (most of a millisecond of system time on some file systems) and never removed. A lease is now
one byte of the store's lease file. These tests hold what a user relies on: the same run is refused
to a second holder (another thread of this process, another process), other runs are not, a lease
let go (or whose holder died) can be taken again, and the per-run fallback used where byte leases
are not available excludes just the same.
"""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

import pytest

from mkl_notebook.durable import leases
from mkl_notebook.durable.stores import RunBusy, SQLiteStore, StoreError


def taken_elsewhere(store: SQLiteStore, run_id: str) -> bool:
    """Whether another thread is refused run ``run_id``'s lease right now."""
    refused: list[bool] = []

    def attempt() -> None:
        try:
            with store.lease(run_id):
                refused.append(False)
        except RunBusy:
            refused.append(True)

    thread = threading.Thread(target=attempt)
    thread.start()
    thread.join()
    return refused == [True]


@pytest.fixture(params=["byte leases", "a file per run"])
def store(request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> SQLiteStore:
    if request.param == "a file per run":
        monkeypatch.setattr(leases, "BYTE_LEASES", False)
    elif not leases.BYTE_LEASES:
        pytest.skip("this system has no open-file-description locks")
    return SQLiteStore(tmp_path / "runs.sqlite")


def test_a_held_run_is_refused_to_another_thread_and_other_runs_are_not(store: SQLiteStore) -> None:
    with store.lease("a"):
        assert taken_elsewhere(store, "a")
        assert not taken_elsewhere(store, "b")
        with store.lease("b"):  # two runs at once, as a batch holds them
            assert taken_elsewhere(store, "b")
    assert not taken_elsewhere(store, "a") and not taken_elsewhere(store, "b")  # let go: free again


def test_another_process_is_refused_a_held_run_and_gets_it_once_the_holder_dies(store: SQLiteStore) -> None:
    holder = (
        "import sys, time\n"
        "from mkl_notebook.durable import leases\n"
        "from mkl_notebook.durable.stores import SQLiteStore\n"
        "leases.BYTE_LEASES = sys.argv[2] == 'True'\n"
        "store = SQLiteStore(sys.argv[1])\n"
        "with store.lease('held'):\n"
        "    print('holding', flush=True)\n"
        "    time.sleep(600)\n"
    )
    child = subprocess.Popen(
        [sys.executable, "-c", holder, str(store.path), str(leases.BYTE_LEASES)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert child.stdout is not None and child.stdout.readline() == "holding\n"
        with pytest.raises(RunBusy, match="run 'held' is already being advanced"), store.lease("held"):
            pass
        with store.lease("other"):  # the other process holds one run, not the store
            pass
    finally:
        child.kill()
        child.wait()
    with store.lease("held"):  # the kernel let the dead holder's lock go
        pass


def test_many_runs_leave_one_lease_file(tmp_path: Path) -> None:
    if not leases.BYTE_LEASES:
        pytest.skip("this system has no open-file-description locks")
    store = SQLiteStore(tmp_path / "runs.sqlite")
    for number in range(200):
        with store.lease(f"row-{number}"):
            pass
    assert len(list((tmp_path / "locks").iterdir())) == 1


def test_a_lease_folder_that_cannot_be_made_is_one_clear_error(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "runs.sqlite")
    (tmp_path / "locks").write_text("a file where the folder should be")
    with pytest.raises(StoreError, match=r"locks.*cannot be opened to take a lease") as caught, store.lease("r"):
        pass
    assert not isinstance(caught.value, RunBusy)
