"""The review queue: every question a batch's runs wait on, in one compact table (ipywidgets).

A row per question: the run, the question, what it is about (the output the gate decided on, as the single
form shows it), when it was asked, and Approve / Reject / a note in the row. Rows leave the queue as they are
answered, by this queue or by any other path (the notebook tells the queue whenever a run moves), so its counts
stay true; a run that asks again comes back with its next question. A text filter (run id, question, about)
and a sort narrow what is shown; *Approve the N shown* writes one answer per row on the page shown, each with
the same note, and nothing for any other row.

Only the page shown (:data:`PAGE` rows) has widgets: a batch of thousands of questions draws as fast as one
of a page. Every widget's model id derives from where the queue stands and the question it answers
(:func:`~mkl_notebook.notebook.forms.made`), so a notebook executed again saves the same ids, and a button can
only ever answer the question it was drawn for.
"""

from __future__ import annotations

import html
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import ipywidgets as widgets

from ..app.errors import USER_ERRORS
from ..app.handle import Run
from ..app.replies import APPROVE, REJECT, Decision, form_reply
from ..render.common import shorten
from .forms import FORM_CLASS, Pending, QuestionControl, made
from .session import KernelNotebook

PAGE = 25  # rows with controls at a time
ABOUT_PREVIEW = 240  # characters of what a question is about the row shows
QUESTION_PREVIEW = 160
SORTS = (("row order", "row"), ("run", "run"), ("age (oldest first)", "age"), ("question", "question"))
COLUMNS = ("run", "question", "about", "asked", "note", "", "")
TIGHT = "<div style='line-height: 1.35'>{}</div>"  # the widgets' own line height (28px) makes rows tall
GRID = "max-content minmax(10em, 2fr) minmax(12em, 3fr) max-content minmax(8em, 1fr) max-content max-content"


@dataclass
class QueueRow:
    """One question in the queue, answered through its :class:`~.forms.QuestionControl` (the road a single
    form's reply takes); its widgets exist only while it is on the page shown."""

    order: int  # the run's row in the batch
    run: Run
    pending: Pending
    asked_at: float | None
    answering: QuestionControl
    note_text: str = ""  # what was typed in its note box, kept while the row is off the page
    controls: list[widgets.Widget] = field(default_factory=list)
    note: widgets.Text | None = None
    approve: widgets.Button | None = None
    reject: widgets.Button | None = None

    @classmethod
    def of(cls, order: int, run: Run, pending: Pending, cell: str | None) -> QueueRow:
        """The row of the question ``pending`` of ``run`` (the batch's row ``order``), answered as ``cell``'s."""
        control = QuestionControl(
            run,
            pending.get("question_id"),
            model_asks=pending.get("question") is not None,
            via="queue",
            cell=cell,
            approvers=tuple(pending.get("approvers") or ()),
        )
        return cls(order, run, pending, run.asked_at, control)

    @property
    def sent(self) -> bool:
        """Whether a reply to the row's question is on its way or journaled."""
        return self.answering.sent

    @property
    def question_id(self) -> str | None:
        return self.pending.get("question_id")

    @property
    def model_asks(self) -> bool:
        """A model's question takes a typed reply, not Approve / Reject."""
        return self.pending.get("question") is not None

    @property
    def text(self) -> str:
        asked = self.pending.get("question") if self.model_asks else self.pending.get("ask")
        return str(asked or f"The run is waiting at '{self.pending.get('at')}'.")

    @property
    def about(self) -> str:
        return str(self.pending.get("about") or "")

    def matches(self, words: str) -> bool:
        return not words or any(words in text.lower() for text in (self.run.id, self.text, self.about))


def _when(at: float | None) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(at)) if at is not None else "—"


