"""A store's own settings: a few named texts kept in the store beside its runs, read by whoever uses the store.

The one setting today is ``notify``: the channels every run started in the store announces its questions on (see
app.channel_places), kept in the store so that a team's shared store notifies for its runs whoever starts them.
A setting is never part of a run's journal: journals travel in notebooks and checkpoints, settings stay in the
store. The table is made when a setting is first written (``CREATE TABLE IF NOT EXISTS``, which releases that
know nothing of it leave alone); a store without it, or opened read-only, has no settings.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from typing import Any, Protocol, runtime_checkable

from .errors import StoreError

SQLITE_TABLE = "CREATE TABLE IF NOT EXISTS settings (key TEXT PRIMARY KEY, value TEXT NOT NULL)"
POSTGRES_TABLE = "CREATE TABLE IF NOT EXISTS mkl_settings (key TEXT PRIMARY KEY, value TEXT NOT NULL)"
# Two processes making the table at once would collide in the catalog: each first takes this lock ("mkl sets").
_POSTGRES_LOCK = 0x6D6B6C2073657473


Change = Callable[[str | None], str | None]  # a setting's value as it is (None: unset) -> as it is to be


@runtime_checkable
class SettingsStore(Protocol):
    """A run store that keeps settings of its own (SQLite, PostgreSQL and in-memory stores do)."""

    def setting(self, key: str) -> str | None: ...
    def change_setting(self, key: str, change: Change) -> str | None: ...


def sqlite_setting(db: sqlite3.Connection, where: str, key: str) -> str | None:
    """Setting ``key`` of the SQLite store ``db`` (at ``where``), None when it is not set."""
    try:
        row = db.execute("SELECT value FROM settings WHERE key = ?", (key,)).fetchone()
    except sqlite3.OperationalError as exc:
        if "no such table" in str(exc):
            return None  # (no setting was ever written there)
        raise StoreError(f"{where}: {exc}") from None
    except sqlite3.DatabaseError as exc:
        raise StoreError(f"{where}: {exc}") from None
    return str(row[0]) if row else None


def change_sqlite_setting(db: sqlite3.Connection, where: str, key: str, change: Change) -> str | None:
    """Change setting ``key`` of the SQLite store ``db`` as ``change`` says (None: drop it), in one transaction
    that no other writer interleaves with (two people adding a channel at once both add theirs); its new value."""
    try:
        db.execute(SQLITE_TABLE)
        db.execute("BEGIN IMMEDIATE")
        try:
            value = change(sqlite_setting(db, where, key))
            db.execute("DELETE FROM settings WHERE key = ?", (key,))
            if value is not None:
                db.execute("INSERT INTO settings VALUES (?, ?)", (key, value))
        except BaseException:
            db.execute("ROLLBACK")
            raise
        db.execute("COMMIT")
    except sqlite3.DatabaseError as exc:
        raise StoreError(f"{where}: {exc}") from None
    return value


def postgres_setting(connection: Any, key: str) -> str | None:
    """Setting ``key`` of a PostgreSQL store, on ``connection``; None when it is not set (or no setting ever was)."""
    found = connection.execute("SELECT to_regclass('mkl_settings') IS NOT NULL").fetchone()
    if not (found and found[0]):
        return None
    row = connection.execute("SELECT value FROM mkl_settings WHERE key = %s", (key,)).fetchone()
    return str(row[0]) if row else None


def change_postgres_setting(connection: Any, key: str, change: Change) -> str | None:
    """Change setting ``key`` of a PostgreSQL store as ``change`` says (None: drop it), on ``connection``, in one
    transaction that no other writer of a setting interleaves with; its new value."""
    with connection.transaction():
        connection.execute("SELECT pg_advisory_xact_lock(%s)", (_POSTGRES_LOCK,))
        connection.execute(POSTGRES_TABLE)
        value = change(postgres_setting(connection, key))
        connection.execute("DELETE FROM mkl_settings WHERE key = %s", (key,))
        if value is not None:
            connection.execute("INSERT INTO mkl_settings VALUES (%s, %s)", (key, value))
    return value
