"""A real PostgreSQL server for the tests: made with ``initdb`` in a folder of its own, listening only on a Unix
socket in that folder (no TCP), a password required of every connection, stopped when the tests end.

As root, ``initdb`` refuses to run: the server is then made and run by the ``postgres`` account (Debian's
package makes it; ``.ci/run`` installs the package). Without PostgreSQL the tests that need it are skipped in
one line naming the package; under CI (``$CI`` set) they fail instead. The benchmarks start theirs with the same
class (pytest is imported only by :func:`missing`, which they do not call).
"""

from __future__ import annotations

import glob
import itertools
import os
import pwd
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import NoReturn
from urllib.parse import quote

USER = "mkl"
PASSWORD = "pg-Secret-4f9a1c"  # the tests look for it in every output byte: it must be found nowhere
INSTALL = "PostgreSQL is not installed (initdb, pg_ctl): apt-get install postgresql"


def _binary(name: str) -> str | None:
    found = shutil.which(name)
    if found:
        return found
    candidates = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"), reverse=True)  # Debian: not on PATH
    return candidates[0] if candidates else None


class ServerUnavailable(Exception):
    """No server can be started here; the message says why, in one line."""


def missing(reason: str) -> NoReturn:
    """Skip the test (fail it under CI) because the server cannot be had."""
    import pytest

    if os.environ.get("CI"):
        pytest.fail(reason, pytrace=False)
    pytest.skip(reason)


class PostgresServer:
    """A server of the tests' own, with a database made per test (:meth:`database`)."""

    def __init__(self, *, fsync: bool = False) -> None:
        """``fsync``: the server syncs its WAL, as a real one does (the tests need not: no power is cut).
        Raises :class:`ServerUnavailable` when PostgreSQL is not installed or cannot be run here."""
        initdb, pg_ctl = _binary("initdb"), _binary("pg_ctl")
        if initdb is None or pg_ctl is None:
            raise ServerUnavailable(INSTALL)
        self.pg_ctl = pg_ctl
        self.folder = Path(tempfile.mkdtemp(prefix="mkl-pg-"))
        self.data = self.folder / "data"
        self.socket = str(self.folder)
        self.owner: str | None = None
        if os.geteuid() == 0:
            try:
                account = pwd.getpwnam("postgres")
            except KeyError:
                raise ServerUnavailable(
                    "running as root, PostgreSQL is run as the 'postgres' account, which is not there"
                ) from None
            self.owner = "postgres"
            os.chown(self.folder, account.pw_uid, account.pw_gid)
        os.chmod(self.folder, 0o700 if self.owner is None else 0o755)
        password_file = self.folder / "pw"
        password_file.write_text(PASSWORD)
        if self.owner is not None:
            os.chown(password_file, account.pw_uid, account.pw_gid)
        self._as_owner(
            [
                initdb,
                "-D",
                str(self.data),
                "-U",
                USER,
                "--auth=scram-sha-256",
                f"--pwfile={password_file}",
                "-E",
                "UTF8",
            ]
        )
        password_file.unlink()
        synced = "on" if fsync else "off"
        options = f"-c listen_addresses='' -k {self.socket} -c fsync={synced} -c max_connections=200"
        self._as_owner([pg_ctl, "-D", str(self.data), "-l", str(self.folder / "log"), "-o", options, "-w", "start"])
        self._count = itertools.count()
        self._wait_ready()

    def _as_owner(self, command: list[str]) -> None:
        if self.owner is not None:
            command = ["runuser", "-u", self.owner, "--", *command]
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"{command[0]} failed: {done.stdout}{done.stderr}")

    def url(self, database: str = "postgres", *, password: bool = True) -> str:
        """The URL of ``database`` on this server (with the password, unless ``password`` is False)."""
        secret = f":{PASSWORD}" if password else ""
        return f"postgresql://{USER}{secret}@/{database}?host={quote(self.socket, safe='/')}"

    def _wait_ready(self) -> None:
        import psycopg

        deadline = time.monotonic() + 60
        while True:  # polled: the server takes connections once it has started
            try:
                psycopg.connect(self.url(), connect_timeout=5).close()
                return
            except psycopg.OperationalError:
                if time.monotonic() > deadline:
                    raise

    def database(self) -> str:
        """A new, empty database's URL (with the password)."""
        import psycopg

        name = f"t{os.getpid()}_{next(self._count)}"
        with psycopg.connect(self.url(), autocommit=True) as connection:
            connection.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def stop(self) -> None:
        try:
            self._as_owner([self.pg_ctl, "-D", str(self.data), "-m", "fast", "-w", "stop"])
        finally:
            shutil.rmtree(self.folder, ignore_errors=True)