class ReviewQueue:
    """The questions ``runs`` wait on, as a queue a person works through; replies are journaled as ``cell``'s
    form's, through the runs' handles, by the road a single form's takes. The queue learns that a run moved
    only from ``notebook``, which tells it whenever one does (by this queue's reply or by any other path);
    ``on_moved`` is then called, so that what shows the batch catches up."""

    def __init__(
        self,
        runs: list[Run],
        on_moved: Callable[[], None],
        cell: str | None,
        notebook: KernelNotebook,
        place: str | None = None,
        page: int = PAGE,
    ) -> None:
        self._lock = threading.RLock()
        self._on_moved = on_moved
        self._cell = cell
        self.place = place or f"queue/{id(self)}"
        self.page_size = page
        self.page = 0
        self._quiet = False  # while approving the rows shown: one redraw at the end
        self.items: list[QueueRow] = [
            QueueRow.of(order, run, run.pending or {}, cell) for order, run in enumerate(runs) if run.pending
        ]
        key = self.place
        self.header = made(widgets.HTML, f"{key}/header", value="")
        self.filter = made(
            widgets.Text,
            f"{key}/filter",
            placeholder="Filter: run id, question or what it is about",
            continuous_update=False,
            layout={"width": "24em"},
        )
        self.sort = made(
            widgets.Dropdown, f"{key}/sort", options=list(SORTS), value="row", description="Sort by", layout={}
        )
        self.previous = made(widgets.Button, f"{key}/previous", description="◀ Previous", layout={"width": "auto"})
        self.next = made(widgets.Button, f"{key}/next", description="Next ▶", layout={"width": "auto"})
        self.paging = made(widgets.HTML, f"{key}/paging", value="")
        self.grid = made(
            widgets.GridBox,
            f"{key}/grid",
            layout={"grid_template_columns": GRID, "grid_gap": "2px 10px", "align_items": "center"},
        )
        self._heads = [
            made(widgets.HTML, f"{key}/head/{index}", value=f"<strong>{html.escape(name)}</strong>")
            for index, name in enumerate(COLUMNS)
        ]
        self.bulk_note = made(
            widgets.Text, f"{key}/bulk-note", placeholder="Note for every row approved (optional)", layout={}
        )
        self.approve_shown = made(
            widgets.Button,
            f"{key}/approve-shown",
            description="Approve the 0 shown",
            button_style="success",
            icon="check",
            layout={"width": "auto"},
        )
        self.status = made(widgets.HTML, f"{key}/status", value="")
        self.filter.observe(lambda _: self._go_to(0), names="value")
        self.sort.observe(lambda _: self._go_to(0), names="value")
        self.previous.on_click(lambda _: self._go_to(self.page - 1))
        self.next.on_click(lambda _: self._go_to(self.page + 1))
        self.approve_shown.on_click(lambda _: self._approve_shown())
        tools = made(widgets.HBox, f"{key}/tools", children=[self.filter, self.sort, self.previous, self.next])
        bulk = made(widgets.HBox, f"{key}/bulk", children=[self.bulk_note, self.approve_shown])
        self.widget = made(
            widgets.VBox,
            f"{key}/queue",
            children=[self.header, tools, self.paging, self.grid, bulk, self.status],
            _dom_classes=[FORM_CLASS],
        )
        self.shown: list[QueueRow] = []
        self.printed: Any = None  # the output printing the questions, above the queue
        self.output: Any = None  # the output holding the queue
        self._draw()
        for run in runs:
            notebook.follow(run.id, self._went_on)

    # -- what it shows ----------------------------------------------------------------------------------

    @property
    def rows(self) -> list[QueueRow]:
        """The questions that wait, in the order shown (filtered and sorted)."""
        words = self.filter.value.strip().lower()
        matching = [row for row in self.items if row.matches(words)]
        how = self.sort.value
        if how == "run":
            matching.sort(key=lambda row: row.run.id)
        elif how == "age":
            matching.sort(key=lambda row: (row.asked_at is None, row.asked_at or 0.0, row.order))
        elif how == "question":
            matching.sort(key=lambda row: (row.text.lower(), row.order))
        return matching

    def row(self, run_id: str) -> QueueRow | None:
        """The row of run ``run_id``'s question, if it waits in the queue."""
        return next((row for row in self.items if row.run.id == run_id), None)

    def _go_to(self, page: int) -> None:
        with self._lock:
            self.page = page
            self._draw()

    def _draw(self) -> None:
        """Draw the page shown: controls for its rows, none for any other."""
        if self._quiet:
            return
        with self._lock:
            matching = self.rows
            pages = max(1, -(-len(matching) // self.page_size))
            self.page = min(max(self.page, 0), pages - 1)
            start = self.page * self.page_size
            shown = matching[start : start + self.page_size]
            for row in self.shown:
                if row not in shown:
                    self._drop_controls(row)
            self.shown = shown
            children: list[widgets.Widget] = list(self._heads) if shown else []
            for row in shown:
                children.extend(row.controls or self._make_controls(row))
            self.grid.children = children
            waiting = len(self.items)
            said = f"{waiting} question{'s' if waiting != 1 else ''} wait{'s' if waiting == 1 else ''} for a person"
            if self.filter.value.strip():
                said += f"; {len(matching)} match the filter"
            self.header.value = f"<p><strong>{html.escape(said)}.</strong> Each reply answers its own row only.</p>"
            self.paging.value = (
                f"<small>Rows {start + 1}–{start + len(shown)} of {len(matching)} (page {self.page + 1} of {pages})"
                "</small>"
                if shown
                else "<small>No question to show.</small>"
            )
            self.previous.disabled = self.page == 0
            self.next.disabled = self.page >= pages - 1
            approvable = [row for row in shown if not row.model_asks and not row.sent and not row.answering.read_only]
            self.approve_shown.description = f"Approve the {len(approvable)} shown"
            self.approve_shown.disabled = not approvable

    def _make_controls(self, row: QueueRow) -> list[widgets.Widget]:
        key = f"{self.place}/q:{row.question_id or row.run.id}"
        run = made(
            widgets.HTML, f"{key}/run", value=f"<code style='white-space: nowrap'>{html.escape(row.run.id)}</code>"
        )
        who = "<small>(model output)</small> " if row.model_asks else ""
        question = made(
            widgets.HTML,
            f"{key}/question",
            value=TIGHT.format(f"{who}{html.escape(shorten(row.text, QUESTION_PREVIEW))}"),
        )
        about = made(
            widgets.HTML,
            f"{key}/about",
            value=TIGHT.format(f"<small>{html.escape(shorten(row.about, ABOUT_PREVIEW))}</small>")
            if row.about
            else "—",
        )
        asked = made(widgets.HTML, f"{key}/asked", value=f"<small>{_when(row.asked_at)}</small>")
        hint = "Your reply" if row.model_asks else "Note (optional)"
        row.note = made(widgets.Text, f"{key}/note", value=row.note_text, placeholder=hint, layout={"width": "auto"})
        cells: list[widgets.Widget] = [run, question, about, asked, row.note]
        if row.model_asks:
            send = made(widgets.Button, f"{key}/send", description="Send reply", layout={"width": "auto"})
            send.on_click(lambda _: self.answer(row, None))
            row.approve, row.reject = None, None
            cells += [send, made(widgets.HTML, f"{key}/no-reject", value="")]
        else:
            row.approve = made(
                widgets.Button,
                f"{key}/approve",
                description="Approve",
                button_style="success",
                layout={"width": "auto"},
            )
            row.reject = made(
                widgets.Button, f"{key}/reject", description="Reject", button_style="danger", layout={"width": "auto"}
            )
            row.approve.on_click(lambda _: self.answer(row, APPROVE))
            row.reject.on_click(lambda _: self.answer(row, REJECT))
            cells += [row.approve, row.reject]
        for cell in cells:
            if hasattr(cell, "disabled"):
                cell.disabled = row.sent or bool(row.answering.read_only)
        row.controls = cells
        return cells

    def _drop_controls(self, row: QueueRow) -> None:
        """The row leaves the page (or the queue): its widgets close; what was typed in its note is kept."""
        if row.note is not None:
            row.note_text = row.note.value
        for control in row.controls:
            control.close()
        row.controls, row.note, row.approve, row.reject = [], None, None, None

    # -- answering ---------------------------------------------------------------------------------------

    def answer(self, row: QueueRow, decision: Decision | None, note: str | None = None) -> bool:
        """Send ``decision`` (None: the typed reply) as the one answer to ``row``'s question, with the text in its
        note box (or ``note``); whether it was journaled. The row leaves the queue when the notebook tells it
        that the run moved."""
        with self._lock:
            if row not in self.items:
                return False
            typed = note if note is not None else (row.note.value if row.note is not None else row.note_text)
            given = row.answering.take(decision, typed)
            if isinstance(given, str):
                if not row.sent:
                    self._say(f"{row.run.id}: {given}")
                return False
            self._enable(row, False)
        journaled, said = row.answering.give(given)
        if not journaled:
            if not row.sent:
                self._enable(row, True)  # refused, nothing journaled: the row stays, and says why
            self._say(f"{row.run.id}: {said}")
        return journaled

    @staticmethod
    def _enable(row: QueueRow, enabled: bool) -> None:
        for control in row.controls:
            if hasattr(control, "disabled"):
                control.disabled = not enabled

    def _approve_shown(self) -> None:
        """One approval per approvable row on the page shown, each with the note beside the button."""
        with self._lock:
            rows = [row for row in self.shown if not row.model_asks and not row.sent and not row.answering.read_only]
            note = self.bulk_note.value
            try:
                form_reply(APPROVE, note)
            except USER_ERRORS as exc:
                self._say(f"Not sent: {exc}")
                return
            self.approve_shown.disabled = True
            self._quiet = True
        approved = 0
        try:
            for row in rows:
                approved += self.answer(row, APPROVE, note=note)
        finally:
            self._quiet = False
            self._draw()
            self._on_moved()
        self._say(f"Approved {approved} shown question{'s' if approved != 1 else ''}.")

    def _say(self, text: str) -> None:
        self.status.value = f"<em>{html.escape(text)}</em>"

    # -- following the runs ---------------------------------------------------------------------------------

    def caught_up(self, run: Run) -> None:
        """Run ``run`` moved: its answered question leaves the queue; a question it asks now takes its place."""
        with self._lock:
            row = self.row(run.id)
            if row is None:
                return
            pending = run.pending if run.run_result.waits_for_person else None
            if pending is not None and pending.get("question_id") == row.question_id:
                return  # still the question the row shows
            index = self.items.index(row)
            self.items.remove(row)
            self._drop_controls(row)
            if row in self.shown:
                self.shown.remove(row)
            if pending is not None:
                self.items.insert(index, QueueRow.of(row.order, run, pending, self._cell))
            self._draw()

    def _went_on(self, run: Any) -> bool:
        """The notebook's word that ``run`` moved (by this queue's reply or any other path); True once the queue
        no longer follows it."""
        if self.widget.comm is None:  # this queue was closed (its cell executed again): another follows
            return True
        before = self.row(run.id)
        self.caught_up(run)
        after = self.row(run.id)
        if after is not before and not self._quiet:  # what shows the batch catches up (once, after approving many)
            self._on_moved()
        return after is None

    # -- its place in the notebook ---------------------------------------------------------------------------

    def show(self, printed: dict[str, Any]) -> None:
        """Print the questions (``printed``: readable where no widget draws), and the queue below them."""
        from IPython.display import display

        self.printed = display(printed, raw=True, display_id=True)
        self.output = display({**self.widget._repr_mimebundle_(), "text/plain": ""}, raw=True, display_id=True)

    def _ipython_display_(self) -> None:
        """As a cell's value: nothing more where the queue is shown already (``q = %mkl pending --queue``)."""
        if self.output is None:
            from IPython.display import display

            display(self.widget)

    def answered(self, said: dict[str, Any]) -> None:
        """Every question is answered: ``said`` (what was) stands where they were printed; the queue leaves its
        output (it stays, emptied, where only widgets are followed)."""
        if self.printed is not None:
            self.printed.update(said, raw=True)
        if self.output is not None:
            self.output.update({"text/plain": ""}, raw=True)
