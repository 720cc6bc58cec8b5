"""Being told, by a PostgreSQL store's server, which runs another process moved: what a waiting kernel listens
for instead of looking at the store again and again.

A store on a server says so in the transaction that ends an advance (or makes, drops or marks a run): a
``NOTIFY`` on :data:`CHANNEL` with the run's id, which the server delivers to every listening session once that
transaction commits (never before, never if it rolls back). A listener holds a connection of its own (never one
of the store's pool: it lives in another thread, waiting), and when that connection is lost it makes a new one
and says that anything may have changed meanwhile (notifications sent while nobody listened are not kept).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

CHANNEL = "mkl_runs"
PAYLOAD_MAX = 7999  # bytes of a notification's payload the server takes (8000 with its end)
ANY_RUN = ""  # a payload naming no run: any of them may have moved (an id too long to be a payload)


def notify(connection: Any, run_id: str) -> None:
    """Tell the listeners, once the transaction ``connection`` is in commits, that run ``run_id`` moved."""
    payload = run_id if len(run_id.encode("utf-8")) <= PAYLOAD_MAX else ANY_RUN
    connection.execute("SELECT pg_notify(%s, %s)", (CHANNEL, payload))


class RunChanges:
    """The runs a PostgreSQL store's server says moved, heard on a connection of this listener's own.

    ``connect`` makes that connection (autocommit); ``problem`` turns a driver's error into the store's.
    """

    def __init__(self, connect: Callable[[], Any], errors: type[BaseException], problem: Callable[..., Any]) -> None:
        self._connect = connect
        self._errors = errors
        self._problem = problem
        self._connection: Any = None

    def wait(self, timeout: float) -> set[str] | None:
        """The ids of runs moved within ``timeout`` seconds (returning at the first news, empty if none came);
        None when anything may have moved unheard: the first wait, and the first after the connection was lost
        and made again (the caller then looks at every run it follows)."""
        if self._connection is None or self._connection.closed:
            self._listen()
            return None
        moved: set[str] = set()
        try:
            for heard in self._connection.notifies(timeout=timeout, stop_after=1):
                moved.add(heard.payload)
            if moved:  # what else came in the same moment
                for heard in self._connection.notifies(timeout=0.001):
                    moved.add(heard.payload)
        except self._errors:
            self.close()
            self._listen()
            return None
        if ANY_RUN in moved:
            return None
        return moved

    def _listen(self) -> None:
        try:
            connection = self._connect()
        except self._errors as exc:
            raise self._problem(exc) from None
        try:
            connection.execute(f"LISTEN {CHANNEL}")
        except self._errors as exc:
            connection.close()
            raise self._problem(exc) from None
        self._connection = connection

    def close(self) -> None:
        """Listen no more (the connection is closed)."""
        connection, self._connection = self._connection, None
        if connection is not None:
            with contextlib.suppress(self._errors):
                connection.close()
