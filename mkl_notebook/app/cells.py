"""A run as notebook cells left it: the requests each cell made are in its journal, so a cell is shown the run
as it stood when that cell (or one above it) last asked, not as later cells moved it."""

from __future__ import annotations

from collections.abc import Mapping

from ..durable import places
from ..durable import runs as durable
from ..durable.runs import Outcome
from ..durable.stores import RunStore
from ..lang.model import Machine


def as_cells_left(store: RunStore, run_id: str, cells: list[str], machines: Mapping[str, Machine]) -> Outcome | None:
    """Run ``run_id`` as the cells above ``cells`` (the executing cell and those below it) left it, when its
    journal holds requests from them; None when it does not (the run is then shown as it stands)."""
    records = store.read(run_id)
    cut = places.entry(records, cells)
    if cut is None or cut >= len(records):
        return None
    return durable.show_prefix(run_id, records, cut, known=machines)


def answered_in(store: RunStore, cell: str, machines: Mapping[str, Machine]) -> list[Outcome]:
    """Each run of ``store`` whose question a form of ``cell`` answered, as that form left it."""
    shown: list[Outcome] = []
    for summary in store.runs():
        records = store.read(summary.run_id)
        cut = places.form_cut(records, cell)
        outcome = None if cut is None else durable.show_prefix(summary.run_id, records, cut, known=machines)
        if outcome is not None:
            shown.append(outcome)
    return shown
