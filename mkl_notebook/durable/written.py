"""What a store wrote of a run while it held the run's lease: no other process may write the run then, so its
records are read back from here, not from the file or the server (a long run's advance reads its journal after
every answer). Outside the lease nothing is kept: another process may have written since."""

from __future__ import annotations

from typing import Any


class LeasedRecords:
    """Per run leased here: the records written from some position on. Callers hold their store's lock."""

    def __init__(self) -> None:
        self._runs: dict[str, tuple[int, list[dict[str, Any]]]] = {}

    def lease_taken(self, run_id: str) -> None:
        """Run ``run_id`` is leased here from now on: its records may be kept as they are written."""
        self._runs[run_id] = (0, [])

    def lease_let_go(self, run_id: str) -> None:
        """Another process may write run ``run_id`` now: keep none of it."""
        self._runs.pop(run_id, None)

    def leased(self, run_id: str) -> bool:
        """Whether run ``run_id`` is leased here (what is written of it may be kept)."""
        return run_id in self._runs

    def keep(self, run_id: str, seq: int, records: list[dict[str, Any]]) -> None:
        """Remember run ``run_id``'s records from ``seq`` on, when it is leased here. A record that does not
        follow those kept starts the kept ones anew."""
        kept = self._runs.get(run_id)
        if kept is None:
            return
        first, known = kept
        if known and seq == first + len(known):
            known.extend(records)
        else:
            self._runs[run_id] = (seq, list(records))

    def forget(self, run_id: str) -> None:
        """Keep none of run ``run_id``'s records so far (what was written is not known for sure), when it is
        leased here."""
        if run_id in self._runs:
            self._runs[run_id] = (0, [])

    def since(self, run_id: str, since: int) -> list[dict[str, Any]] | None:
        """Run ``run_id``'s records from the ``since``-th on, when they are all kept here; None: read the store."""
        first, known = self._runs.get(run_id, (0, []))
        if known and first <= since <= first + len(known):
            return known[since - first :]
        return None
