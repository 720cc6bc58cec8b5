"""Where journals live: a small store protocol, an SQLite store and an in-memory store.

Every append is committed before the answer it carries is used, so a process
that dies loses at most the calls in flight. A person's answer and a non-idempotent
tool's intent are also synced to disk before they are used, so that a power cut loses
neither; ``durability="power"`` syncs every record.  One writer per run: a lease held
through an OS lock, released by the kernel if the holder dies (``leases``).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import sqlite3
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from .chain import canonical
from .errors import RunBusy, StoreError
from .forgotten import ForgottenHistory, decoded_forgotten, forgetting
from .leases import RunLeases
from .network_fs import check_store_place
from .records import is_precious
from .store_files import APPLICATION_ID, SCHEMA_VERSION, check_ours, reading_connection
from .store_names import DEFAULT_STORE_NAME, DURABILITY  # (named there: a command's help reads them, not the store)
from .store_settings import Change, change_sqlite_setting, sqlite_setting
from .written import LeasedRecords

DEFAULT_STORE = Path(DEFAULT_STORE_NAME)
RUN_ID_MAX = 80  # characters of a run id
_RUN_ID = re.compile(rf"^[A-Za-z0-9][A-Za-z0-9_.:-]{{0,{RUN_ID_MAX - 1}}}$")


class UnknownRun(StoreError):
    """The store holds no run of that id."""

    def __init__(self, run_id: str, location: str) -> None:
        super().__init__(f"no run '{run_id}' in {location}")


def check_run_id(run_id: str) -> str:
    if not isinstance(run_id, str) or not _RUN_ID.match(run_id):
        raise StoreError(
            f"run id {run_id!r} is not usable: use 1-80 letters, digits, '-', '_', '.' or ':', "
            "starting with a letter or digit"
        )
    return run_id


@dataclass(frozen=True)
class RunStatus:
    """What the runs list says of a run: its status, its error and where it stopped."""

    status: str
    error: str | None = None
    at: str | None = None


@dataclass(frozen=True)
class RunSummary:
    run_id: str
    machine: str
    status: str
    error: str | None
    at: str | None
    updated: float


class RunStore(Protocol):
    location: str  # where the journals live, as a message names it

    def create(self, run_id: str, start: Mapping[str, Any]) -> dict[str, Any]: ...
    def append(self, run_id: str, record: Mapping[str, Any]) -> None: ...
    def append_ending(self, run_id: str, record: Mapping[str, Any], status: RunStatus) -> None: ...
    def read(self, run_id: str, since: int = 0) -> list[dict[str, Any]]: ...
    def exists(self, run_id: str) -> bool: ...
    def delete(self, run_id: str) -> None: ...
    def forgotten(self, run_id: str) -> list[ForgottenHistory]: ...
    def runs(self) -> list[RunSummary]: ...
    def set_status(self, run_id: str, status: str, error: str | None, at: str | None) -> None: ...
    def lease(self, run_id: str) -> contextlib.AbstractContextManager[None]: ...


def json_normal_start(start: Mapping[str, Any]) -> dict[str, Any]:
    """The start record as it would read back from disk, keys in the same order; the pinned sources, plain
    strings, are not re-encoded."""
    pins = start.get("machines")
    normal: dict[str, Any] = json.loads(canonical({key: value for key, value in start.items() if key != "machines"}))
    if pins is None:
        return normal
    normal["machines"] = {
        str(name): dict(sorted((str(k), str(v)) for k, v in pins[name].items())) for name in sorted(pins, key=str)
    }
    return dict(sorted(normal.items()))


class MemoryStore:
    """A store for tests and throwaway runs; nothing survives the process."""

    location = "memory"

    def __init__(self) -> None:
        # A copy of each record appended; reads share them (a journal never changes a record once written).
        self._records: dict[str, list[dict[str, Any]]] = {}
        self._status: dict[str, RunSummary] = {}
        self._lock = threading.Lock()
        self._leased: set[str] = set()
        self._forgotten: dict[str, list[ForgottenHistory]] = {}
        self._settings: dict[str, str] = {}

    def setting(self, key: str) -> str | None:
        """The store's setting ``key`` (see :mod:`.store_settings`), None when it is not set."""
        return self._settings.get(key)

    def change_setting(self, key: str, change: Change) -> str | None:
        """Change the store's setting ``key`` as ``change`` says (None: drop it); its new value."""
        with self._lock:
            value = change(self._settings.get(key))
            self._settings.pop(key, None)
            if value is not None:
                self._settings[key] = value
            return value

    def create(self, run_id: str, start: Mapping[str, Any]) -> dict[str, Any]:
        """Begin (or replace) run ``run_id``'s journal with ``start``: the record as :meth:`read` gives it back."""
        normal = json_normal_start(start)
        with self._lock:
            self._drop(run_id)
            self._records[run_id] = [normal]
            self._status[run_id] = RunSummary(run_id, start.get("root", ""), "running", None, None, time.time())
        return normal

    def append(self, run_id: str, record: Mapping[str, Any]) -> None:
        with self._lock:
            self._records[run_id].append(dict(record))

    def append_ending(self, run_id: str, record: Mapping[str, Any], status: RunStatus) -> None:
        """Append the record that ends an advance and set the run's status, together."""
        self.append(run_id, record)
        self.set_status(run_id, status.status, status.error, status.at)

    def read(self, run_id: str, since: int = 0) -> list[dict[str, Any]]:
        """Run ``run_id``'s records, from the ``since``-th on (0: the whole journal)."""
        with self._lock:
            if run_id not in self._records:
                raise UnknownRun(run_id, self.location)
            return self._records[run_id][since:]

    def exists(self, run_id: str) -> bool:
        return run_id in self._records

    def delete(self, run_id: str) -> None:
        """Drop run ``run_id``, remembering what :meth:`forgotten` says of it."""
        with self._lock:
            self._drop(run_id)
            self._records.pop(run_id, None)
            self._status.pop(run_id, None)

    def _drop(self, run_id: str) -> None:
        held = self._records.get(run_id)
        if held:
            status = self._status[run_id].status if run_id in self._status else ""
            self._forgotten.setdefault(run_id, []).append(forgetting(held, status))

    def forgotten(self, run_id: str) -> list[ForgottenHistory]:
        """The histories of run ``run_id`` this store held and dropped (see :mod:`.forgotten`)."""
        with self._lock:
            return list(self._forgotten.get(run_id, ()))

    def runs(self) -> list[RunSummary]:
        return sorted(self._status.values(), key=lambda summary: summary.updated)

    def set_status(self, run_id: str, status: str, error: str | None, at: str | None) -> None:
        with self._lock:
            previous = self._status.get(run_id)
            machine = previous.machine if previous else ""
            self._status[run_id] = RunSummary(run_id, machine, status, error, at, time.time())

    @contextlib.contextmanager
    def lease(self, run_id: str) -> Iterator[None]:
        with self._lock:
            if run_id in self._leased:
                raise RunBusy(f"run '{run_id}' is already being advanced; wait for it to finish")
            self._leased.add(run_id)
        try:
            yield
        finally:
            with self._lock:
                self._leased.discard(run_id)


