"""The form a person answers a run's question in (ipywidgets): one :class:`QuestionControl` answers a question
for a single run's :class:`QuestionForm` and for each row of a review queue alike, and the choice an untrusted
run from a file waits on.

A control calls the answer use case (:meth:`~mkl_notebook.app.handle.Run.answer`) itself; what shows the run
(its view, a queue) learns that it moved only as the notebook's follower, like a move by any other path.

A form shows the machine author's ``ask`` as literal text (a model's own question is labelled as model output),
what the question is about, Approve / Reject buttons and a reply box (text typed in it with Approve / Reject
is the decision's note; with *Send reply* it is the reply). The first submission disables the form
at once, so a double click is one reply; an empty reply where text is required is refused in the form and
journals nothing. A reply names the question the form shows, so it can only ever answer that one: one that
comes too late says what became of the question instead.

Every widget here has a model id derived from where it stands and what it shows (:func:`made`), not a random
one: executing an unchanged notebook again saves the same ids (in the outputs, and in the widget state nbclient
keeps in the file's metadata), so the file is byte for byte as it was.

A saved notebook carries the state of every widget model its client saw (nbclient always, JupyterLab with
ipywidgets' *save widget state* on), so the forms keep their models few: the layouts and styles, which were two
thirds of a form's models, are shared by every widget that asks for the same ones (:func:`shared`), and the
root of each form carries the DOM class :data:`FORM_CLASS`, by which the project's JupyterLab extension leaves
a form's models out of the state it saves (the question and its commands are printed beside every form).
"""

from __future__ import annotations

import hashlib
import html
import json
import threading
import uuid
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

import ipywidgets as widgets
import traitlets

from ..app.errors import USER_ERRORS, Superseded
from ..app.handle import Run
from ..app.replies import APPROVE, REJECT, Decision, FormReply, answerer, clicked_by, form_reply, not_an_approver
from ..app.terms import Observer
from ..render.questions import Asked, question_html
from .metadata_link import clicking_user

Pending = Mapping[str, Any]
W = TypeVar("W", bound=widgets.Widget)

_made: dict[str, widgets.Widget] = {}  # model id -> the live widget made with it here
_shared: dict[str, widgets.Widget] = {}  # model id -> a live layout or style every widget asking for it shares
SHARED = (widgets.Layout, widgets.widget_style.Style)  # the kinds of widget shared rather than made per widget
FORM_CLASS = "mkl-form"  # the DOM class of a form's root: its models stay out of a saved notebook's widget state


def widget_id(key: str) -> str:
    """The model id of the widget made for ``key`` (where it stands and what it shows), shaped like the
    random ones ipywidgets makes (32 hex digits)."""
    return hashlib.sha256(f"mkl-widget\x00{key}".encode()).hexdigest()[:32]


def unplaced() -> str:
    """A key for widgets shown outside any known place (a form built by hand): unique, as ipywidgets' own ids."""
    return f"unplaced/{uuid.uuid4().hex}"


def shared(cls: type[W], scope: str, **traits: Any) -> W:
    """The one live ``cls`` (a layout or a style) with ``traits`` in ``scope`` (the place of the widgets made
    together: one run's view and its forms, one row), shared by the widgets made there with them; its model id
    derives from both. Never change it in place: give the widget another (``widget.layout = shared(...)``).

    Not shared wider: every view of a widget listens to its layout and style models, and a page that keeps a
    view it no longer shows (as ipywidgets did for an output redrawn over a widget, see ``Placed.update``)
    leaves a listener on them each time; one model shared by every form of a kernel gathered listeners that
    each view's removal scanned (a click at gate 20 spent 40 ms in that scan alone)."""
    kind = f"{cls.__module__}.{cls.__qualname__}"
    model_id = widget_id(f"shared/{scope}/{kind}/{json.dumps(traits, sort_keys=True)}")
    live = _shared.get(model_id)
    if live is None or live.comm is None:  # not made yet in this kernel, or closed since (Widget.close_all)
        live = _shared[model_id] = cls(model_id=model_id, **traits)
    return live


