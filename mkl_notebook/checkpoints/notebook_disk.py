"""A notebook file on disk: read once per state of the file, replaced atomically, and locked for one writer.

This module handles the ``.ipynb`` file itself: parsing it within a notebook's bounds, keeping its index per
state on disk, Jupyter's JSON layout, the atomic replace and the lock beside the file. What is read out of it or
written into it lives apart: runs in :mod:`checkpoints.notebook_file`, the marks of runs being advanced in
:mod:`checkpoints.marks`, and cells, forms' places, papermill and jupytext in :mod:`checkpoints.notebook_cells`.
"""

from __future__ import annotations

import contextlib
import glob
import json
import os
import stat
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..durable.disk import replace_file
from ..errors import UserError
from ..lang import files

TEMP_SUFFIX = ".mkl-tmp"
LOCK_WAIT = 60.0  # seconds a write-back waits for another writer of the same notebook


class NotebookFileError(UserError, ValueError):
    """A notebook file that cannot be read or holds no such run."""


def read_json(path: str | Path) -> dict[str, Any]:
    """The notebook at ``path``, parsed within a notebook's bounds; what is not a notebook is refused in one line."""
    path = Path(path)
    try:
        text = files.read_text(path, files.NOTEBOOK_LIMIT)
        data = files.parse_json(text, depth=files.DOCUMENT_DEPTH, values=files.document_values(len(text)))
    except OSError as exc:
        raise NotebookFileError(f"{path}: cannot be read ({exc.strerror or exc})") from None
    except files.UnfitJson as exc:
        raise NotebookFileError(f"{path}: {exc} to be read as a notebook") from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise NotebookFileError(f"{path}: is not a notebook (not valid JSON: {exc})") from None
    if not isinstance(data, dict) or not isinstance(data.get("cells"), list):
        raise NotebookFileError(f"{path}: is not a notebook (no cells)")
    return data


@dataclass
class _Index:
    """One notebook file as read in one state on disk (its inode, size and modification time): the parsed
    document, which no reader changes, and what readers found in it (by reader), found once per state."""

    state: tuple[int, int, int]
    document: dict[str, Any]
    found: dict[str, Any] = field(default_factory=dict)


_FILES_KEPT = 8  # notebooks whose index is kept, each for one state of the file on disk
_INDEXES: dict[Path, _Index] = {}


def _state(status: os.stat_result) -> tuple[int, int, int]:
    return (status.st_ino, status.st_size, status.st_mtime_ns)


def _index(path: str | Path) -> _Index:
    """The index of the notebook at ``path``: kept while the file on disk is in the state it was read in, read
    again once anyone changes it (an editor, Jupyter saving it, another process)."""
    path = Path(path)  # (as given: the messages name it so)
    try:
        state = _state(path.stat())
    except OSError:
        return _Index((0, 0, 0), read_json(path))  # says what is wrong with it
    kept = _INDEXES.get(path)
    if kept is not None and kept.state == state:
        return kept
    index = _Index(state, read_json(path))
    _keep(path, index)
    return index


def _keep(path: Path, index: _Index) -> None:
    _INDEXES.pop(path, None)
    if len(_INDEXES) >= _FILES_KEPT:
        _INDEXES.pop(next(iter(_INDEXES)))
    _INDEXES[path] = index


def _once_per_state(reader: Callable[[Path, _Index], Any], path: str | Path) -> Any:
    """``reader(path, index)``, found again only when the file changed on disk."""
    index = _index(path)
    name = reader.__name__
    if name not in index.found:
        index.found[name] = reader(Path(path), index)
    return index.found[name]


def _document(path: str | Path) -> dict[str, Any]:
    """The notebook at ``path`` as its index holds it: read it, never change it (a writer reads its own copy)."""
    return _index(path).document


def dumps_notebook(notebook: dict[str, Any]) -> str:
    """Jupyter's own layout (nbformat.writes): one-space indent, sorted keys, a final newline."""
    return json.dumps(notebook, sort_keys=True, indent=1, ensure_ascii=False) + "\n"


def _replace(path: Path, text: str, mode: int | None = None) -> tuple[int, int, int] | None:
    """Write ``text`` to ``path`` atomically: a temp file of this writer's own, fsynced, then renamed over it
    (with ``mode``, else the file's own). The state on disk of what it wrote, while the file is still in it (None:
    someone changed it since)."""
    mode = path.stat().st_mode & 0o777 if mode is None else mode
    fd, temp_name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=TEMP_SUFFIX)
    temp = Path(temp_name)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
            os.chmod(temp, mode)
            written = _state(os.fstat(handle.fileno()))
        replace_file(temp, path)
    finally:
        if temp.exists():
            temp.unlink()
    try:
        return written if _state(path.stat()) == written else None
    except OSError:
        return None


@contextlib.contextmanager
def locked(path: str | Path, wait: float = LOCK_WAIT) -> Iterator[None]:
    """Hold the notebook's own lock from reading it to replacing it: one writer at a time, whatever its store.

    The lock is a file beside the notebook (the notebook itself is replaced, so it cannot hold a lock), made
    for the while it is held and removed before it is let go, so nothing of it stays in the person's folder. A
    writer that finds it held waits up to ``wait`` seconds, then gives up with one line; one that got hold of a
    lock file removed meanwhile takes the new one. Temp files a killed writer left behind are removed once the
    lock is held.
    """
    import fcntl

    path = Path(path)
    lock = path.with_name(f".{path.name}.mkl-lock")
    deadline = time.monotonic() + wait
    while True:
        try:  # a link there is not followed (nothing is made where it points), anything but a file refused
            fd = os.open(lock, os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | os.O_NONBLOCK, 0o600)
        except OSError as exc:
            raise NotebookFileError(
                f"{path}: cannot be locked for writing ({lock.name}: {exc.strerror or exc})"
            ) from None
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            raise NotebookFileError(f"{path}: cannot be locked for writing ({lock.name} is not a regular file)")
        try:
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() > deadline:
                        raise NotebookFileError(
                            f"{path}: another process is writing this notebook; try again when it is done"
                        ) from None
                    time.sleep(0.05)
            try:
                held = os.stat(lock).st_ino == os.fstat(fd).st_ino
            except FileNotFoundError:
                held = False  # its holder removed it as it let go: the lock is the next file made there
        except BaseException:
            os.close(fd)
            raise
        if held:
            break
        os.close(fd)
    try:
        for stale in path.parent.glob(f".{glob.escape(path.name)}.*{TEMP_SUFFIX}"):
            with contextlib.suppress(OSError):
                stale.unlink()  # no writer holds the lock: these were left by one that was killed
        yield
    finally:
        with contextlib.suppress(OSError):
            lock.unlink()  # still held: a writer waiting on this file finds it gone and takes a new one
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)
