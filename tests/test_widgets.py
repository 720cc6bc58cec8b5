"""The approval form: real ipywidgets objects driven through the magics in a real IPython shell.

A run cell shows the run and its gate form and returns; clicking the form (here
``button.click()``, which runs the same handlers a browser click does) journals
the reply and resumes the run in the same output.
"""

from __future__ import annotations

import html
import json
import sqlite3
import subprocess
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import ipywidgets as widgets
import pytest
import yaml
from IPython.core.interactiveshell import InteractiveShell

import mkl_notebook
from mkl_notebook.app.handle import Run
from mkl_notebook.app.workspace import Workspace
from mkl_notebook.checkpoints.envelope import verify
from mkl_notebook.notebook.display import RunView
from mkl_notebook.notebook.forms import QuestionForm
from mkl_notebook.notebook.session import current_notebook

from support import (
    REFUND,
    REFUND_ASK,
    REFUND_RESULT,
    REFUND_SCRIPT,
    RUN_MIME,
    WIDGET_MIME,
    env_without_models,
    record_presented,
)

MARKUP_ASK = 'Send the <b>refund</b> & close "the ticket"?'

TWO_GATES = """\
machine: twogates
entry: draft
budget: 10
states:
  draft:
    structure: A draft.
    prompt: "write draft"
    output: draft
    gates:
      - { when: the draft needs approval, escalate: true, to: review,
          ask: "First: is the draft <b>fine</b>?", reply_to: first.answer }
      - { when: otherwise, then: ok, to: review }
  review:
    structure: A review.
    prompt: "review {{draft}}; first said {{first.answer}}"
    output: review
    gates:
      - { when: the review needs sign-off, escalate: true, to: final,
          ask: "Second: sign off the review?", reply_to: second.answer }
      - { when: otherwise, then: ok, to: final }
  final:
    structure: The final text.
    prompt: "final after {{second.answer}}"
    output: final
    gates:
      - { when: otherwise, then: ok, to: END }
"""
TWO_GATES_SCRIPT = {"llm": {"produce": {"write draft": "D", "review": "R", "final after": "F"}, "judge": [0]}}


@dataclass
class Recorder:
    published: list[tuple[dict[str, Any], str | None]] = field(default_factory=list)

    def publish(self, data: dict[str, Any], metadata: Any = None, *args: Any, **kwargs: Any) -> None:
        transient = kwargs.get("transient") or {}
        self.published.append((dict(data), transient.get("display_id")))

    def latest(self, display_id: str) -> dict[str, Any]:
        found = [data for data, shown_id in self.published if shown_id == display_id]
        assert found, f"nothing was published for display {display_id}"
        return found[-1]


@dataclass
class Notebook:
    shell: InteractiveShell
    out: Recorder
    views: list[RunView]
    tmp: Path

    def run(self, source: str) -> Any:
        result = self.shell.run_cell(source)
        assert result.error_in_exec is None and result.error_before_exec is None, (source, result.error_in_exec)
        return result

    def view(self) -> RunView:
        assert self.views, "no run was presented"
        return self.views[-1]

    def form(self) -> QuestionForm:
        form = self.view().current_form
        assert isinstance(form, QuestionForm), form
        return form

    def replies(self) -> list[dict[str, Any]]:
        with sqlite3.connect(self.tmp / ".mkl" / "runs.sqlite") as db:
            bodies = [json.loads(body) for (body,) in db.execute("SELECT body FROM records ORDER BY run_id, seq")]
        return [body for body in bodies if body.get("t") == "reply"]


