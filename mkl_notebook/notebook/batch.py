"""A batch of runs in a notebook: the value ``%mkl map`` returns.

Its questions are printed below its table with the commands that answer them (readable where no widget
draws), and a review queue (:class:`~mkl_notebook.notebook.review.ReviewQueue`) lists them for a person to
work through. Each reply answers exactly its row's question and is journaled with who gave it and when,
through the run's own handle, as a single run's form does.
"""

from __future__ import annotations

from typing import Any

from ..app import batch
from ..app.checkpoints import BATCH_MIME, BATCH_ROWS_MIME, CHECKPOINT_MIME, REFERENCE_MIME
from ..app.handle import Run, pandas_for
from ..app.notifying import announce_waiting
from ..app.requests import MapRequest
from ..app.workspace import Workspace
from ..render.batch_views import batch_bundle
from .review import ReviewQueue
from .session import KernelNotebook, notebook_of


class Batch:
    """The runs of one machine over many rows, in the order the rows were given."""

    def __init__(
        self, name: str, rows: list[batch.RowRun], runs: dict[str, Run], notebook: KernelNotebook | None = None
    ) -> None:
        self.notebook = notebook  # whose metadata link carries the rows' checkpoints (None: the table alone)
        self.name = name
        self.rows = rows
        self.runs = runs  # run id -> its handle (rows whose run could not be made have none)
        self.form: ReviewQueue | None = None  # the review queue ``%mkl map`` showed for the rows' questions
        self.drawn_in: int | None = None  # the cell execution whose magic drew the batch's table
        self.progress: Any = None  # the progress bar ``%mkl map`` drew

    def summaries(self) -> list[dict[str, Any]]:
        """Each row as the table shows it, with its run as it stands now (a form may have moved it on)."""
        for row in self.rows:
            handle = self.runs.get(row.run_id)
            if handle is not None and handle.outcome is not None:
                row.outcome = handle.outcome
        return [batch.row_summary(row) for row in self.rows]

    def answered_in(self, cell: str | None) -> list[tuple[str, list[dict[str, Any]]]]:
        """The replies ``cell``'s form gave the batch's runs, by run, in row order."""
        if cell is None:
            return []
        answered = []
        for row in self.rows:
            handle = self.runs.get(row.run_id)
            if handle is not None:
                given = handle.answers_in(cell, newest=True)
                if given:
                    answered.append((row.run_id, given))
        return answered

    @property
    def counts(self) -> dict[str, int]:
        """How many rows' runs are in each status (``done``, ``suspended``, …)."""
        self.summaries()
        return batch.counts(self.rows)

    @property
    def results(self) -> list[Any]:
        """Each row's result (None for a row that is not done), in row order."""
        return [summary.get("result") for summary in self.summaries()]

    def waiting(self) -> list[Run]:
        """The runs that wait for a person, in row order."""
        self.summaries()
        return [self.runs[row.run_id] for row in self.rows if row.run_id in self.runs and row.waits_for_person]

    def frame(self) -> Any:
        """The table as a pandas DataFrame (pandas is optional: ``pip install pandas``)."""
        return pandas_for("Batch.frame()").DataFrame(self.summaries())

    def bundle(self) -> dict[str, Any]:
        """The table, carrying each row's checkpoint as it stands: to the notebook's metadata, with the
        output referring to it there when the extension keeps the metadata (one copy), else in the output."""
        summaries = self.summaries()
        shown: dict[str, Any] = batch_bundle(summaries, batch.counts(self.rows))
        if self.notebook is None:
            return shown
        link = self.notebook.link
        entries = []
        without_run = []  # their rows as the table shows them: a redraw from the file places the entries around them
        for row, summary in zip(self.rows, summaries, strict=True):
            handle = self.runs.get(row.run_id)
            if handle is None or handle.outcome is None:
                without_run.append(summary)
                continue
            carried = link.carry(row.run_id, {CHECKPOINT_MIME: handle.envelope()}, as_it_stands=True)
            entries.append(carried.get(REFERENCE_MIME) or carried[CHECKPOINT_MIME])
        return {**shown, BATCH_MIME: entries, **({BATCH_ROWS_MIME: without_run} if without_run else {})}

    def _ipython_display_(self) -> None:
        """Show the table, unless the magic that returned this batch drew it in this very cell."""
        from IPython import get_ipython
        from IPython.display import display

        shell = get_ipython()
        if shell is not None and self.drawn_in is not None and shell.execution_count == self.drawn_in:
            return
        display(self.bundle(), raw=True)

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any]:
        return self.bundle()

    def __repr__(self) -> str:
        parts = ", ".join(f"{count} {status}" for status, count in self.counts.items())
        return f"<Batch {self.name}: {len(self.rows)} rows ({parts})>"


def run_batch(session: Workspace, name: str, over: Any, request: MapRequest | None = None, /, **options: Any) -> Batch:
    """Run machine ``name`` once per row of ``over`` in ``session`` as the request (or ``options``, its fields)
    says (see :meth:`Workspace.map`), as the value ``%mkl map`` gives: the rows' table, their runs, and a form
    for their questions."""
    ran = session.map(name, over, request, **options)
    if any(row.waits_for_person for row in ran.rows):  # the rows' questions are durable: announce them
        announce_waiting(session)
    return Batch(ran.name, ran.rows, ran.runs, notebook_of(session))