def close_widgets(gone: list[widgets.Widget]) -> None:
    """Close widgets :func:`made` here that no page will show again, and the layouts and styles :func:`shared`
    that no live widget made here uses any more (a form's, when its scope was its own; a run view's stay while
    the view's next form uses them)."""
    parts: dict[str, widgets.Widget] = {}
    for widget in gone:
        if widget.comm is None:
            continue  # closed already
        for name in ("layout", "style"):
            part = getattr(widget, name, None)
            if not isinstance(part, widgets.Widget) or part.comm is None:
                continue
            part_id = str(part.model_id)
            if _shared.get(part_id) is part:
                parts[part_id] = part
        model_id: str = widget.model_id
        if _made.get(model_id) is widget:
            del _made[model_id]
        widget.close()
    if not parts:
        return
    used = {
        getattr(widget, name).model_id
        for widget in _made.values()
        if widget.comm is not None
        for name in ("layout", "style")
        if isinstance(getattr(widget, name, None), widgets.Widget)
    }
    for model_id in parts.keys() - used:
        _shared.pop(model_id).close()


def made(cls: type[W], key: str, scope: str | None = None, **traits: Any) -> W:
    """A ``cls`` widget whose model id derives from ``key``; its layout and style are :func:`shared` ones in
    ``scope`` (by default the place ``key`` is in), made from the traits given for them, as a dict.

    A live widget made earlier with the same id (the same cell executed again) is closed first, so that two
    live widgets never share an id in one kernel; the frontend drops the old model and takes the new one.
    """
    for name, trait in cls.class_traits().items():
        klass = getattr(trait, "klass", None)
        if not (
            isinstance(trait, traitlets.Instance) and isinstance(klass, type) and issubclass(klass, widgets.Widget)
        ):
            continue
        given = traits.get(name)
        if given is None or isinstance(given, dict):  # made here too, or its default gets a random id
            if issubclass(klass, SHARED):
                traits[name] = shared(klass, key.rpartition("/")[0] if scope is None else scope, **(given or {}))
            else:
                traits[name] = made(klass, f"{key}/{name}", scope, **(given or {}))
    model_id = widget_id(key)
    earlier = _made.pop(model_id, None)
    if earlier is not None:
        earlier.close()
    widget = cls(model_id=model_id, **traits)
    _made[model_id] = widget
    return widget


class QuestionControl:
    """The one road a reply to question ``question`` of run ``run`` takes from a page: checked (:meth:`take`),
    then journaled as the reply of ``cell``'s form through ``via`` (:meth:`give`), at most once unless refused.
    ``observer`` is told of the run's progress as it goes on."""

    def __init__(
        self,
        run: Run,
        question: str | None,
        *,
        model_asks: bool = False,
        via: str = "form",
        cell: str | None = None,
        observer: Observer | None = None,
        approvers: tuple[str, ...] = (),
    ) -> None:
        self.run = run
        self.question = question
        self.model_asks = model_asks  # a model's question takes a typed reply only
        self.via = via
        self.cell = cell
        self.observer = observer
        self.sent = False  # a reply is on its way, or was journaled
        self.settled = False  # answered or moved past, by this control or by any other path
        self._lock = threading.Lock()
        # Someone the run does not let answer sees the question, and controls that say so instead of sending.
        why = not_an_approver(approvers, answerer(None, via=via)) if approvers else None
        self.read_only = f"This question {why}." if why else None

    def take(self, decision: Decision | None, typed: str) -> FormReply | str:
        """The reply to send for ``decision`` (None: the ``typed`` text is the reply; else it is the note), from
        now on this control's one; or why none is sent (nothing is journaled then)."""
        with self._lock:
            if self.sent:
                return "A reply to this question was sent already."
            if self.read_only:
                return self.read_only
            try:
                given = form_reply(None if self.model_asks else decision, typed)
            except USER_ERRORS as exc:  # a note over the limit: refused here, nothing journaled
                return f"Not sent: {exc}"
            if given is None:
                return "Type a reply first (or use Approve / Reject)."
            self.sent = True
            return given

    def give(self, given: FormReply) -> tuple[bool, str]:
        """Journal ``given`` (from :meth:`take`) as the person's reply, and let the run go on; whether it was
        journaled, and what to say. A late reply says what became of the question; one refused (nothing
        journaled) may be sent again."""
        try:
            with clicked_by(clicking_user()):  # the server's user, as the page clicked on reports it
                self.run.answer(
                    given.value, self.question, via=self.via, note=given.note, form_of=self.cell, observer=self.observer
                )
        except Superseded as superseded:  # another path answered this question first: say what happened
            self.settled = True
            return False, str(superseded)
        except USER_ERRORS as exc:  # refused, and nothing was journaled: say why, and let the person try again
            with self._lock:
                self.sent = False
            return False, f"Not sent: {exc}"
        except Exception as exc:  # errors in click handlers never reach the cell: say them where it was clicked
            return False, f"Could not resume: {exc}"
        self.settled = True
        return True, f"Sent: {sent_text(given)}."

    def settle(self) -> None:
        """The question is answered, or no longer asked: nothing more is sent from here."""
        with self._lock:
            self.sent = True
            self.settled = True