@pytest.fixture
def nb(shell: InteractiveShell, load_mkl: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Notebook:
    recorder = Recorder()
    magics = load_mkl(recorder.publish)
    return Notebook(shell, recorder, record_presented(magics, monkeypatch), tmp_path)


def _script(tmp: Path, name: str, data: dict[str, Any]) -> Path:
    path = tmp / name
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


def _start_refund(nb: Notebook, source: str = REFUND) -> Run:
    nb.run("%%mkl\n" + source)
    nb.run(f"%mkl run refund --script {REFUND_SCRIPT} --set ticket=broken")
    run = mkl_notebook.get_run("refund")
    assert (run.status, run.error) == ("suspended", "escalated")
    return run


# -- the run cell returns; the form is shown ------------------------------------------------------


def test_the_run_cell_returns_with_the_run_waiting_and_its_form_shown(nb: Notebook) -> None:
    result = nb.shell.run_cell(f"%%mkl run --script {REFUND_SCRIPT}\n{REFUND}")
    assert result.success
    run = mkl_notebook.get_run("refund")
    assert run.status == "suspended"  # the cell returned while the run waits: nothing blocked on a click
    assert nb.replies() == []
    view = nb.view()
    assert view.top is not None and view.handle is not None
    first_shown = list(dict.fromkeys(shown_id for _, shown_id in nb.out.published if shown_id))
    # the question's place comes first, the form's right below it, above the run's view
    assert first_shown[:3] == [view.top.display_id, view.form_out.display_id, view.handle.display_id]
    top = nb.out.latest(view.top.display_id)
    assert WIDGET_MIME not in top  # printed, for every reader: HTML exports, Git hosts, no kernel
    assert REFUND_ASK in top["text/plain"] and "mkl resume" in top["text/plain"]
    assert REFUND_ASK in top["text/html"] and "mkl resume" in top["text/html"]
    below = nb.out.latest(view.form_out.display_id)
    assert below[WIDGET_MIME]["model_id"] == view.box.model_id  # the form stands there
    assert nb.form().widget in view.box.children
    assert below["text/plain"] == ""  # no second copy of the question where widgets do not draw
    assert REFUND_ASK not in nb.out.latest(view.handle.display_id)["text/plain"]  # the question is printed once
    form = nb.form()
    assert REFUND_ASK in form.question_html and form.header is None  # printed above, not twice
    assert "approval" in form.question_html
    assert [button.description for button in (form.approve, form.reject, form.send)] == [
        "Approve",
        "Reject",
        "Send reply",
    ]
    assert not any(control.disabled for control in form.controls)
    assert isinstance(form.reply, widgets.Textarea)


def test_the_header_shows_the_authored_ask_literally_and_escaped(nb: Notebook) -> None:
    source = REFUND.replace('"The draft promises a refund. Approve sending it?"', f"'{MARKUP_ASK}'")
    run = _start_refund(nb, source)
    assert run.pending is not None and run.pending["ask"] == MARKUP_ASK
    header = nb.form().question_html
    assert html.escape(MARKUP_ASK) in header
    assert "<b>" not in header
    page = nb.out.latest(nb.view().top.display_id)  # the form's stand-in for readers without a kernel
    assert html.escape(MARKUP_ASK) in page["text/html"] or html.escape(MARKUP_ASK, quote=False) in page["text/html"]
    assert "<b>" not in page["text/html"]
    assert MARKUP_ASK in page["text/plain"]


# -- answering -------------------------------------------------------------------------------------


def test_approve_resumes_and_finishes_the_run_in_the_same_output(nb: Notebook) -> None:
    _start_refund(nb)
    view, form = nb.view(), nb.form()
    display_id = view.handle.display_id
    before = verify(nb.out.latest(display_id)[RUN_MIME])[0]
    assert before["status"] == "suspended"
    form.approve.click()
    run = mkl_notebook.get_run("refund")
    assert (run.status, run.result) == ("done", REFUND_RESULT)
    assert run.run_result.context["approval"] == "approve"
    latest = nb.out.latest(display_id)
    header, _ = verify(latest[RUN_MIME])
    assert header["status"] == "done"
    assert REFUND_RESULT in latest["text/plain"]
    assert [reply["value"] for reply in nb.replies()] == ["approve"]
    assert "Sent: approve" in form.status.value
    assert all(control.disabled for control in form.controls)


def test_a_double_click_journals_one_reply_and_the_form_says_only_what_it_sent(nb: Notebook) -> None:
    _start_refund(nb)
    form = nb.form()
    form.approve.click()
    form.approve.click()
    form.reject.click()
    assert len(nb.replies()) == 1
    assert mkl_notebook.get_run("refund").status == "done"
    # The later clicks never reached the run: had they, it would refuse them and the form would say what became
    # of its question instead of what it sent.
    assert form.status.value == "<em>Sent: approve.</em>"


def _watch_submits(monkeypatch: pytest.MonkeyPatch, during_first: Any) -> list[Any]:
    """Record every reply the form hands to the one road a reply takes (``Workspace.submit``); run
    ``during_first()`` inside the first one.

    A click that arrives after the first reply has resumed the run is refused by the run itself
    ("not waiting"), so only a click that arrives WHILE the first reply is being processed shows
    whether the form's own once-only guard holds.
    """
    submitted: list[Any] = []
    submit = Workspace.submit

    def watching_submit(self: Workspace, handle: Run, reply: Any, *args: Any, **kwargs: Any) -> Run:
        submitted.append(reply)
        if len(submitted) == 1:
            during_first()
        return submit(self, handle, reply, *args, **kwargs)

    monkeypatch.setattr(Workspace, "submit", watching_submit)
    return submitted


def test_a_second_click_while_the_first_reply_is_being_processed_is_ignored(
    nb: Notebook, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Clicks delivered re-entrantly, from inside the first click's handler, before its reply is journaled."""
    _start_refund(nb)
    form = nb.form()

    def click_again() -> None:
        form.approve.click()
        form.reject.click()
        form.reply.value = "changed my mind"
        form.send.click()

    submitted = _watch_submits(monkeypatch, click_again)
    form.approve.click()
    assert submitted == ["approve"]  # the form handed on exactly one reply: the first click's
    assert [reply["value"] for reply in nb.replies()] == ["approve"]
    run = mkl_notebook.get_run("refund")
    assert (run.status, run.result) == ("done", REFUND_RESULT)
    assert form.status.value == "<em>Sent: approve.</em>"
    assert all(control.disabled for control in form.controls)


def test_a_click_from_another_thread_while_the_first_reply_is_being_processed_is_ignored(
    nb: Notebook, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A second front-end click message, handled on another thread while the first reply is in flight."""
    _start_refund(nb)
    form = nb.form()
    second_click_handled = threading.Event()
    errors: list[BaseException] = []

    def deliver_click() -> None:
        try:
            form.reject._handle_button_msg(None, {"event": "click"}, [])
        except BaseException as exc:  # surfaced by the assertions below, not lost in the thread
            errors.append(exc)
        finally:
            second_click_handled.set()

    def click_from_another_thread() -> None:
        thread = threading.Thread(target=deliver_click, name="second-click")
        thread.start()
        # the first reply waits here, unjournaled, until the second click has been fully handled
        assert second_click_handled.wait(timeout=30), "the second click was never handled"
        thread.join(timeout=30)

    submitted = _watch_submits(monkeypatch, click_from_another_thread)
    form.approve._handle_button_msg(None, {"event": "click"}, [])
    assert second_click_handled.is_set() and errors == []
    assert submitted == ["approve"]
    assert [reply["value"] for reply in nb.replies()] == ["approve"]
    run = mkl_notebook.get_run("refund")
    assert (run.status, run.result) == ("done", REFUND_RESULT)
    assert form.status.value == "<em>Sent: approve.</em>"


def test_buttons_are_disabled_as_soon_as_a_reply_is_submitted(nb: Notebook, monkeypatch: pytest.MonkeyPatch) -> None:
    _start_refund(nb)
    form = nb.form()
    seen: list[list[bool]] = []
    submit = Workspace.submit

    def watching_submit(self: Workspace, handle: Run, reply: Any, *args: Any, **kwargs: Any) -> Run:
        seen.append([control.disabled for control in form.controls])
        return submit(self, handle, reply, *args, **kwargs)

    monkeypatch.setattr(Workspace, "submit", watching_submit)
    form.reply.value = "fine by me"
    form.reject.click()
    assert seen == [[True, True, True, True]]
    assert [(reply["value"], reply.get("note")) for reply in nb.replies()] == [("reject", "fine by me")]


def test_an_empty_text_reply_is_refused_in_the_form(nb: Notebook) -> None:
    _start_refund(nb)
    form = nb.form()
    form.reply.value = "   "
    form.send.click()
    assert "type a reply" in form.status.value.lower()
    assert nb.replies() == []
    assert not any(control.disabled for control in form.controls)
    assert mkl_notebook.get_run("refund").status == "suspended"
    form.reply.value = "send it, with an apology"
    form.send.click()
    assert [reply["value"] for reply in nb.replies()] == ["send it, with an apology"]
    assert mkl_notebook.get_run("refund").status == "done"


def test_a_second_gate_shows_a_second_form_in_the_same_box(nb: Notebook) -> None:
    script = _script(nb.tmp, "two.yaml", TWO_GATES_SCRIPT)
    nb.run(f"%%mkl run --script {script}\n{TWO_GATES}")
    run = mkl_notebook.get_run("twogates")
    assert (run.status, run.at) == ("suspended", "review")
    view = nb.view()
    assert view.top is not None
    first = nb.form()
    first_box_layout = view.box.layout
    assert html.escape("First: is the draft <b>fine</b>?") in first.question_html
    first.approve.click()
    run = mkl_notebook.get_run("twogates")
    assert (run.status, run.at, run.pending["ask"] if run.pending else None) == (
        "suspended",
        "final",
        "Second: sign off the review?",
    )
    second = nb.form()
    assert second is not first
    below = nb.out.latest(view.form_out.display_id)  # the same widget, now holding the new form
    assert below[WIDGET_MIME]["model_id"] == view.box.model_id and second.widget in view.box.children
    assert first.widget not in view.box.children
    assert "Second: sign off the review?" in below["text/plain"] and "mkl resume" in below["text/plain"]
    # A page that follows only widgets (reloaded, another person's) reads the new question and the commands that
    # answer it in the form's header, as the first question was printed above the first form.
    assert second.header is not None and second.header in second.widget.children
    assert "Second: sign off the review?" in second.header.value and "mkl resume" in second.header.value
    assert [child for child in view.box.children if "mkl resume" in getattr(child, "value", "")] == []  # once
    assert view.box.children[-1] is second.widget
    assert "Answered 'approve' (by " in nb.out.latest(view.top.display_id)["text/plain"]  # where it was asked
    assert not any(control.disabled for control in second.controls)
    assert all(control.disabled for control in first.controls)
    # The view's forms share their layouts and styles, made once for the view (each new model is a message to
    # every page, and a click late in a long run would make and close a form's worth of them).
    first_parts = (*first.controls, first.buttons)
    second_parts = (*second.controls, second.header, second.buttons)
    assert len({control.layout.model_id for control in second_parts}) < len(second.controls) + 2
    assert {part.layout.model_id for part in second_parts} <= {part.layout.model_id for part in first_parts}
    # The first form left the page: its widgets are closed, in the kernel and in every page (each page's widget
    # manager kept a form's worth of models per answer, and a long run's clicks grew slower); the second's are
    # live, with the layouts they share with the first, and the box holding them keeps its own.
    assert all(part.comm is None for part in (*first_parts, first.status, first.widget))
    assert all(part.comm is not None and part.layout.comm is not None for part in (*second_parts, second.widget))
    assert view.box.layout is first_box_layout and first_box_layout.comm is not None
    assert {shown_id for data, shown_id in nb.out.published if WIDGET_MIME in data} == {view.form_out.display_id}
    second.reply.value = "ok"
    second.send.click()
    run = mkl_notebook.get_run("twogates")
    assert (run.status, run.result) == ("done", "F")
    assert run.run_result.context["first"] == {"answer": "approve"}
    assert run.run_result.context["second"] == {"answer": "ok"}
    assert [reply["value"] for reply in nb.replies()] == ["approve", "ok"]
    header, _ = verify(nb.out.latest(view.handle.display_id)[RUN_MIME])
    assert header["status"] == "done"


def test_a_form_of_a_run_answered_elsewhere_says_so_and_journals_nothing(nb: Notebook) -> None:
    _start_refund(nb)
    form = nb.form()
    question = mkl_notebook.get_run("refund").question_id
    nb.run(f"%mkl resume refund --question {question} --reply approve")  # answered from another cell first
    assert len(nb.replies()) == 1
    assert all(control.disabled for control in form.controls)  # this form caught up at once, in place
    assert "Answered &#x27;approve&#x27; (by " in form.status.value and "via notebook · key " in form.status.value
    form.approve.click()  # the stale form must not add a second reply, nor raise into the kernel
    assert len(nb.replies()) == 1
    assert "Answered &#x27;approve&#x27;" in form.status.value
    assert mkl_notebook.get_run("refund").status == "done"


def test_a_stale_form_never_answers_the_next_question(nb: Notebook) -> None:
    """The first gate's form, still on screen after its question was answered elsewhere, must not answer
    the second gate's question (the run moved on: its click is refused and journals nothing)."""
    script = _script(nb.tmp, "two.yaml", TWO_GATES_SCRIPT)
    nb.run(f"%%mkl run --script {script}\n{TWO_GATES}")
    stale = nb.form()
    first = mkl_notebook.get_run("twogates").question_id
    assert stale.pending["question_id"] == first
    nb.run(f"%mkl resume twogates --question {first} --reply approve")  # another cell answers the first question
    run = mkl_notebook.get_run("twogates")
    assert run.pending is not None and run.pending["ask"] == "Second: sign off the review?"
    assert all(control.disabled for control in stale.controls)
    assert "Answered &#x27;approve&#x27;" in stale.status.value
    stale.approve.click()
    assert [reply["value"] for reply in nb.replies()] == ["approve"]  # the second question is still unanswered
    run = mkl_notebook.get_run("twogates")
    assert (run.status, run.at) == ("suspended", "final")
    assert [reply["via"] for reply in nb.replies()] == ["notebook"]


def test_a_form_answered_by_another_process_catches_up_on_its_next_click(nb: Notebook) -> None:
    """A CLI in another process answers the first question; this kernel learns of it at the click, which
    journals nothing: the form says who answered, and the run's view moves on to the next question."""
    script = _script(nb.tmp, "two.yaml", TWO_GATES_SCRIPT)
    nb.run(f"%%mkl run --script {script}\n{TWO_GATES}")
    stale = nb.form()
    first = stale.question_id
    completed = subprocess.run(
        [
            sys.executable,
            "-m",
            "mkl_notebook.cli",
            "resume",
            "--id",
            "twogates",
            "--question",
            str(first),
            "--reply",
            "approve",
            "--as",
            "bob",
            "--script",
            str(script),
            "--quiet",
        ],
        cwd=nb.tmp,
        capture_output=True,
        text=True,
        env=env_without_models(),
        check=False,
    )
    assert completed.returncode == 3, completed.stderr
    assert not stale.approve.disabled  # nothing told this kernel yet
    stale.reject.click()
    assert [(reply["value"], reply["claimed"], reply["via"]) for reply in nb.replies()] == [("approve", "bob", "cli")]
    assert "claims bob) · " in stale.status.value and "via cli · key " in stale.status.value
    assert all(control.disabled for control in stale.controls)
    assert "Second: sign off the review?" in nb.form().question_html  # the view shows what is asked now


# -- who clicked, and how that is known ------------------------------------------------------------


def test_a_click_in_a_kernel_under_jupyterhub_records_the_hub_user_as_established(
    nb: Notebook, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("JUPYTERHUB_USER", "alice")  # the Hub sets it for alice's own server
    nb.run("%mkl config user=mallory")  # a name typed in the notebook: only claimed, beside alice
    _start_refund(nb)
    nb.form().approve.click()
    [reply] = nb.replies()
    assert (reply["by"], reply["established"], reply["claimed"], reply["via"]) == (
        "alice",
        "jupyterhub",
        "mallory",
        "form",
    )
    shown = nb.out.latest(nb.view().handle.display_id)["text/plain"]
    assert "by alice (JupyterHub; claims mallory) · " in shown


class _Kernel:
    """Stands for ipykernel's kernel while a click from one page is handled: its parent message's session."""

    def __init__(self, session: str) -> None:
        self.session = session

    def get_parent(self) -> dict[str, Any]:
        return {"header": {"session": self.session, "msg_type": "comm_msg"}}


def test_a_click_from_a_page_that_named_the_servers_user_records_that_user(
    nb: Notebook, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The extension's hello names the server's user for its page (its messages' session); a click from that
    page records that user as claimed (any client of the kernel could send such a hello) beside what the kernel
    can check itself (the Hub's user of its server, here), a click from a page that said none the latter alone."""
    monkeypatch.setenv("JUPYTERHUB_USER", "hub-owner")
    link = current_notebook().link
    hello = {"op": "hello", "runs": {}, "user": "carol"}
    link._received({"header": {"session": "page-of-carol"}, "content": {"data": hello}})
    _start_refund(nb)
    monkeypatch.setattr(nb.shell, "kernel", _Kernel("page-of-carol"), raising=False)
    nb.form().approve.click()
    [reply] = nb.replies()
    assert (reply["by"], reply["established"], reply.get("claimed")) == ("hub-owner", "jupyterhub", "carol")
    with sqlite3.connect(nb.tmp / ".mkl" / "runs.sqlite") as db:
        bodies = [json.loads(body) for (body,) in db.execute("SELECT body FROM records ORDER BY seq")]
    # under the Hub the kernel signs as the Hub's user of its server: the page's word is only a claim
    assert [body["by"] for body in bodies if body.get("t") == "sign"][-1] == "hub-owner"
    assert "by hub-owner (JupyterHub; claims carol) · " in nb.out.latest(nb.view().handle.display_id)["text/plain"]


def test_a_click_from_a_page_whose_server_knows_only_a_shared_token_is_not_answered_as_its_anonymous_user(
    nb: Notebook, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A server started with a token (no login) makes up a user for the page ("Anonymous Io", a random id): it
    names no person, so the click is answered as JupyterHub's user (or the OS account), not as that id."""
    monkeypatch.setenv("JUPYTERHUB_USER", "hub-owner")
    link = current_notebook().link
    made_up = {"user": "9f122977a70f4e0085e6b342aecd442e", "user_shown": "Anonymous Io"}
    link._received({"header": {"session": "token-page"}, "content": {"data": {"op": "hello", "runs": {}, **made_up}}})
    _start_refund(nb)
    monkeypatch.setattr(nb.shell, "kernel", _Kernel("token-page"), raising=False)
    nb.form().approve.click()
    [reply] = nb.replies()
    assert (reply["by"], reply["established"]) == ("hub-owner", "jupyterhub")


# -- who may answer ---------------------------------------------------------------------------------------------


def test_a_question_only_alice_may_answer_is_read_only_for_carol_and_her_click_records_nothing(
    nb: Notebook, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Carol's server (the Hub's user, established) shows the question a run started with ``--approvers alice``
    asks, says who may answer it, and its controls send nothing; a page's word that she is alice changes nothing."""
    monkeypatch.setenv("JUPYTERHUB_USER", "carol")
    nb.run("%mkl config user=alice")  # typed in the notebook: a claim, never who may answer
    nb.run("%%mkl\n" + REFUND)
    nb.run(f"%mkl run refund --script {REFUND_SCRIPT} --set ticket=broken --approvers alice")
    form = nb.form()
    assert form.approve.disabled and form.reject.disabled and form.send.disabled
    said = html.unescape(form.status.value)
    assert "may be answered only by alice" in said and "you are carol (jupyterhub)" in said, said
    assert "Only alice may answer it." in html.unescape(form.question_html)
    form.approve.click()
    assert nb.replies() == []
    assert mkl_notebook.get_run("refund").status == "suspended"


def test_a_question_only_alice_may_answer_takes_her_click_and_keeps_the_rule_it_was_taken_under(
    nb: Notebook, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("JUPYTERHUB_USER", "alice")
    nb.run("%%mkl\n" + REFUND)
    nb.run(f"%mkl run refund --script {REFUND_SCRIPT} --set ticket=broken --approvers alice,bob")
    form = nb.form()
    assert not form.approve.disabled
    form.approve.click()
    [reply] = nb.replies()
    assert (reply["by"], reply["established"], reply["approvers"]) == ("alice", "jupyterhub", ["alice", "bob"])
    assert mkl_notebook.get_run("refund").status == "done"


def test_under_jupyterhub_a_run_is_signed_as_the_hub_user_whatever_a_page_says(
    nb: Notebook, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("JUPYTERHUB_USER", "alice")
    hello = {"op": "hello", "runs": {}, "user": "carol"}  # a page's word (a visitor under the Hub's sharing)
    current_notebook().link._received({"header": {"session": "page-of-carol"}, "content": {"data": hello}})
    _start_refund(nb)
    with sqlite3.connect(nb.tmp / ".mkl" / "runs.sqlite") as db:
        bodies = [json.loads(body) for (body,) in db.execute("SELECT body FROM records ORDER BY seq")]
    assert [body["by"] for body in bodies if body.get("t") == "sign"] == ["alice"]