_SCHEMA = """
BEGIN;
CREATE TABLE IF NOT EXISTS runs (
    id TEXT PRIMARY KEY, machine TEXT NOT NULL, created REAL NOT NULL, updated REAL NOT NULL,
    status TEXT NOT NULL, error TEXT, at TEXT
);
CREATE TABLE IF NOT EXISTS records (
    run_id TEXT NOT NULL, seq INTEGER NOT NULL, body TEXT NOT NULL, PRIMARY KEY (run_id, seq)
);
-- The machines runs pin, each once by the SHA-256 of its text: a start record names them by hash alone.
CREATE TABLE IF NOT EXISTS sources (sha256 TEXT PRIMARY KEY, source TEXT NOT NULL);
-- What the store remembers of each history it dropped (a run forgotten or started over): see forgotten.py.
CREATE TABLE IF NOT EXISTS forgotten (run_id TEXT NOT NULL, chain TEXT NOT NULL, body TEXT NOT NULL,
    PRIMARY KEY (run_id, chain));
-- Earlier versions cached finished outcomes here, keyed by the package version: a re-run after an
-- engine fix could be served the old result. A finished run now always replays from its journal.
DROP TABLE IF EXISTS outcomes;
COMMIT;
"""
_DECODER = json.JSONDecoder()
_IDS_AT_ONCE = 256  # run ids fetched together by SQLiteStore.run_ids

