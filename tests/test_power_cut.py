"""A power cut leaves a person's file as it was or as it was written, never older: every replacement of a file
(a notebook's write-back, a mark that a payment is under way, a checkpoint file, the trusted keys, a new signing
key) syncs the file, renames it into place, and then syncs its folder, where the rename lives.

The real writers, run in this process, with the system calls they make observed (a power cut cannot be made
here; what makes it harmless can be seen)."""

from __future__ import annotations

import os
import shutil
import stat
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from mkl_notebook.app.trust import Keyring
from mkl_notebook.checkpoints import envelope
from mkl_notebook.checkpoints import notebook_file as nbfile
from mkl_notebook.checkpoints.marks import mark_advancing, set_side_mark

Event = tuple[str, str]  # ("renamed", the file's path) or ("synced folder", the folder's path)


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[Event]]:
    """What the writers do to the disk, in order: each rename into place, and each folder synced."""
    events: list[Event] = []
    replace, fsync = os.replace, os.fsync

    def replacing(source: object, target: object, *args: object, **kwargs: object) -> None:
        replace(source, target, *args, **kwargs)  # type: ignore[arg-type]
        events.append(("renamed", str(Path(str(target)).resolve())))

    def syncing(fd: int) -> None:
        fsync(fd)
        if stat.S_ISDIR(os.fstat(fd).st_mode):
            events.append(("synced folder", os.readlink(f"/proc/self/fd/{fd}")))

    monkeypatch.setattr(os, "replace", replacing)
    monkeypatch.setattr(os, "fsync", syncing)
    yield events


def _durable(events: list[Event], write: Callable[[], object]) -> list[str]:
    """Run ``write``; the files it renamed into place, each checked to have had its folder synced after."""
    events.clear()
    write()
    renamed = [path for kind, path in events if kind == "renamed"]
    for at, (kind, path) in enumerate(events):
        if kind == "renamed":
            after = [folder for later, folder in events[at + 1 :] if later == "synced folder"]
            assert str(Path(path).parent) in after, f"{path} was renamed into place, its folder never synced: {events}"
    return renamed


@pytest.mark.skipif(not Path("/proc/self/fd").exists(), reason="reads which folder a descriptor is from /proc")
def test_every_file_a_person_keeps_is_renamed_into_place_and_its_folder_synced(
    waiting: Path, tmp_path: Path, calls: list[Event]
) -> None:
    notebook = tmp_path / "shared.ipynb"
    shutil.copy(waiting, notebook)
    run = nbfile.find_run(notebook, "r")

    assert _durable(calls, lambda: nbfile.keep_in_metadata(notebook)) == [str(notebook.resolve())]
    held = len(run.records)
    assert _durable(calls, lambda: mark_advancing(notebook, "r", "/a/store", held)) == [str(notebook.resolve())]
    beside = _durable(calls, lambda: set_side_mark(notebook, "r", "/a/store", held))
    assert [Path(path).name for path in beside] == [".shared.ipynb.mkl-advancing.json"]

    checkpoint = tmp_path / "r.mklrun.json"
    assert _durable(calls, lambda: envelope.write_file(checkpoint, run.raw or {})) == [str(checkpoint.resolve())]

    keyring = Keyring(tmp_path / "keys")
    calls.clear()
    keyring.signer()  # a new signing key: linked into place, its folder synced
    assert ("synced folder", str((tmp_path / "keys").resolve())) in calls
    trusted = _durable(calls, lambda: keyring.add("ed25519:" + "A" * 43 + "=", "bob", "2026-12-07T00:00:00Z"))
    assert [Path(path).name for path in trusted] == ["trusted-keys.json"]
