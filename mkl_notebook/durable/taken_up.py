"""A copy's journal put into a store: a verified envelope imported whole, or a copy that goes on past the
store's journal appended to it (taking up what a file or a colleague's copy holds)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .chain import common_prefix
from .reading import run_state
from .runs import RunStateError
from .stores import RunStore, check_run_id


def import_envelope(store: RunStore, header: Mapping[str, Any], records: list[dict[str, Any]]) -> str:
    """Put a verified envelope's journal into ``store`` (replacing what it held for that run)."""
    run_id = check_run_id(str(header["run_id"]))
    with store.lease(run_id):
        store.create(run_id, records[0])
        for record in records[1:]:
            store.append(run_id, record)
    state = run_state(records)
    store.set_status(run_id, state.status, state.error, state.at)
    return run_id


def extend_run(store: RunStore, run_id: str, held: int, records: list[dict[str, Any]]) -> None:
    """Append ``records[held:]`` to run ``run_id``, whose journal holds the first ``held`` of them: a copy that
    goes on past it, taken up. Refused when the journal changed meanwhile (it no longer ends where it did)."""
    with store.lease(run_id):
        now = store.read(run_id)
        if len(now) != held or common_prefix(now, records) != held:
            raise RunStateError(f"run '{run_id}' changed while a copy that goes on past it was being taken up")
        for record in records[held:]:
            store.append(run_id, record)
    state = run_state(records)
    store.set_status(run_id, state.status, state.error, state.at)