_SET_STATUS = "UPDATE runs SET status = ?, error = ?, at = ?, updated = ? WHERE id = ?"


def decoded_record(body: str) -> Any:
    """A record's JSON text read back: as ``json.loads`` reads it, without its per-call scanning for blanks
    around the text (a journal holds thousands of records, and they are written without any)."""
    try:
        record, end = _DECODER.raw_decode(body)
        if end == len(body):
            return record
    except ValueError:
        pass
    return json.loads(body)  # blanks around the text, or damage: json.loads reads it or says what is wrong


def shared_pins(start: Mapping[str, Any]) -> tuple[dict[str, Any], list[tuple[str, str]]]:
    """``start`` as the records table keeps it, and the ``(sha256, source)`` of the machines it names by hash
    alone: those whose pin gives the true hash of its source (any other pin stays whole in the record)."""
    pins = start.get("machines")
    if not isinstance(pins, Mapping):
        return dict(start), []
    kept: dict[str, Any] = {}
    shared: list[tuple[str, str]] = []
    for name, pin in pins.items():
        source = pin.get("source") if isinstance(pin, Mapping) else None
        if isinstance(source, str) and pin.get("sha256") == hashlib.sha256(source.encode("utf-8")).hexdigest():
            kept[name] = {key: value for key, value in pin.items() if key != "source"}
            shared.append((pin["sha256"], source))
        else:
            kept[name] = pin
    return {**start, "machines": kept}, shared


@dataclass(slots=True)
class _Pending:
    """One append waiting for its commit: ``done`` once its group's transaction ended (``error`` if it failed)."""

    run_id: str
    body: str
    record: dict[str, Any] | None = None  # the body read back, when the run is leased here (see SQLiteStore)
    status: RunStatus | None = None  # the run's status, set in the same transaction (an advance's ending)
    synced: bool = False  # synced to disk by its commit, whatever the store's durability (records.is_precious)
    done: bool = False
    error: StoreError | None = None


