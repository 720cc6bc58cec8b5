"""A run store on a PostgreSQL server: one store that many people, kernels and machines share.

The same contract and the same records as :class:`~.stores.SQLiteStore`: each record one committed row of its
canonical JSON text, the machines a run pins kept once by the SHA-256 of their source, what a dropped history
was remembered (:mod:`.forgotten`). Its tables are named ``mkl_*`` so that a database shared with other
applications holds them beside its own; they are made with ``CREATE TABLE IF NOT EXISTS``, and a schema version
row says which release made them.

Durability: a transaction the server committed with ``synchronous_commit=on`` is in its synced WAL. With
``durability="process"`` (default) records are committed with ``synchronous_commit=off``: a killed client
process loses nothing committed, a crash of the server's machine may lose the last model answers; a person's
answer and a non-idempotent tool's intent are committed with ``synchronous_commit=on`` (which syncs every record
before them too), so they survive a power cut of the server before anything acts on them. ``"power"``: every
commit is synced. (A server run with ``fsync=off`` keeps none of these promises.)

Leases: a run's lease is a session-level advisory lock (``pg_try_advisory_lock``) on 64 bits of its id's hash,
taken on a connection held for the lease alone (kept for a later lease once it is let go: a new connection costs
milliseconds). The server lets the lock go when that session ends, so a holder that dies (even by SIGKILL) holds
nothing; a lease is never waited for, as with SQLite: RunBusy at once. Session locks need a session per client:
a pooler between (PgBouncer in transaction mode) would break them.

psycopg 3 and psycopg_pool are imported only when such a store is opened (the ``postgres`` extra). A URL's
password never leaves this module: the store's ``location``, every message and every printed command name the
server without it (:func:`~.store_names.public_store`).
"""

from __future__ import annotations

import contextlib
import hashlib
import threading
import time
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlsplit

from .chain import canonical
from .errors import RunBusy, StoreError
from .forgotten import ForgottenHistory, decoded_forgotten, forgetting
from .records import is_precious
from .server_changes import RunChanges, notify
from .store_files import SCHEMA_VERSION
from .store_names import DURABILITY, public_store
from .store_settings import Change, change_postgres_setting, postgres_setting
from .stores import RunStatus, RunSummary, UnknownRun, decoded_record, json_normal_start, shared_pins
from .written import LeasedRecords

if TYPE_CHECKING:
    import psycopg
    from psycopg_pool import ConnectionPool

_SCHEMA = [
    "CREATE TABLE IF NOT EXISTS mkl_schema (version INTEGER NOT NULL)",
    """CREATE TABLE IF NOT EXISTS mkl_runs (
        id TEXT PRIMARY KEY, machine TEXT NOT NULL, created DOUBLE PRECISION NOT NULL,
        updated DOUBLE PRECISION NOT NULL, status TEXT NOT NULL, error TEXT, at TEXT)""",
    """CREATE TABLE IF NOT EXISTS mkl_records (
        run_id TEXT NOT NULL, seq INTEGER NOT NULL, body TEXT NOT NULL, PRIMARY KEY (run_id, seq))""",
    "CREATE TABLE IF NOT EXISTS mkl_sources (sha256 TEXT PRIMARY KEY, source TEXT NOT NULL)",
    """CREATE TABLE IF NOT EXISTS mkl_forgotten (
        run_id TEXT NOT NULL, chain TEXT NOT NULL, body TEXT NOT NULL, PRIMARY KEY (run_id, chain))""",
]
# Two processes making the tables at once would collide in the catalog: the first takes this lock, the other
# waits and finds them made. (Any 64-bit number: "mkl schema".)
_SCHEMA_LOCK = 0x6D6B6C20736368
_SET_STATUS = "UPDATE mkl_runs SET status = %s, error = %s, at = %s, updated = %s WHERE id = %s"
_INSERT = "INSERT INTO mkl_records VALUES (%s, %s, %s)"
POOL_SIZE = 4  # connections for appends and reads; each lease holds one more of its own
IDLE_LEASES = 8  # connections kept for the next leases once theirs were let go (a new one costs milliseconds)
CONNECT_TIMEOUT = 10  # seconds


