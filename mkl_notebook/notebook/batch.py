"""A batch of runs in a notebook: the value ``%mkl map`` returns, and one form for all its questions.

The form has one row per question a batch's runs wait on: the run, the data it was asked about,
Approve / Reject and a reply box, plus *Approve all shown*; the questions themselves are printed
above it with the commands that answer them (readable where no widget draws), and a row that asks
its run's next question shows that one itself. Each reply answers exactly
its row's question (a reply to a question the run no longer asks is refused, and says so) and is
journaled with who gave it and when, through the run's own handle, as a single run's form does.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Mapping
from typing import Any

import ipywidgets as widgets

from ..app import batch
from ..app.checkpoints import BATCH_MIME, BATCH_ROWS_MIME, CHECKPOINT_MIME, REFERENCE_MIME
from ..app.handle import Run, pandas_for
from ..app.replies import APPROVE
from ..app.status import cell_answers
from ..render.batch_views import batch_bundle
from ..render.diagram import shorten
from .forms import QuestionForm, made
from .session import NotebookSession

ROW_PREVIEW = 160  # characters of a row's data the form shows beside its question


class Batch:
    """The runs of one machine over many rows, in the order the rows were given."""

    def __init__(
        self, name: str, rows: list[batch.RowRun], runs: dict[str, Run], session: NotebookSession | None = None
    ) -> None:
        self.session = session  # whose metadata link carries the rows' checkpoints (None: the table alone)
        self.name = name
        self.rows = rows
        self.runs = runs  # run id -> its handle (rows whose run could not be made have none)
        self.form: BatchForm | None = None  # the form ``%mkl map`` showed for the rows' questions
        self.drawn_in: int | None = None  # the cell execution whose magic drew the batch's table
        self.progress: Any = None  # the progress bar ``%mkl map`` drew

    def summaries(self) -> list[dict[str, Any]]:
        """Each row as the table shows it, with its run as it stands now (a form may have moved it on)."""
        for row in self.rows:
            handle = self.runs.get(row.run_id)
            if handle is not None and handle.outcome is not None:
                row.outcome = handle.outcome
        return [batch.row_summary(row) for row in self.rows]

    def answered_in(self, cell: str | None) -> list[tuple[str, list[Mapping[str, Any]]]]:
        """The replies ``cell``'s form gave the batch's runs, by run, in row order."""
        if cell is None:
            return []
        answered = []
        for row in self.rows:
            handle = self.runs.get(row.run_id)
            if handle is not None and handle.outcome is not None:
                records = handle.outcome.latest or handle.outcome.records
                given = cell_answers(records, cell)
                if given:
                    answered.append((row.run_id, given))
        return answered

    @property
    def counts(self) -> dict[str, int]:
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
        if self.session is None:
            return shown
        link = self.session.link
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


class BatchForm:
    """One form for every question of a batch: a row per question, each reply bound to its question.

    ``place`` names where it stands (the cell): its widgets' model ids derive from it, so a notebook
    executed again saves the same ids."""

    def __init__(
        self,
        runs: list[Run],
        rows: dict[str, dict[str, Any]],
        on_moved: Callable[[], None],
        cell: str | None = None,
        session: NotebookSession | None = None,
        place: str | None = None,
    ) -> None:
        self._lock = threading.Lock()
        self._on_moved = on_moved  # redraw the batch's table (and, once all are answered, this form's place)
        self.place = place or f"batch/{id(self)}"
        self.rows = [self._row(run, rows.get(run.id, {}), cell, session) for run in runs]
        self.approve_all = made(
            widgets.Button,
            f"{self.place}/approve-all",
            description="Approve all shown",
            button_style="success",
            icon="check",
        )
        self.approve_all.on_click(lambda _: self._approve_all())
        self.status = made(widgets.HTML, f"{self.place}/status", value="")
        count = len(self.rows)
        header = made(
            widgets.HTML,
            f"{self.place}/header",
            value=f"<p><strong>{count} question{'s' if count != 1 else ''} wait{'' if count != 1 else 's'} for a "
            "person.</strong> Each reply answers its own row's question only.</p>",
        )
        self.widget = made(
            widgets.VBox,
            f"{self.place}/form",
            children=[header, *(row.widget for row in self.rows), self.approve_all, self.status],
        )
        self.printed: Any = None  # the output printing the questions, above the form
        self.shown: Any = None  # the output holding the form

    def show(self, printed: dict[str, Any]) -> None:
        """Print the questions (``printed``: readable where no widget draws), and the form below them."""
        from IPython.display import display

        self.printed = display(printed, raw=True, display_id=True)
        self.shown = display({**self.widget._repr_mimebundle_(), "text/plain": ""}, raw=True, display_id=True)

    def answered(self, said: dict[str, Any]) -> None:
        """Every question is answered: ``said`` (what was) stands where they were printed; the form leaves its
        output (it stays, settled, where only widgets are followed)."""
        if self.printed is not None:
            self.printed.update(said, raw=True)
        if self.shown is not None:
            self.shown.update({"text/plain": ""}, raw=True)

    def _row(self, run: Run, data: dict[str, Any], cell: str | None, session: NotebookSession | None) -> QuestionForm:
        """A row answering ``run``'s question; its replies are journaled as ``cell``'s form's."""

        def reply(value: Any, question: str | None, note: str | None = None) -> None:
            try:
                if session is not None:
                    session.answer(run, value, question, note=note, form_of=cell)
                else:
                    run.submit(value, question=question, via="form", note=note, form_of=cell)
            finally:
                self._moved()

        def next_question() -> Any:
            return run.pending if run.run_result.waits_for_person else None

        preview = shorten(json.dumps(data, ensure_ascii=False, default=str), ROW_PREVIEW)
        return QuestionForm(
            run.id,
            run.pending or {},
            reply,
            compact=True,
            data=preview,
            run=run,
            next_question=next_question,
            place=f"{self.place}/row:{run.id}",
            beside=True,
        )

    def _moved(self) -> None:
        self._on_moved()
        if all(row.sent for row in self.rows):
            self.approve_all.disabled = True

    def _approve_all(self) -> None:
        with self._lock:
            if self.approve_all.disabled:
                return
            self.approve_all.disabled = True
        open_rows = [row for row in self.rows if not row.sent]
        for row in open_rows:
            row.submit(APPROVE)
        self.status.value = f"<em>Approved {len(open_rows)} shown question(s).</em>"


def run_batch(session: NotebookSession, name: str, over: Any, **options: Any) -> Batch:
    """Run machine ``name`` once per row of ``over`` in ``session`` (see :meth:`Workspace.map` for the options),
    as the value ``%mkl map`` gives: the rows' table, their runs, and a form for their questions."""
    ran = session.map(name, over, **options)
    return Batch(ran.name, ran.rows, ran.runs, session)