class SQLiteStore:
    """The default store: ``.mkl/runs.sqlite`` in WAL mode, one committed row per record.

    ``durability="process"`` (default): every record survives a killed process; commits run with
    ``synchronous=NORMAL``, so a power cut may lose the last ones, except that a person's answer (a reply or
    a settlement) and a non-idempotent tool's intent are committed with ``synchronous=FULL``, which syncs
    the WAL (and every record before them) before they are used. ``"power"``: every commit is synced.

    Appends from concurrent threads (the branches of a fan-out, the rows of a batch) are committed
    together: records that arrive while a commit is under way wait, and the next commit takes them
    all in one transaction. No append returns before the transaction holding its record committed.

    While this store holds a run's lease it is the run's only writer, so it keeps every record it
    commits for the run, as its text reads back (key order and all, as the file would give it):
    reading back what an advance added comes from there, not the file.

    ``read_only`` opens a store to be read, as a listing does: only a file of ours, and nothing is written
    or made (see :func:`reading_connection`). A store to be written on a network filesystem is refused before
    anything is made (see :mod:`.network_fs`); one to be read is not.
    """

    def __init__(
        self, path: str | Path = DEFAULT_STORE, *, durability: str = "process", read_only: bool = False
    ) -> None:
        if durability not in DURABILITY:
            raise StoreError(f"durability must be one of {', '.join(DURABILITY)}, not {durability!r}")
        self.path = Path(path)
        self.location = str(self.path)
        self.durability = durability
        self.read_only = read_only
        if read_only:
            self._db = reading_connection(self.path)
        else:
            check_store_place(self.path)  # before its folder or file is made: SQLite's locks fail on NFS
            self._db = self._writing_connection(durability)
        # One lease file for the store's runs, named for the store (several may share a folder).
        digest = hashlib.sha256(str(self.path.resolve()).encode()).hexdigest()[:24]
        self._leases = RunLeases(self.path.parent / "locks" / f"{digest}.leases")
        self._lock = threading.Lock()  # the connection, and whoever commits the appends waiting
        self._waiting_lock = threading.Lock()
        self._waiting: list[_Pending] = []
        self._next_seq: dict[str, int] = {}
        # Per run leased here: the seq of the first record kept, and the records committed from it on, in order.
        self._written = LeasedRecords()

    def _writing_connection(self, durability: str) -> sqlite3.Connection:
        """The store's file opened to be written, made (with its folder) when there is none; a file that is
        there and is not one of ours is refused before anything is written to it."""
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            check_ours(self.path, new_ok=True)
            db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False, timeout=10)
            if db.execute("PRAGMA application_id").fetchone()[0] != APPLICATION_ID:
                # Before WAL mode, so that a new store's header says whose it is even while its tables are
                # still only in the WAL file (a reader tells ours by the header before it opens anything).
                db.execute(f"PRAGMA application_id={APPLICATION_ID}")
                db.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
            db.execute("PRAGMA journal_mode=WAL")
            db.execute(f"PRAGMA synchronous={'FULL' if durability == 'power' else 'NORMAL'}")
            db.executescript(_SCHEMA)
        except sqlite3.DatabaseError as exc:
            raise StoreError(f"{self.path}: is not a usable run store ({exc})") from None
        except OSError as exc:
            raise StoreError(f"{self.path}: cannot be opened ({exc.strerror or exc})") from None
        with contextlib.suppress(OSError):
            os.chmod(self.path, 0o600)
        return db

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def _execute(self, sql: str, params: tuple[Any, ...] = ()) -> sqlite3.Cursor:
        try:
            return self._db.execute(sql, params)
        except sqlite3.DatabaseError as exc:
            raise StoreError(f"{self.path}: {exc}") from None

    def create(self, run_id: str, start: Mapping[str, Any]) -> dict[str, Any]:
        """Begin (or replace) run ``run_id``'s journal with ``start``: the record as :meth:`read` gives it back."""
        now = time.time()
        normal = json_normal_start(start)
        stored, shared = shared_pins(normal)
        with self._lock:
            self._execute("BEGIN IMMEDIATE")
            try:
                for source in shared:
                    self._execute("INSERT OR IGNORE INTO sources VALUES (?, ?)", source)
                self._drop(run_id)
                self._execute(
                    "INSERT OR REPLACE INTO runs VALUES (?, ?, ?, ?, 'running', NULL, NULL)",
                    (run_id, start.get("root", ""), now, now),
                )
                self._execute("INSERT INTO records VALUES (?, 0, ?)", (run_id, canonical(stored)))
                self._execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._next_seq[run_id] = 1
            self._written.keep(run_id, 0, [normal])
        return normal

    def append(self, run_id: str, record: Mapping[str, Any]) -> None:
        """Commit ``record`` as the next of run ``run_id``'s journal; it is durable when this returns."""
        self._append(_Pending(run_id, canonical(record), synced=is_precious(record)))

    def append_ending(self, run_id: str, record: Mapping[str, Any], status: RunStatus) -> None:
        """Commit the record that ends an advance and the run's new status in one transaction: the runs list
        never says a run stopped where its journal does not, and the advance pays one commit, not two."""
        self._append(_Pending(run_id, canonical(record), status=status, synced=is_precious(record)))

    def _append(self, pending: _Pending) -> None:
        run_id = pending.run_id
        if self._written.leased(run_id):  # read back now, outside the lock: what reading the file would give
            pending.record = decoded_record(pending.body)
        with self._waiting_lock:
            self._waiting.append(pending)
        with self._lock:
            if not pending.done:  # no commit took it while this thread waited for the connection: commit it now
                with self._waiting_lock:
                    group, self._waiting = self._waiting, []
                self._commit(group)
        if pending.error is not None:
            raise pending.error

    def _commit(self, group: list[_Pending]) -> None:
        """Write ``group`` in one transaction (one statement when it is one record); the lock is held.
        A group holding a record to be synced is committed with ``synchronous=FULL``: SQLite takes the
        setting per connection between transactions, and in WAL mode FULL syncs the WAL at the commit."""
        sync = self.durability != "power" and any(pending.synced for pending in group)
        try:
            if sync:
                self._db.execute("PRAGMA synchronous=FULL")
            seqs: dict[str, int] = {}
            rows = []
            kept: list[tuple[str, int, dict[str, Any] | None]] = []
            for pending in group:
                seq = seqs.get(pending.run_id, self._next_seq.get(pending.run_id))
                if seq is None:
                    found = self._db.execute(
                        "SELECT COALESCE(MAX(seq), -1) FROM records WHERE run_id = ?", (pending.run_id,)
                    ).fetchone()
                    seq = found[0] + 1
                rows.append((pending.run_id, seq, pending.body))
                kept.append((pending.run_id, seq, pending.record))
                seqs[pending.run_id] = seq + 1
            now = time.time()
            statuses = [(p.status.status, p.status.error, p.status.at, now, p.run_id) for p in group if p.status]
            if len(rows) == 1 and not statuses:
                self._db.execute("INSERT INTO records VALUES (?, ?, ?)", rows[0])
            else:
                self._db.execute("BEGIN IMMEDIATE")
                self._db.executemany("INSERT INTO records VALUES (?, ?, ?)", rows)
                self._db.executemany(_SET_STATUS, statuses)
                self._db.execute("COMMIT")
            self._next_seq.update(seqs)
            for run_id, seq, record in kept:
                if record is not None:
                    self._written.keep(run_id, seq, [record])
                else:  # leased only after it was appended: from here on, reads ask the file
                    self._written.forget(run_id)
        except BaseException as exc:
            if self._db.in_transaction:
                self._db.execute("ROLLBACK")
            for pending in group:  # what was written is not known for sure: the next append asks the file
                self._next_seq.pop(pending.run_id, None)
                self._written.forget(pending.run_id)  # nor what it holds: reads go to the file
            reason = exc if isinstance(exc, sqlite3.DatabaseError) else "the commit was interrupted"
            failed = StoreError(f"{self.path}: {reason}")
            for pending in group:
                pending.error = failed
            if not isinstance(exc, sqlite3.DatabaseError):
                raise
        finally:
            if sync:
                with contextlib.suppress(sqlite3.DatabaseError):  # left FULL, it only syncs more
                    self._db.execute("PRAGMA synchronous=NORMAL")
            for pending in group:
                pending.done = True

    def leased_here(self, run_id: str) -> bool:
        """Whether this store holds run ``run_id``'s lease now: this process is advancing it."""
        with self._lock:
            return self._written.leased(run_id)

    def read(self, run_id: str, since: int = 0) -> list[dict[str, Any]]:
        """Run ``run_id``'s records, from the ``since``-th on (0: the whole journal)."""
        with self._lock:
            kept = self._written.since(run_id, since)
            if kept is not None:
                return kept  # this store wrote them, under the run's lease
            rows = self._execute(
                "SELECT body FROM records WHERE run_id = ? AND seq >= ? ORDER BY seq", (run_id, since)
            ).fetchall()
            if not rows and not since:
                raise UnknownRun(run_id, self.location)
            try:
                records = [decoded_record(body) for (body,) in rows]
            except ValueError as exc:
                raise StoreError(f"{self.path}: run '{run_id}' has a damaged record ({exc})") from None
            if records and not since:
                self._fill_pins(run_id, records[0])
            if not since and not self.read_only:  # (nothing is appended to a store read only, as it goes)
                self._next_seq[run_id] = len(records)
                self._written.keep(run_id, 0, records)
        return records

    def _fill_pins(self, run_id: str, start: dict[str, Any]) -> None:
        """Give the start record back the sources of the machines it names by hash (the lock is held)."""
        pins = start.get("machines")
        if not isinstance(pins, dict):
            return
        for name, pin in pins.items():
            if isinstance(pin, dict) and "source" not in pin and isinstance(pin.get("sha256"), str):
                found = self._execute("SELECT source FROM sources WHERE sha256 = ?", (pin["sha256"],)).fetchone()
                if found is None:
                    raise StoreError(f"{self.path}: run '{run_id}' pins machine '{name}', which the store lacks")
                pin["source"] = found[0]

    def exists(self, run_id: str) -> bool:
        with self._lock:
            return self._execute("SELECT 1 FROM records WHERE run_id = ? LIMIT 1", (run_id,)).fetchone() is not None

    def delete(self, run_id: str) -> None:
        """Drop run ``run_id``, remembering what :meth:`forgotten` says of it, in one transaction."""
        with self._lock:
            self._execute("BEGIN IMMEDIATE")
            try:
                self._drop(run_id)
                self._execute("DELETE FROM runs WHERE id = ?", (run_id,))
                self._execute("COMMIT")
            finally:
                if self._db.in_transaction:
                    self._execute("ROLLBACK")
            self._next_seq.pop(run_id, None)
            self._written.forget(run_id)

    def _drop(self, run_id: str) -> None:
        """Delete run ``run_id``'s records, keeping what :mod:`.forgotten` keeps of them (the lock is held, in
        a transaction)."""
        rows = self._execute("SELECT body FROM records WHERE run_id = ? ORDER BY seq", (run_id,)).fetchall()
        if rows:
            try:
                records = [decoded_record(body) for (body,) in rows]
                self._fill_pins(run_id, records[0])
            except (ValueError, StoreError):
                records = []  # a damaged journal: nothing of it can be recognised again
            found = self._execute("SELECT status FROM runs WHERE id = ?", (run_id,)).fetchone()
            if records:
                gone = forgetting(records, found[0] if found else "")
                row = (run_id, gone.marks[-1], gone.encode())
                self._execute("INSERT OR REPLACE INTO forgotten VALUES (?, ?, ?)", row)
        self._execute("DELETE FROM records WHERE run_id = ?", (run_id,))

    def forgotten(self, run_id: str) -> list[ForgottenHistory]:
        """The histories of run ``run_id`` this store held and dropped (see :mod:`.forgotten`); none in a store
        made before it remembered them."""
        with self._lock:
            try:
                rows = self._db.execute("SELECT body FROM forgotten WHERE run_id = ?", (run_id,)).fetchall()
            except sqlite3.OperationalError:
                return []  # (opened read-only, a store of an earlier release has no such table)
            except sqlite3.DatabaseError as exc:
                raise StoreError(f"{self.path}: {exc}") from None
        return [gone for (body,) in rows if (gone := decoded_forgotten(body)) is not None]

    def setting(self, key: str) -> str | None:
        """The store's setting ``key`` (see :mod:`.store_settings`), None when it is not set."""
        with self._lock:
            return sqlite_setting(self._db, str(self.path), key)

    def change_setting(self, key: str, change: Change) -> str | None:
        """Change the store's setting ``key`` as ``change`` says (None: drop it), in one transaction; its new
        value."""
        with self._lock:
            return change_sqlite_setting(self._db, str(self.path), key, change)

    def runs(self) -> list[RunSummary]:
        with self._lock:
            rows = self._execute("SELECT id, machine, status, error, at, updated FROM runs ORDER BY updated").fetchall()
        return [RunSummary(*row) for row in rows]

    def run_ids(self) -> Iterator[str]:
        """The ids of the runs, in the order :meth:`runs` lists them, fetched a few at a time as they are wanted: a
        store of many runs is never in memory whole (an audit reads one run after another). One query, on a
        cursor of its own so that reading each run meanwhile does not end it: the runs listed are those the store
        held when the listing began, as :meth:`runs` would have listed them then."""
        with self._lock:
            cursor = self._db.cursor()
            try:
                cursor.execute("SELECT id FROM runs ORDER BY updated")
            except sqlite3.DatabaseError as exc:
                cursor.close()
                raise StoreError(f"{self.path}: {exc}") from None
        try:
            while True:
                with self._lock:
                    try:
                        rows = cursor.fetchmany(_IDS_AT_ONCE)
                    except sqlite3.DatabaseError as exc:
                        raise StoreError(f"{self.path}: {exc}") from None
                if not rows:
                    return
                yield from (run_id for (run_id,) in rows)
        finally:
            cursor.close()

    def set_status(self, run_id: str, status: str, error: str | None, at: str | None) -> None:
        with self._lock:
            self._execute(_SET_STATUS, (status, error, at, time.time(), run_id))

    @contextlib.contextmanager
    def lease(self, run_id: str) -> Iterator[None]:
        """Run ``run_id`` advanced by this store alone, across processes, until the block ends."""
        with self._leases.hold(run_id):
            with self._lock:
                self._written.lease_taken(run_id)
            try:
                yield
            finally:
                with self._lock:  # once the lease is let go another process may write the run
                    self._written.lease_let_go(run_id)
                    self._next_seq.pop(run_id, None)
