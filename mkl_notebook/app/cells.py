"""Notebook cells, as a workspace meets them: what it asks of the notebook it serves (:class:`Cells`; a command
has none, :class:`NoCells`), and a run as cells left it: the requests each cell made are in its journal, so a
cell is shown the run as it stood when that cell (or one above it) last asked, not as later cells moved it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from ..durable import places
from ..durable import runs as durable
from ..durable.places import Place
from ..durable.runs import Outcome
from ..durable.stores import RunStore
from ..engine.oracle import Oracle
from ..lang.model import Machine
from .copies import NamedFiles, Reach
from .handle import Run, RunHost


class Cells(Reach, Protocol):
    """What a workspace asks of the notebook it serves, besides the copies the notebook holds (:class:`Reach`):
    the cell a request comes from, what shows a run and keeps it in the notebook, and the handle a run is
    given. The workspace is given one (``Workspace(cells=…)``); a kernel's is
    ``mkl_notebook.notebook.session.KernelNotebook``."""

    def run_id_for(self, machine_name: str) -> str:
        """The id of a run started with none given."""
        ...

    def place(self, run_id: str) -> Place | None:
        """The cell a request made now comes from, and how far its execution got in the run (None: no cell)."""
        ...

    def reached(self, run_id: str, outcome: Outcome) -> None:
        """The executing cell has shown run ``run_id`` up to where ``outcome`` stands."""
        ...

    def moved(self, handle: Run) -> None:
        """Run ``handle`` changed, by any path: what keeps and shows it catches up."""
        ...

    def kept(self, handle: Run) -> None:
        """Run ``handle`` was started (or replayed): the notebook keeps it as it stands."""
        ...

    def let_go(self, run_id: str) -> None:
        """Run ``run_id`` was forgotten, or starts afresh: the notebook's own copy of it goes."""
        ...

    def show_found(self, handle: Run) -> bool:
        """Show a run found by id as the cells above the executing one left it; False to show it as it stands."""
        ...

    def carry(self, handle: Run, bundle: dict[str, Any]) -> dict[str, Any]:
        """A run's display output ``bundle``, as the notebook carries it (its checkpoint, or a reference to it)."""
        ...

    def new_handle(self, host: RunHost, run_id: str, machine_name: str, oracle: Oracle) -> Run:
        """A handle on run ``run_id`` of ``host``."""
        ...


class NoCells(NamedFiles):
    """A command's cells: none. Runs get new ids, nothing shows them but what the command prints, and its
    copies in reach are the files it names."""

    def run_id_for(self, machine_name: str) -> str:
        """A new id: every command starts a run of its own unless told which."""
        return durable.new_run_id()

    def place(self, run_id: str) -> Place | None:
        """No cell: a command's requests come from nowhere a later request must match."""
        return None

    def reached(self, run_id: str, outcome: Outcome) -> None:
        """No cell to move on."""

    def moved(self, handle: Run) -> None:
        """Nothing follows a command's runs."""

    def kept(self, handle: Run) -> None:
        """The store keeps it; there is no notebook."""

    def let_go(self, run_id: str) -> None:
        """There is no notebook copy to drop."""

    def show_found(self, handle: Run) -> bool:
        """A run found by id shows as it stands."""
        return False

    def carry(self, handle: Run, bundle: dict[str, Any]) -> dict[str, Any]:
        """The output as it is: its checkpoint in it."""
        return bundle

    def new_handle(self, host: RunHost, run_id: str, machine_name: str, oracle: Oracle) -> Run:
        """A plain handle."""
        return Run(host, run_id, machine_name, oracle)


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
