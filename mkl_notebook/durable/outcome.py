"""What advancing (or reading) a durable run produced: the engine's result, the calls made and replayed, and
the journal it shows, read through typed properties rather than by its records."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from ..engine.result import RunResult
from ..lang.model import Machine
from . import records as rec
from .reading import root_of


@dataclass
class Outcome:
    """What advancing a durable run produced."""

    run_id: str
    result: RunResult
    calls: dict[str, int] = field(default_factory=lambda: {"made": 0, "replayed": 0})
    in_doubt: rec.Doubt | None = None
    records: list[dict[str, Any]] = field(default_factory=list)
    # When this shows the run as a notebook cell left it and the run went on since: the whole journal.
    latest: list[dict[str, Any]] | None = None
    replayed_steps: int = 0  # how many leading steps of the trace took their answers from the journal
    machines: dict[str, Machine] = field(default_factory=dict)  # the machines the run ran with, by name

    @property
    def status(self) -> str:
        return self.result.status

    @property
    def root(self) -> str:
        """The name of the run's machine."""
        return root_of(self.records)

    @property
    def as_it_stands(self) -> bool:
        """Whether this shows the run as its journal stands (not as a cell left it, the run gone on since)."""
        return self.latest is None

    @property
    def length(self) -> int:
        """How many records of the run's journal this shows."""
        return len(self.records)

    def overtaken(self, newer: Outcome) -> Outcome:
        """This (as a cell left the run), with ``newer`` as where the run stands now."""
        return dataclasses.replace(self, latest=newer.latest or newer.records)