def lease_key(run_id: str) -> int:
    """The advisory lock that stands for run ``run_id``: 64 bits of its hash, signed as PostgreSQL's bigint."""
    return int.from_bytes(hashlib.sha256(b"mkl-run:" + run_id.encode("utf-8")).digest()[:8], "big", signed=True)


def _secrets_of(url: str) -> list[str]:
    """The password a URL carries, as written and decoded, wherever it is given."""
    try:
        parts = urlsplit(url)
        found = [parts.password or ""]
    except ValueError:
        return []
    for item in parts.query.split("&"):
        name, _, value = item.partition("=")
        if name.lower() in ("password", "sslpassword"):
            found.append(value)
    return [form for secret in found if secret for form in dict.fromkeys((secret, unquote(secret)))]


def _psycopg() -> Any:
    try:
        import psycopg
        import psycopg_pool
    except ImportError:
        raise StoreError(
            "a postgresql:// store needs psycopg and psycopg_pool: pip install 'mkl-notebook[postgres]'"
        ) from None
    return psycopg, psycopg_pool


class PostgresStore:
    """Runs kept in a PostgreSQL database (``url``: ``postgresql://[user[:password]@]host[:port]/database``).

    ``read_only`` opens it to be read, as a listing does: every transaction is read-only, and nothing is made:
    a database without the tables reads as a store without runs.
    """

    def __init__(self, url: str, *, durability: str = "process", read_only: bool = False) -> None:
        if durability not in DURABILITY:
            raise StoreError(f"durability must be one of {', '.join(DURABILITY)}, not {durability!r}")
        self.location = public_store(url)
        self.durability = durability
        self.read_only = read_only
        self._url = url
        self._secrets = _secrets_of(url)
        self._psycopg, pool_module = _psycopg()
        options = "-c default_transaction_read_only=on" if read_only else None
        self._kwargs: dict[str, Any] = {"autocommit": True, "connect_timeout": CONNECT_TIMEOUT}
        if options:
            self._kwargs["options"] = options
        with self._connection() as first:  # refused now, in one sentence, if the server cannot be reached
            self._empty = self._prepare(first)
        self._pool: ConnectionPool = pool_module.ConnectionPool(
            url, min_size=1, max_size=POOL_SIZE, kwargs=self._kwargs, timeout=CONNECT_TIMEOUT, open=True
        )
        self._lock = threading.Lock()  # the numbering of records, and the records kept per leased run
        self._idle_lock = threading.Lock()
        self._idle: list[psycopg.Connection[Any]] = []  # connections of leases let go, holding no lock
        self._next_seq: dict[str, int] = {}
        self._written = LeasedRecords()

    # -- connections and errors ---------------------------------------------------------------------

    def _problem(self, exc: BaseException) -> StoreError:
        """``exc`` as one sentence naming the store, the password (if the server echoed it) masked."""
        text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        for secret in self._secrets:
            text = text.replace(secret, "***")
        return StoreError(f"{self.location}: {text}")

    @contextlib.contextmanager
    def _connection(self) -> Iterator[psycopg.Connection[Any]]:
        """A connection of its own (closed after): the first one, and each lease's."""
        try:
            connection = self._psycopg.connect(self._url, **self._kwargs)
        except self._psycopg.Error as exc:
            raise self._problem(exc) from None
        try:
            yield connection
        finally:
            connection.close()

    @contextlib.contextmanager
    def _pooled(self) -> Iterator[psycopg.Connection[Any]]:
        """A connection of the pool, its errors as the store's."""
        try:
            with self._pool.connection() as connection:
                yield connection
        except (self._psycopg.Error, TimeoutError) as exc:
            raise self._problem(exc) from None
        except Exception as exc:  # the pool's own (PoolTimeout, a closed pool)
            if type(exc).__module__.startswith("psycopg"):
                raise self._problem(exc) from None
            raise

    def _prepare(self, connection: psycopg.Connection[Any]) -> bool:
        """Make the tables (not read-only) and check the schema's version; whether the database holds none."""
        try:
            if self.read_only:
                found = connection.execute("SELECT to_regclass('mkl_runs') IS NOT NULL").fetchone()
                if not (found and found[0]):
                    return True
            else:
                with connection.transaction():
                    connection.execute("SELECT pg_advisory_xact_lock(%s)", (_SCHEMA_LOCK,))
                    for statement in _SCHEMA:
                        connection.execute(statement)
                    if connection.execute("SELECT 1 FROM mkl_schema").fetchone() is None:
                        connection.execute("INSERT INTO mkl_schema VALUES (%s)", (SCHEMA_VERSION,))
            row = connection.execute("SELECT max(version) FROM mkl_schema").fetchone()
        except self._psycopg.Error as exc:
            raise self._problem(exc) from None
        version = row[0] if row else None
        if version is not None and version > SCHEMA_VERSION:
            raise StoreError(
                f"{self.location}: is a run store of a newer mkl_notebook (schema {version}); upgrade to use it"
            )
        return False

    def close(self) -> None:
        self._pool.close()
        with self._idle_lock:
            idle, self._idle = self._idle, []
        for connection in idle:
            connection.close()

    # -- writing -------------------------------------------------------------------------------------

    def _synced(self, connection: psycopg.Connection[Any], precious: bool) -> None:
        """This transaction's commit synced to the server's disk (or not), as the durability and record say."""
        on = self.durability == "power" or precious
        connection.execute(f"SET LOCAL synchronous_commit = {'on' if on else 'off'}")

    def create(self, run_id: str, start: Mapping[str, Any]) -> dict[str, Any]:
        """Begin (or replace) run ``run_id``'s journal with ``start``: the record as :meth:`read` gives it back."""
        self._writable()
        now = time.time()
        normal = json_normal_start(start)
        stored, shared = shared_pins(normal)
        with self._lock, self._pooled() as connection, connection.transaction():
            self._synced(connection, True)
            for source in shared:
                connection.execute("INSERT INTO mkl_sources VALUES (%s, %s) ON CONFLICT DO NOTHING", source)
            self._drop(connection, run_id)
            connection.execute(
                "INSERT INTO mkl_runs VALUES (%s, %s, %s, %s, 'running', NULL, NULL) ON CONFLICT (id) DO UPDATE "
                "SET machine = EXCLUDED.machine, created = EXCLUDED.created, updated = EXCLUDED.updated, "
                "status = 'running', error = NULL, at = NULL",
                (run_id, start.get("root", ""), now, now),
            )
            connection.execute(_INSERT, (run_id, 0, canonical(stored)))
            notify(connection, run_id)
        with self._lock:
            self._next_seq[run_id] = 1
            self._written.keep(run_id, 0, [normal])
        return normal

    def append(self, run_id: str, record: Mapping[str, Any]) -> None:
        """Commit ``record`` as the next of run ``run_id``'s journal; it is durable when this returns."""
        self._append(run_id, record, None)

    def append_ending(self, run_id: str, record: Mapping[str, Any], status: RunStatus) -> None:
        """Commit the record that ends an advance and the run's new status in one transaction."""
        self._append(run_id, record, status)

    def _append(self, run_id: str, record: Mapping[str, Any], status: RunStatus | None) -> None:
        self._writable()
        body = canonical(record)
        kept = decoded_record(body) if self._written.leased(run_id) else None  # what reading the row back would give
        # One writer at a time: records of one run are numbered in the order they commit, with no gap.
        with self._lock:
            try:
                with self._pooled() as connection, connection.transaction():
                    self._synced(connection, is_precious(record))
                    seq = self._next_seq.get(run_id)
                    if seq is None:
                        found = connection.execute(
                            "SELECT COALESCE(MAX(seq), -1) FROM mkl_records WHERE run_id = %s", (run_id,)
                        ).fetchone()
                        seq = (found[0] if found else -1) + 1
                    connection.execute(_INSERT, (run_id, seq, body))
                    if status is not None:  # an advance ended: a kernel waiting on the run hears it
                        connection.execute(_SET_STATUS, (status.status, status.error, status.at, time.time(), run_id))
                        notify(connection, run_id)
            except BaseException:
                self._next_seq.pop(run_id, None)  # what was written is not known for sure: ask the server
                self._written.forget(run_id)
                raise
            self._next_seq[run_id] = seq + 1
            if kept is not None:
                self._written.keep(run_id, seq, [kept])
            else:
                self._written.forget(run_id)

    def _writable(self) -> None:
        if self.read_only:
            raise StoreError(f"{self.location}: opened to be read only")

    # -- reading -------------------------------------------------------------------------------------

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
            if self._empty:
                raise UnknownRun(run_id, self.location)
            with self._pooled() as connection, connection.transaction():
                rows = connection.execute(
                    "SELECT body FROM mkl_records WHERE run_id = %s AND seq >= %s ORDER BY seq", (run_id, since)
                ).fetchall()
                if not rows and not since:
                    raise UnknownRun(run_id, self.location)
                try:
                    records = [decoded_record(body) for (body,) in rows]
                except ValueError as exc:
                    raise StoreError(f"{self.location}: run '{run_id}' has a damaged record ({exc})") from None
                if records and not since:
                    self._fill_pins(connection, run_id, records[0])
            if not since:
                self._next_seq[run_id] = len(records)
                self._written.keep(run_id, 0, records)
        return records

    def _fill_pins(self, connection: psycopg.Connection[Any], run_id: str, start: dict[str, Any]) -> None:
        """Give the start record back the sources of the machines it names by hash."""
        pins = start.get("machines")
        if not isinstance(pins, dict):
            return
        for name, pin in pins.items():
            if isinstance(pin, dict) and "source" not in pin and isinstance(pin.get("sha256"), str):
                found = connection.execute("SELECT source FROM mkl_sources WHERE sha256 = %s", (pin["sha256"],))
                row = found.fetchone()
                if row is None:
                    raise StoreError(f"{self.location}: run '{run_id}' pins machine '{name}', which the store lacks")
                pin["source"] = row[0]

    def exists(self, run_id: str) -> bool:
        if self._empty:
            return False
        with self._pooled() as connection:
            found = connection.execute("SELECT 1 FROM mkl_records WHERE run_id = %s LIMIT 1", (run_id,))
            return found.fetchone() is not None

    def delete(self, run_id: str) -> None:
        """Drop run ``run_id``, remembering what :meth:`forgotten` says of it, in one transaction."""
        self._writable()
        with self._lock:
            with self._pooled() as connection, connection.transaction():
                self._synced(connection, True)
                self._drop(connection, run_id)
                connection.execute("DELETE FROM mkl_runs WHERE id = %s", (run_id,))
                notify(connection, run_id)
            self._next_seq.pop(run_id, None)
            self._written.forget(run_id)

    def _drop(self, connection: psycopg.Connection[Any], run_id: str) -> None:
        """Delete run ``run_id``'s records, keeping what :mod:`.forgotten` keeps of them (in a transaction)."""
        rows = connection.execute("SELECT body FROM mkl_records WHERE run_id = %s ORDER BY seq", (run_id,)).fetchall()
        if rows:
            try:
                records = [decoded_record(body) for (body,) in rows]
                self._fill_pins(connection, run_id, records[0])
            except (ValueError, StoreError):
                records = []  # a damaged journal: nothing of it can be recognised again
            found = connection.execute("SELECT status FROM mkl_runs WHERE id = %s", (run_id,)).fetchone()
            if records:
                gone = forgetting(records, found[0] if found else "")
                connection.execute(
                    "INSERT INTO mkl_forgotten VALUES (%s, %s, %s) ON CONFLICT (run_id, chain) DO UPDATE "
                    "SET body = EXCLUDED.body",
                    (run_id, gone.marks[-1], gone.encode()),
                )
        connection.execute("DELETE FROM mkl_records WHERE run_id = %s", (run_id,))

    def forgotten(self, run_id: str) -> list[ForgottenHistory]:
        """The histories of run ``run_id`` this store held and dropped (see :mod:`.forgotten`)."""
        if self._empty:
            return []
        with self._pooled() as connection:
            rows = connection.execute("SELECT body FROM mkl_forgotten WHERE run_id = %s", (run_id,)).fetchall()
        return [gone for (body,) in rows if (gone := decoded_forgotten(body)) is not None]

    def runs(self) -> list[RunSummary]:
        if self._empty:
            return []
        with self._pooled() as connection:
            rows = connection.execute(
                "SELECT id, machine, status, error, at, updated FROM mkl_runs ORDER BY updated"
            ).fetchall()
        return [RunSummary(*row) for row in rows]

    def setting(self, key: str) -> str | None:
        """The store's setting ``key`` (see :mod:`.store_settings`), None when it is not set."""
        if self._empty:
            return None
        with self._pooled() as connection:
            return postgres_setting(connection, key)

    def change_setting(self, key: str, change: Change) -> str | None:
        """Change the store's setting ``key`` as ``change`` says (None: drop it), in one transaction; its new
        value."""
        self._writable()
        with self._pooled() as connection:
            return change_postgres_setting(connection, key, change)

    def set_status(self, run_id: str, status: str, error: str | None, at: str | None) -> None:
        self._writable()
        with self._pooled() as connection, connection.transaction():
            connection.execute(_SET_STATUS, (status, error, at, time.time(), run_id))
            notify(connection, run_id)

    def changes(self) -> RunChanges:
        """A listener to the runs other processes move in this store (:mod:`.server_changes`), on a connection of
        its own: for one thread to wait on (the store's pool is never waited on)."""
        listening = {"autocommit": True, "connect_timeout": CONNECT_TIMEOUT}  # (read-only or not: it only listens)
        return RunChanges(lambda: self._psycopg.connect(self._url, **listening), self._psycopg.Error, self._problem)

    # -- leases --------------------------------------------------------------------------------------

    def _lease_connection(self) -> psycopg.Connection[Any]:
        """A connection for one lease: one let go by an earlier lease of this store, else a new one."""
        with self._idle_lock:
            if self._idle:
                return self._idle.pop()
        return self._fresh_lease_connection()

    def _let_go(self, connection: psycopg.Connection[Any], key: int) -> None:
        """Let lease ``key`` go, and keep its connection for the next lease only when it holds no lock any more
        (a connection whose unlock failed is closed: its session's end lets every lock of it go)."""
        try:
            row = connection.execute("SELECT pg_advisory_unlock(%s)", (key,)).fetchone()
            reusable = bool(row and row[0]) and not connection.closed
        except self._psycopg.Error:
            reusable = False
        with self._idle_lock:
            if reusable and len(self._idle) < IDLE_LEASES:
                self._idle.append(connection)
                return
        connection.close()

    @contextlib.contextmanager
    def lease(self, run_id: str) -> Iterator[None]:
        """Run ``run_id`` advanced by this store alone, across processes and machines, until the block ends:
        an advisory lock of a session held for it, which the server lets go when the session ends (a holder
        that dies holds nothing)."""
        key = lease_key(run_id)
        connection = self._lease_connection()
        try:
            row = connection.execute("SELECT pg_try_advisory_lock(%s)", (key,)).fetchone()
        except self._psycopg.Error:
            connection.close()  # (one kept from an earlier lease may have lost its server: try a new one once)
            connection = self._fresh_lease_connection()
            try:
                row = connection.execute("SELECT pg_try_advisory_lock(%s)", (key,)).fetchone()
            except self._psycopg.Error as exc:
                connection.close()
                raise self._problem(exc) from None
        if not (row and row[0]):
            self._let_go_unheld(connection)
            raise RunBusy(f"run '{run_id}' is already being advanced by another process; wait for it or stop it")
        with self._lock:
            self._written.lease_taken(run_id)
        try:
            yield
        finally:
            with self._lock:  # once the lease is let go another process may write the run
                self._written.lease_let_go(run_id)
                self._next_seq.pop(run_id, None)
            self._let_go(connection, key)

    def _fresh_lease_connection(self) -> psycopg.Connection[Any]:
        try:
            return self._psycopg.connect(self._url, **self._kwargs)
        except self._psycopg.Error as exc:
            raise self._problem(exc) from None

    def _let_go_unheld(self, connection: psycopg.Connection[Any]) -> None:
        """Keep a connection whose lease was refused (it took no lock) for the next lease."""
        with self._idle_lock:
            if len(self._idle) < IDLE_LEASES:
                self._idle.append(connection)
                return
        connection.close()
