"""The approval form for a run waiting on a person (ipywidgets).

The form shows the machine author's ``ask`` as literal text (or, for a model's
own question, labels it as model output), Approve / Reject buttons and a reply
box.  The first submission disables the whole form at once, so a double click
is one reply; an empty reply where text is required is refused in the form and
journals nothing.
"""

from __future__ import annotations

import html
import threading
from collections.abc import Callable
from typing import Any

import ipywidgets as widgets

from ..app.replies import APPROVE, REJECT, Decision, form_reply


class Superseded(Exception):
    """A reply came too late: the question was answered (or dropped) by another path; the message says how."""


class GateForm:
    """One pending question; ``on_reply(value, question_id)`` is called at most once.

    The reply names the question this form shows (``pending["question_id"]``), so that it can
    only ever answer that question.
    """

    def __init__(self, run_id: str, pending: dict[str, Any], on_reply: Callable[[Any, str | None], None]) -> None:
        self.run_id = run_id
        self.pending = pending
        self._on_reply = on_reply
        self._lock = threading.Lock()
        self.submitted: Any = None
        self.sent = False
        self.settled = False  # answered or moved past, by this form or by any other path
        question = pending.get("question")
        if question is not None:
            label = "<strong>The model asks</strong> (model output, not the machine's author):"
            text = question
        elif pending.get("taken_up"):  # someone else's run, taken up by choice: the text is the file's word
            label = (
                f"<strong>Not trusted:</strong> {html.escape(str(pending['taken_up']))}.</p>"
                "<p><strong>The file says its machine's author asks:</strong>"
            )
            text = pending.get("ask") or f"The run is waiting at '{pending.get('at')}'."
        else:
            label = "<strong>The machine's author asks:</strong>"
            text = pending.get("ask") or f"The run is waiting at '{pending.get('at')}'."
        reply_to = pending.get("reply_to") or "human.reply"
        about = pending.get("about")
        shown_about = (
            f"<p>About this (the output the question is about):</p><blockquote>{html.escape(str(about))}</blockquote>"
            if about
            else ""
        )
        again = "".join(
            f"<p><mark>{html.escape(sentence)}</mark></p><pre>{html.escape(chr(10).join(diff))}</pre>"
            for sentence, diff in pending.get("asked_again") or ()
        )
        self.header = widgets.HTML(
            f"{again}<p>{label}</p><blockquote>{html.escape(text)}</blockquote>{shown_about}"
            f"<p><small>Run <code>{html.escape(run_id)}</code> continues at "
            f"<code>{html.escape(str(pending.get('at')))}</code>; your reply lands at "
            f"<code>{html.escape(reply_to)}</code>.</small></p>"
        )
        self.reply = widgets.Textarea(
            placeholder="Reply (optional for Approve / Reject)", layout=widgets.Layout(width="100%")
        )
        self.approve = widgets.Button(description="Approve", button_style="success", icon="check")
        self.reject = widgets.Button(description="Reject", button_style="danger", icon="times")
        self.send = widgets.Button(description="Send reply", icon="paper-plane")
        self.status = widgets.HTML("")
        self.approve.on_click(lambda _: self._submit(APPROVE))
        self.reject.on_click(lambda _: self._submit(REJECT))
        self.send.on_click(lambda _: self._submit(None))
        buttons = [self.send] if question is not None else [self.approve, self.reject, self.send]
        self.widget = widgets.VBox([self.header, self.reply, widgets.HBox(buttons), self.status])

    @property
    def controls(self) -> list[widgets.Widget]:
        return [self.approve, self.reject, self.send, self.reply]

    def _submit(self, decision: Decision | None) -> None:
        with self._lock:
            if self.sent:
                return
            value = form_reply(decision, self.reply.value)
            if value is None:
                self.status.value = "<em>Type a reply first (or use Approve / Reject).</em>"
                return
            self.sent = True
            for control in self.controls:
                control.disabled = True
        self.submitted = value
        self.status.value = f"<em>Sent: {html.escape(str(value))} — resuming…</em>"
        try:
            self._on_reply(value, self.question_id)
        except Superseded as superseded:  # another path answered this question first: say what happened
            self.settle(str(superseded))
        except Exception as exc:  # errors in click handlers never reach the cell: show them here
            self.status.value = f"<strong>Could not resume:</strong> {html.escape(str(exc))}"
        else:
            self.settled = True
            self.status.value = f"<em>Sent: {html.escape(str(value))}.</em>"

    @property
    def question_id(self) -> str | None:
        return self.pending.get("question_id")

    def settle(self, what_happened: str) -> None:
        """This form's question is answered, or no longer asked: disable it for good and say what happened."""
        with self._lock:
            self.sent = True
            self.settled = True
            for control in self.controls:
                control.disabled = True
        self.status.value = f"<em>{html.escape(what_happened)}</em>"


class TakeUpChoice:
    """The choice a notebook's untrusted run waits on: take the file's run up anyway, or (for a run
    cell) run it here afresh. Each button is ``(label, action)``; the first click disables them all."""

    def __init__(self, banner: dict[str, str], choices: list[tuple[str, Callable[[], None]]]) -> None:
        self._lock = threading.Lock()
        self.chosen: str | None = None
        self.header = widgets.HTML(banner["text/html"])
        self.buttons = [
            widgets.Button(description=label, button_style="warning", layout=widgets.Layout(width="auto"))
            for label, _ in choices
        ]
        self.status = widgets.HTML("")
        for button, (label, action) in zip(self.buttons, choices, strict=True):
            button.on_click(lambda _, label=label, action=action: self._choose(label, action))
        self.widget = widgets.VBox([self.header, widgets.HBox(self.buttons), self.status])

    def _choose(self, label: str, action: Callable[[], None]) -> None:
        with self._lock:
            if self.chosen is not None:
                return
            self.chosen = label
            for button in self.buttons:
                button.disabled = True
        self.status.value = f"<em>{html.escape(label)}…</em>"
        try:
            action()
        except Exception as exc:  # errors in click handlers never reach the cell: show them here
            self.status.value = f"<strong>Could not go on:</strong> {html.escape(str(exc))}"
