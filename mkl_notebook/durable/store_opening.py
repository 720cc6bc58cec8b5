"""Opening a run store by its location: a file's path (SQLite, the default) or a ``postgresql://`` URL.

A command a view prints names a server store without its password (:func:`~.store_names.public_store`); the
person running it supplies the password as PostgreSQL's own clients take it (``PGPASSWORD``, ``~/.pgpass``), or
through ``$MKL_STORE``: a URL named without a password is given the one ``$MKL_STORE`` holds for the same
user, server and database.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from .store_names import STORE_ENV, is_server_store, public_store
from .stores import RunStore, SQLiteStore


def with_known_password(url: str) -> str:
    """``url``, or ``$MKL_STORE`` when that names the same store (user, server, database) with a password and
    ``url`` carries none."""
    given = os.environ.get(STORE_ENV, "").strip()
    if given != url and is_server_store(given) and public_store(url) == url and public_store(given) == url:
        return given
    return url


def open_store(location: str | Path, *, durability: str = "process", read_only: bool = False) -> RunStore:
    """The store at ``location``: a :class:`~.postgres_store.PostgresStore` for a ``postgresql://`` (or
    ``postgres://``) URL, else a :class:`~.stores.SQLiteStore` for the file. ``read_only``: nothing is made or
    written (a listing, an audit)."""
    if is_server_store(location):
        from .postgres_store import PostgresStore  # (psycopg is loaded only for a server store)

        return PostgresStore(with_known_password(str(location)), durability=durability, read_only=read_only)
    return SQLiteStore(Path(location), durability=durability, read_only=read_only)


def store_there(location: str | Path) -> bool:
    """Whether there may be runs at ``location`` to read without making a store: a store file that exists, or
    any server (asked when it is opened)."""
    return is_server_store(location) or Path(location).exists()


def close_store(store: RunStore) -> None:
    """Let go of a store's file or connections (a store without ``close`` holds none)."""
    close = getattr(store, "close", None)
    if close is not None:
        close()


@contextmanager
def reading_store(opened: RunStore | None, location: str | Path) -> Iterator[RunStore | None]:
    """The store to read runs from, writing nothing: ``opened`` (a workspace's store, when it is open), else the
    store at ``location`` opened read-only for this one read and let go after (a file opened once as it is then:
    see :func:`~.store_files.reading_connection`); None when there is none there. A store that may not be written
    where it is (a network filesystem: :mod:`.network_fs`) is read all the same."""
    if opened is not None:
        yield opened
        return
    if not store_there(location):
        yield None
        return
    store = open_store(location, read_only=True)
    try:
        yield store
    finally:
        close_store(store)
