"""A run store's file: telling one of ours from any other file before anything reads or writes it.

A store is an SQLite file whose header names us (``PRAGMA application_id``); one made before stores said
whose they were is recognised by its tables. Nothing here writes, nor makes a file beside the one looked at.
"""

from __future__ import annotations

import os
import sqlite3
import stat
from pathlib import Path

from .errors import StoreError

APPLICATION_ID = 0x6D6B6C72  # "mklr": the header of a store file of ours says so (PRAGMA application_id)
SCHEMA_VERSION = 1  # PRAGMA user_version of the stores this release makes
_SQLITE_MAGIC = b"SQLite format 3\x00"
_COLUMNS = {
    "runs": ("id", "machine", "created", "updated", "status", "error", "at"),
    "records": ("run_id", "seq", "body"),
    "sources": ("sha256", "source"),
    "outcomes": ("run_id", "key", "body"),  # what earlier releases cached beside the runs
}
_NEEDED = frozenset({"runs", "records"})


def _not_ours(path: Path) -> StoreError:
    return StoreError(f"{path} is not an mkl run store")


def check_ours(path: Path, *, new_ok: bool = False) -> None:
    """Refuse ``path`` unless it is a run store of ours: its header names us (``APPLICATION_ID``) in a schema
    this release reads, or (made by a release before stores said whose they are) its tables are exactly ours.
    ``new_ok``: no file, or an empty one, is accepted too (a store is to be made there). Nothing is written,
    nor any file made beside it."""
    try:
        # Opened without blocking and looked at before it is read: a FIFO would block a read (or even the
        # open) for good, a device never ends.
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
        with open(fd, "rb") as file:
            found = os.fstat(file.fileno())
            if not stat.S_ISREG(found.st_mode):
                raise StoreError(f"{path}: is not a regular file, so not a run store")
            size = found.st_size
            header = file.read(100)
    except FileNotFoundError:
        if new_ok:
            return
        raise StoreError(f"{path}: no such run store") from None
    except OSError as exc:
        raise StoreError(f"{path}: cannot be read ({exc.strerror or exc})") from None
    if size == 0 and new_ok:
        return
    if len(header) < 100 or not header.startswith(_SQLITE_MAGIC):
        raise _not_ours(path)
    version = int.from_bytes(header[60:64], "big")
    application = int.from_bytes(header[68:72], "big")
    if application == APPLICATION_ID:
        if version > SCHEMA_VERSION:
            raise StoreError(f"{path}: is a run store of a newer mkl_notebook (schema {version}); upgrade to use it")
        return
    if application != 0 or version != 0 or not _legacy_tables(path):
        raise _not_ours(path)


def _legacy_tables(path: Path) -> bool:
    """Whether the tables of the SQLite file at ``path`` are exactly those a store of an earlier release had.
    Read as an immutable file: no lock taken, no journal or shared-memory file made, whatever the file is."""
    try:
        db = sqlite3.connect(_file_uri(path, immutable=True), uri=True)
        try:
            names = [name for (name,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
            columns = {
                name: tuple(row[1] for row in db.execute("SELECT * FROM pragma_table_info(?)", (name,)))
                for name in names
            }
        finally:
            db.close()
    except sqlite3.DatabaseError:
        return False
    return set(names) >= _NEEDED and all(_COLUMNS.get(name) == found for name, found in columns.items())


def _file_uri(path: Path, *, immutable: bool) -> str:
    """The URI that opens ``path`` read-only; ``immutable``: as a file nothing changes (no locks, no -shm)."""
    return path.absolute().as_uri() + ("?mode=ro&immutable=1" if immutable else "?mode=ro")


def reading_connection(path: Path) -> sqlite3.Connection:
    """A read-only connection to the run store at ``path``, refused unless it is one of ours (:func:`check_ours`).

    Opening a WAL database read-only makes its ``-wal`` and ``-shm`` files when they are not there, and leaves
    them. They are there while a writer has it open: then it is opened read-only as usual, to see what that
    writer committed. When they are not, every committed record is in the file itself, which is then read as
    immutable: nothing is made beside it.
    """
    check_ours(path)
    live = Path(f"{path.resolve()}-wal").exists()
    try:
        db = sqlite3.connect(
            _file_uri(path, immutable=not live), uri=True, isolation_level=None, check_same_thread=False, timeout=10
        )
        tables = {name for (name,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    except sqlite3.DatabaseError as exc:
        raise StoreError(f"{path}: is not a usable run store ({exc})") from None
    if not tables >= _NEEDED:
        db.close()
        raise _not_ours(path)
    return db