class QuestionForm:
    """The form of the question run ``run`` waits on (``pending``), answered through its
    :class:`QuestionControl` (a reply of ``cell``'s form, its progress told to ``observer``).

    ``place`` names where the form stands (a cell and a run): its widgets' model ids derive from it and from
    the question, so a notebook executed again saves the same ids. Its header shows the question, or
    ``printed`` (the question printed with the commands that answer it) when given; with ``beside`` the
    question is printed in an output beside the form instead (readable where no widget draws), and the form
    has no header (a live notebook shows the question once; every model is a message to every page).
    """

    def __init__(
        self,
        run: Run,
        pending: Pending,
        *,
        cell: str | None = None,
        observer: Observer | None = None,
        place: str | None = None,
        beside: bool = False,
        scope: str | None = None,
        printed: str | None = None,
    ) -> None:
        self.run = run
        self.run_id = run.id
        self.cell = cell
        self.observer = observer
        self.place = place or unplaced()
        self.scope = scope or self.place  # where its layouts and styles are shared (a view's forms share them)
        self.status = made(widgets.HTML, f"{self.place}/status", self.scope, value="")
        self.question_html = self._ready(pending)
        self.header: widgets.HTML | None = None
        if printed is not None or not beside:
            shows = self.question_html if printed is None else printed
            self.header = made(widgets.HTML, f"{self.place}/header", self.scope, value=shows)
        self.buttons = made(widgets.HBox, f"{self.place}/buttons", self.scope, children=self._row_children())
        self.widget = made(
            widgets.VBox, f"{self.place}/form", self.scope, children=self._children(), _dom_classes=[FORM_CLASS]
        )

    def _ready(self, pending: Pending) -> str:
        """Make the controls for ``pending`` (none is sent yet); its header's HTML."""
        self.pending = pending
        self.submitted: Any = None
        self.control = QuestionControl(
            self.run,
            pending.get("question_id"),
            model_asks=pending.get("question") is not None,
            cell=self.cell,
            observer=self.observer,
            approvers=tuple(pending.get("approvers") or ()),
        )
        key = f"{self.place}/{pending.get('question_id') or pending.get('at')}"
        placeholder = "Reply, or a note for Approve / Reject (optional)"
        scope = self.scope  # the form's widgets share their layouts and styles (see shared)
        self.reply = made(widgets.Textarea, f"{key}/reply", scope, placeholder=placeholder, layout={"width": "100%"})
        self.approve = made(
            widgets.Button, f"{key}/approve", scope, description="Approve", button_style="success", icon="check"
        )
        self.reject = made(
            widgets.Button, f"{key}/reject", scope, description="Reject", button_style="danger", icon="times"
        )
        self.send = made(widgets.Button, f"{key}/send", scope, description="Send reply", icon="paper-plane")
        self.approve.on_click(lambda _: self.submit(APPROVE))
        self.reject.on_click(lambda _: self.submit(REJECT))
        self.send.on_click(lambda _: self.submit(None))
        if self.control.read_only:  # shown to someone the run does not let answer: read, not answered
            self._enable(False)
            self.status.value = _status(self.control.read_only)
        return self._header_html(pending)

    def _row_children(self) -> list[widgets.Widget]:
        """The buttons (a model's question takes a typed reply only)."""
        model_asks = self.pending.get("question") is not None
        return [self.send] if model_asks else [self.approve, self.reject, self.send]

    def _children(self) -> list[widgets.Widget]:
        return [*([self.header] if self.header is not None else []), self.reply, self.buttons, self.status]

    def _header_html(self, pending: Pending) -> str:
        return question_html(Asked.of(self.run_id, pending))

    @property
    def controls(self) -> list[widgets.Widget]:
        return [self.approve, self.reject, self.send, self.reply]

    @property
    def question_id(self) -> str | None:
        return self.pending.get("question_id")

    @property
    def sent(self) -> bool:
        """Whether a reply to this form's question is on its way or journaled."""
        return self.control.sent

    @property
    def settled(self) -> bool:
        """Whether this form's question is answered or no longer asked."""
        return self.control.settled

    def submit(self, decision: Decision | None) -> None:
        """Send the decision (None: the typed reply) as this form's one answer to its question."""
        given = self.control.take(decision, self.reply.value)
        if isinstance(given, str):
            if not self.control.sent:
                self.status.value = _status(given)
            return
        self._enable(False)
        self.submitted = given.value
        self.status.value = f"<em>Sent: {html.escape(sent_text(given))} — resuming…</em>"
        journaled, said = self.control.give(given)
        if not journaled and not self.control.sent:
            self._enable(True)  # refused, nothing journaled: the person may answer again
        self.status.value = _status(said)

    def _enable(self, enabled: bool) -> None:
        for control in self.controls:
            control.disabled = not enabled

    def settle(self, what_happened: str) -> None:
        """This form's question is answered, or no longer asked: disable it for good and say what happened."""
        self.control.settle()
        self._enable(False)
        self.status.value = f"<em>{html.escape(what_happened)}</em>"

    def close(self) -> None:
        """The form has left the page for good (a form of the next question stands in its place): its widgets
        close, in the kernel and in every page, so a run of many questions does not gather a form's worth of live
        widgets per answer (each page's widget manager kept every one, and a click late in a long run cost more)."""
        close_widgets(self.parts())

    def parts(self) -> list[widgets.Widget]:
        """The widgets of this form (what :meth:`close` closes)."""
        header = [self.header] if self.header is not None else []
        return [self.widget, *header, self.buttons, self.status, *self.controls]


