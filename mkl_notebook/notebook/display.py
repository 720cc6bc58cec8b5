"""A run's outputs in a cell: its one checkpoint-carrying display, its diagram, its approval form.

Each run owns ONE display output whose bundle carries the checkpoint envelope
(``application/vnd.mkl.run+json``) beside HTML and text; it is updated in place
with display handles as the run advances, so the saved notebook always holds
the latest checkpoint.  Forms live in a widget box shown in the same output
area; a later gate replaces the answered form there.
"""

from __future__ import annotations

import html
import threading
import time
from typing import Any

from IPython.display import DisplayHandle, display

from ..app.status import run_output
from ..lang.interpolate import fmt
from ..lang.model import Machine
from ..render.diagram import diagram_bundle, path_from_trace
from ..render.views import answered_by, progress_bundle
from .session import Run

LIVE_INTERVAL = 0.15  # seconds between live progress redraws


class RunView:
    """The outputs of one run in the cell that started it (or re-showed it)."""

    def __init__(self, run_id: str, machine: Machine | None) -> None:
        self.run_id = run_id
        self.machine = machine
        self.handle: DisplayHandle | None = None
        self.current_form: Any = None
        self.diagram: DisplayHandle | None = None
        self.forms: Any = None  # an ipywidgets.VBox, created when a first question appears
        self._last_draw = 0.0
        self._started = time.monotonic()
        self._state: str | None = None  # the state the run last entered, for the live line and an interrupt
        self._steps = 0
        self._main = threading.main_thread()

    # -- live progress ------------------------------------------------------------

    def start(self) -> None:
        self._started = time.monotonic()
        self.handle = display(progress_bundle(None, 0, {}, 0.0), raw=True, display_id=True)

    def stop(self, line: str) -> None:
        """The run stopped without a result to show (an interrupt, an error): one line instead of the live one."""
        if self.handle is not None:
            self.handle.update({"text/plain": line, "text/html": f"<p>{html.escape(line)}</p>"}, raw=True)

    @property
    def last_state(self) -> str | None:
        return self._state

    @property
    def last_steps(self) -> int:
        return self._steps

    def observer(self, event: str, data: dict[str, Any]) -> None:
        """Engine progress events: redraw the live line now and then, from the run's own thread only."""
        if event != "enter" or data.get("depth") or threading.current_thread() is not self._main:
            return
        self._state, self._steps = data.get("state"), int(data.get("steps") or 0)
        now = time.monotonic()
        if now - self._last_draw < LIVE_INTERVAL:
            return
        self._last_draw = now
        if self.handle is not None:
            elapsed = now - self._started
            bundle = progress_bundle(data.get("state"), int(data.get("steps") or 0), data.get("usage") or {}, elapsed)
            self.handle.update(bundle, raw=True)

    # -- final state ------------------------------------------------------------------

    def show(self, run: Run, on_reply: Any = None) -> None:
        """Draw the run as it stands, and its form when it waits for a person."""
        machine = run.machine or self.machine
        self.machine = machine
        result = run.result_object
        assert run.outcome is not None  # reading result_object made sure of it
        bundle = run_output(run.id, machine, run.outcome)
        if self.handle is None:
            self.handle = display(bundle, raw=True, display_id=True)
        else:
            self.handle.update(bundle, raw=True)
        if machine is not None:
            kind = {"suspended": "pending", "halt": "halted", "in_doubt": "halted"}.get(result.status)
            diagram = diagram_bundle(
                machine, visits=result.visits, path=path_from_trace(result.trace), current=result.at, current_kind=kind
            )
            if self.diagram is None:
                self.diagram = display(diagram, raw=True, display_id=True)
            else:
                self.diagram.update(diagram, raw=True)
        if result.waits_for_person and on_reply is not None:
            self._show_form(run, on_reply)  # a budget suspension has no question: `%mkl resume` continues it

    def _show_form(self, run: Run, on_reply: Any) -> None:
        import ipywidgets as widgets

        from .form import GateForm

        form = GateForm(run.id, run.pending or {}, on_reply)
        run.session.follow(run.id, lambda current: _settle_if_moved_on(form, current))
        if self.forms is None:
            self.forms = widgets.VBox([form.widget])
            display(self.forms)
        else:
            self.forms.children = (form.widget,)
        self.current_form = form


def _settle_if_moved_on(form: Any, run: Run) -> bool:
    """Settle ``form`` once its question is not the one ``run`` waits on; True when it is settled for good."""
    if form.settled:
        return True
    if form.sent or run.question_id == form.question_id:
        return False  # still asked, or this form's own reply is in flight (it settles itself)
    form.settle(what_happened(run, form.question_id))
    return True


def what_happened(run: Run, question_id: str | None) -> str:
    """What became of a question the run no longer waits on: who answered it, or where the run went."""
    answer = run.answer_to(question_id)
    if answer is not None:
        facts = answered_by(answer.get("by"), answer.get("at"), answer.get("via"))
        return f"Answered {fmt(answer.get('value'))!r}{f' ({facts})' if facts else ''}."
    pending = run.pending
    if pending is not None and pending.get("question_id"):
        return f"No longer asked: the run now waits on {pending.get('ask') or pending.get('question')!r}."
    return f"No longer asked: the run is {run.status}{f' ({run.error})' if run.error else ''}."
