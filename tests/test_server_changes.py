"""A PostgreSQL store tells a listener which runs other processes moved (what a waiting kernel's watch hears):
the run's id once the advance that moved it is committed, and, when the listener's connection is lost, a new
connection and word that anything may have moved unheard (nothing is missed). The server is real
(tests/postgres_server.py)."""

from __future__ import annotations

import time
from typing import Any

from mkl_notebook.durable.records import reply_record
from mkl_notebook.durable.store_opening import close_store, open_store
from mkl_notebook.durable.stores import RunStatus

Heard = set[str] | None


def _until(changes: Any, done: Any, what: str) -> list[Heard]:
    """What ``changes`` says, wait after wait, until ``done(said)``; failed when a minute goes by first."""
    said: list[Heard] = []
    deadline = time.monotonic() + 60
    while not said or not done(said[-1]):
        assert time.monotonic() < deadline, f"{what}: heard only {said}"
        said.append(changes.wait(0.5))
    return said


def test_a_listener_hears_the_runs_another_store_moves_and_what_it_may_have_missed_once_its_connection_is_lost(
    postgres: Any,
) -> None:
    import psycopg

    url = postgres.database()
    kernel, elsewhere = open_store(url), open_store(url)
    changes = kernel.changes()  # type: ignore[attr-defined]
    try:
        assert changes.wait(0.5) is None  # listening from now on: what moved before is to be looked for

        with elsewhere.lease("r"):
            elsewhere.create("r", {"t": "start", "root": "m"})
            elsewhere.append("r", {"t": "note", "n": 1})  # within an advance: nothing said yet
            _until(changes, lambda said: said == {"r"}, "the making of the run")
            assert changes.wait(0.5) == set()
            ending = dict(reply_record("root/0:gate#1/reply", "approval", "yes", by="bob", via="cli"))
            elsewhere.append_ending("r", ending, RunStatus("suspended", None, "gate"))
        _until(changes, lambda said: said == {"r"}, "the advance's end")

        with psycopg.connect(url, autocommit=True) as admin:  # the server drops the listener's session
            admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE query LIKE 'LISTEN%%' AND pid <> pg_backend_pid()"
            )
        _until(changes, lambda said: said is None, "the lost connection")
        elsewhere.set_status("r", "done", None, None)
        _until(changes, lambda said: said == {"r"}, "a run moved after the connection was made again")
    finally:
        changes.close()
        close_store(kernel)
        close_store(elsewhere)