def _status(said: str) -> str:
    """What a control said, as its form's status line: a refusal or a failure in bold, anything else as news."""
    head, colon, rest = said.partition(": ")
    if colon and head in ("Not sent", "Could not resume"):
        return f"<strong>{head}:</strong> {html.escape(rest)}"
    return f"<em>{html.escape(said)}</em>"


def sent_text(given: FormReply) -> str:
    """What a form says it sent: the reply, and the note beside it."""
    return f"{given.value}, with the note {given.note!r}" if given.note else given.value


class TakeUpChoice:
    """The choice a notebook's untrusted run waits on: trust its signer's key under a name the person types (the
    key's claimed name when it is free here), take the file's run up anyway, or (for a run cell) make a run of its
    own beside it. Each choice is ``(label, action)``, the action given the name typed; a click disables them all,
    until the action fails (a name someone has already), which says why and lets the person choose again."""

    def __init__(
        self,
        banner: dict[str, str],
        choices: list[tuple[str, Callable[[str], None]]],
        place: str | None = None,
        name: str | None = None,
    ) -> None:
        self._lock = threading.Lock()
        self.chosen: str | None = None
        key = place or unplaced()
        self.header = made(widgets.HTML, f"{key}/banner", value=banner["text/html"])
        self.name = None  # where the person types whose key it is, when a key can be trusted
        if name is not None:
            self.name = made(
                widgets.Text,
                f"{key}/name",
                value=name,
                description="Whose key:",
                placeholder="the name you know them by",
                layout={"width": "auto"},
            )
        self.buttons = [
            made(
                widgets.Button,
                f"{key}/choice/{label}",
                description=label,
                button_style="warning",
                layout={"width": "auto"},
            )
            for label, _ in choices
        ]
        self.status = made(widgets.HTML, f"{key}/choice-status", value="")
        for button, (label, action) in zip(self.buttons, choices, strict=True):
            button.on_click(lambda _, label=label, action=action: self._choose(label, action))
        row = made(widgets.HBox, f"{key}/choices", children=self.buttons)
        above = [self.header, *([self.name] if self.name is not None else []), row, self.status]
        self.widget = made(widgets.VBox, f"{key}/take-up", children=above, _dom_classes=[FORM_CLASS])

    def _choose(self, label: str, action: Callable[[str], None]) -> None:
        with self._lock:
            if self.chosen is not None:
                return
            self.chosen = label
            for button in self.buttons:
                button.disabled = True
        self.status.value = f"<em>{html.escape(label)}…</em>"
        try:
            action(self.name.value.strip() if self.name is not None else "")
        except Exception as exc:  # errors in click handlers never reach the cell: show them here
            self.status.value = f"<strong>Could not go on:</strong> {html.escape(str(exc))}"
            with self._lock:  # nothing was done: the person may choose again (another name, say)
                self.chosen = None
                for button in self.buttons:
                    button.disabled = False
