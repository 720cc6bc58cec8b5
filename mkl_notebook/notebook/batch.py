"""A batch of runs in a notebook: the value ``%mkl map`` returns, and one form for all its questions.

The form has one row per question a batch's runs wait on: the question's text, the data it was
asked about, Approve / Reject and a reply box, plus *Approve all shown*. Each reply answers exactly
its row's question (a reply to a question the run no longer asks is refused, and says so) and is
journaled with who gave it and when, through the run's own handle, as a single run's form does.
"""

from __future__ import annotations

import html
import json
import threading
from collections.abc import Callable, Mapping
from typing import Any

import ipywidgets as widgets

from ..app import batch
from ..app import runs as app_runs
from ..app.errors import USER_ERRORS
from ..app.replies import APPROVE, REJECT, Decision, form_reply
from ..app.trust import Untrusted
from ..app.values import host_input
from ..durable import places
from ..durable.envelope import BATCH_MIME_TYPE, MIME_TYPE, REF_MIME_TYPE
from ..render.batch_views import batch_bundle
from ..render.diagram import shorten
from .session import Run, Session, pandas_for

ROW_PREVIEW = 160  # characters of a row's data the form shows beside its question


class Batch:
    """The runs of one machine over many rows, in the order the rows were given."""

    def __init__(
        self, name: str, rows: list[batch.RowRun], runs: dict[str, Run], session: Session | None = None
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
                given = places.form_answers(records, cell, len(records))
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
        signer, link = self.session.signer(), self.session.link
        entries = []
        for row in self.rows:
            handle = self.runs.get(row.run_id)
            if handle is None or handle.outcome is None:
                continue
            carried = link.carry(row.run_id, {MIME_TYPE: handle.outcome.envelope(signer)}, as_it_stands=True)
            entries.append(carried.get(REF_MIME_TYPE) or carried[MIME_TYPE])
        return {**shown, BATCH_MIME_TYPE: entries}

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
    """One form for every question of a batch: a row per question, each reply bound to its question."""

    def __init__(
        self,
        runs: list[Run],
        rows: dict[str, dict[str, Any]],
        on_moved: Callable[[], None],
        cell: str | None = None,
    ) -> None:
        self._lock = threading.Lock()
        self._on_moved = on_moved  # redraw the batch's table (and, once all are answered, this form's place)
        self.rows = [_QuestionRow(run, rows.get(run.id, {}), self._moved, cell) for run in runs]
        self.approve_all = widgets.Button(description="Approve all shown", button_style="success", icon="check")
        self.approve_all.on_click(lambda _: self._approve_all())
        self.status = widgets.HTML("")
        count = len(self.rows)
        header = widgets.HTML(
            f"<p><strong>{count} question{'s' if count != 1 else ''} wait{'' if count != 1 else 's'} for a "
            "person.</strong> Each reply answers its own row's question only.</p>"
        )
        self.widget = widgets.VBox([header, *(row.widget for row in self.rows), self.approve_all, self.status])

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


class _QuestionRow:
    """One row of the batch form: the question its run waits on now. When a reply takes the run to a
    further question, the row asks that one in its place."""

    def __init__(self, run: Run, data: dict[str, Any], moved: Callable[[], None], cell: str | None) -> None:
        self.run = run
        self.cell = cell  # the notebook cell whose form this is: its replies are journaled as this cell's
        self._moved = moved
        self._lock = threading.Lock()
        self._data = shorten(json.dumps(data, ensure_ascii=False, default=str), ROW_PREVIEW)
        self.header = widgets.HTML("")
        self.status = widgets.HTML("")
        self.buttons = widgets.HBox([])
        self.widget = widgets.VBox([self.header, self.buttons, self.status])
        self.sent = False
        self.question_id: str | None = None
        self._ask()

    def _ask(self) -> None:
        """Show the question the run waits on now, with controls of its own (those of an answered question
        leave the page, so a click can only ever answer the question it was shown with)."""
        pending = self.run.pending or {}
        self.question_id = self.run.question_id
        asked = pending.get("question")
        text = asked if asked is not None else pending.get("ask") or f"The run is waiting at '{pending.get('at')}'."
        who = "The model asks (model output)" if asked is not None else "The machine's author asks"
        self.header.value = (
            f"<p><code>{html.escape(self.run.id)}</code> — {who}:</p><blockquote>{html.escape(text)}</blockquote>"
            f"<p><small>About: <code>{html.escape(self._data)}</code></small></p>"
        )
        self.reply = widgets.Text(placeholder="Reply (optional for Approve / Reject)")
        self.approve = widgets.Button(description="Approve", button_style="success")
        self.reject = widgets.Button(description="Reject", button_style="danger")
        self.send = widgets.Button(description="Send reply")
        self.approve.on_click(lambda _: self.submit(APPROVE))
        self.reject.on_click(lambda _: self.submit(REJECT))
        self.send.on_click(lambda _: self.submit(None))
        self.buttons.children = (
            [self.reply, self.send] if asked is not None else [self.reply, self.approve, self.reject, self.send]
        )
        self.sent = False

    def submit(self, decision: Decision | None) -> None:
        with self._lock:
            if self.sent:
                return
            if decision is not None and self.run.pending and self.run.pending.get("question") is not None:
                decision = None  # a model's question takes a typed answer
            value = form_reply(decision, self.reply.value)
            if value is None:
                self.status.value = "<em>Type a reply first (or use Approve / Reject).</em>"
                return
            self.sent = True
            for control in (self.approve, self.reject, self.send, self.reply):
                control.disabled = True
        try:
            self.run.submit(value, question=self.question_id, via="form", form_of=self.cell)
        except USER_ERRORS as exc:  # answered another way, or no longer asked: say so here
            self.status.value = f"<strong>Not sent:</strong> {html.escape(str(exc))}"
        except Exception as exc:  # errors in click handlers never reach the cell: show them here
            self.status.value = f"<strong>Could not resume:</strong> {html.escape(str(exc))}"
        else:
            self.status.value = (
                f"<em>Sent {html.escape(str(value))} — the run is now {html.escape(self.run.status)}.</em>"
            )
            if self.run.result_object.waits_for_person:
                self._ask()  # its next question, in the same place
            else:
                self.buttons.children = ()  # nothing more to answer on this row
        self._moved()


def run_batch(
    session: Session,
    name: str,
    over: Any,
    *,
    id: str | None = None,
    key: str | None = None,
    input: Mapping[str, Any] | None = None,
    hitl: str | None = None,
    suspend: bool = False,
    max_steps: int | str | None = None,
    max_tokens: int | str | None = None,
    max_cost: float | str | None = None,
    script: Any = None,
    model: str | None = None,
    concurrency: int = batch.DEFAULT_CONCURRENCY,
    fresh: bool = False,
    progress: Callable[[int, int], None] | None = None,
    executor: str | None = None,
) -> Batch:
    """Run machine ``name`` once per row of ``over`` (a list of dicts, a DataFrame, or a .jsonl, .json or
    .csv path): a durable run per row, ``concurrency`` at a time; the batch's id (``id``, default the
    machine's name) and the row's ``key`` column, or the row's content, name each run, so running the
    same rows again replays them. ``progress(done, total)`` is told, on this thread, as rows finish;
    ``executor`` (``dask``, ``dask://ADDRESS``) makes the rows' calls on a Dask cluster.

    A row's run the store does not hold but the notebook does is taken up from it when trusted. The runs
    are kept in the run store (the notebook file does not carry a batch's checkpoints yet).
    """
    machine = session.machine(name)
    rows = batch.plan(batch.read_rows(over), id or name, key)
    carried = session.runs_in_notebook() if not fresh else set()  # the file is read once, not once a row
    for row in rows:
        if row.run_id in carried and not session.store.exists(row.run_id):
            try:
                session.rehydrate(row.run_id)
            except Untrusted:
                if script is None:
                    raise  # running it afresh would call a model instead of the file's run: ask first
    options = app_runs.run_options(
        max_steps=max_steps,
        max_tokens=max_tokens,
        max_cost=max_cost,
        suspend=suspend,
        hitl=hitl or session.settings.hitl,
        max_workers=session.settings.max_workers,
    )
    needs_model = fresh or any(not session.store.exists(row.run_id) for row in rows)
    make_oracle = session.oracle_factory(script, model, needs_model=needs_model, machine=machine, executor=executor)
    finished = 0
    if progress is not None:
        progress(0, len(rows))
    for stopped in batch.run(
        machine,
        rows,
        store=session.store,
        oracle_for=make_oracle,
        registry=dict(session.machines),
        options=options,
        input=host_input(input or {}, "input"),
        concurrency=concurrency,
        fresh=fresh,
    ):
        if stopped is not None:
            finished += 1
        if progress is not None:
            progress(finished, len(rows))
    handles: dict[str, Run] = {}
    for row in rows:
        if row.outcome is None:
            continue
        handle = Run(session, row.run_id, name, make_oracle())
        handle.outcome = row.outcome
        session.runs[row.run_id] = handle
        handles[row.run_id] = handle
    return Batch(id or name, rows, handles, session)
