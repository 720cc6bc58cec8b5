"""The decision and the note are two things: Approve journals exactly ``approve``, and the text typed beside it
is the answer's note, which the machine reads at ``<reply_to>_note`` and every view shows with the answer.

The machine is the tutorial's refund machine (``notebooks/data/refund.mkl``): its ``confirm`` state withdraws
the reply unless ``refund_approval`` is exactly ``approve`` (``neq:refund_approval:approve``), so an approval
that went on as approved asks the next question ("Send this reply …"), and one read as anything else is
withdrawn.
"""

from __future__ import annotations

import html
import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest

import mkl_notebook
from mkl_notebook.durable import runs
from mkl_notebook.durable.stores import SQLiteStore
from mkl_notebook.engine.options import RunOptions
from mkl_notebook.engine.oracle import (
    AwaitingHuman,
    HumanReply,
    JudgeAnswer,
    JudgeRequest,
    Oracle,
    OracleRequest,
    ProduceAnswer,
    ProduceRequest,
    ReplyRequest,
)
from mkl_notebook.engine.runner import run_machine
from mkl_notebook.errors import UserError
from mkl_notebook.lang.loader import load
from mkl_notebook.notebook.display import RunView
from mkl_notebook.notebook.forms import QuestionForm

from support import ROOT, RUN_MIME, Cells, mkl_cli, record_presented

DATA = ROOT / "notebooks" / "data"
MACHINE = (DATA / "refund.mkl").read_text(encoding="utf-8")
SCRIPT = DATA / "refund.script.yaml"
NOTE = 'ok, but add an apology <b>&</b> "soon"'
SEND_ASK = "Send this reply to the customer now?"
SENT = "Sent to the customer."
WITHDRAWN = "Not sent: the reply was not approved; a colleague will look at the ticket."
LEGACY = Path(__file__).resolve().parent / "fixtures" / "legacy"


def _replies(store: Path, run_id: str = "refund") -> list[dict[str, Any]]:
    return [record for record in SQLiteStore(store).read(run_id) if record["t"] == "reply"]


def _views(ip: Cells, monkeypatch: pytest.MonkeyPatch) -> list[RunView]:
    return record_presented(ip.shell.magics_manager.registry["MklMagics"], monkeypatch)


def _form(views: list[RunView]) -> QuestionForm:
    form = views[-1].current_form
    assert isinstance(form, QuestionForm), form
    return form


def _start(ip: Cells) -> None:
    ip.define(MACHINE)
    ip.run(f"%mkl run refund --script {SCRIPT} --set ticket=broken")
    run = mkl_notebook.get_run("refund")
    assert (run.status, run.at) == ("suspended", "confirm")


def _view_of(ip: Cells) -> dict[str, Any]:
    """The run's view as the notebook shows it last (its text and HTML twins)."""
    return ip.out.last(RUN_MIME)


# -- the form, in a real IPython shell with real widgets -------------------------------------------------------


def test_approve_with_a_note_in_the_form_is_an_approval_and_the_machine_and_the_trace_have_the_note(
    ip: Cells, monkeypatch: pytest.MonkeyPatch
) -> None:
    views = _views(ip, monkeypatch)
    _start(ip)
    form = _form(views)
    form.reply.value = f"  {NOTE}\n"
    form.approve.click()

    run = mkl_notebook.get_run("refund")
    assert (run.status, run.at, run.pending and run.pending["ask"]) == ("suspended", "release", SEND_ASK)  # approved
    assert run.context["refund_approval"] == "approve"
    assert run.context["refund_approval_note"] == NOTE  # where docs/language.md says the machine reads it
    [reply] = _replies(ip.tmp / ".mkl" / "runs.sqlite")
    assert (reply["value"], reply["note"], reply["via"]) == ("approve", NOTE, "form")
    assert form.status.value == f"<em>Sent: {html.escape(f'approve, with the note {NOTE!r}')}.</em>"

    shown = _view_of(ip)
    said = f"answered approve → refund_approval with the note {NOTE!r} (by "
    assert said in shown["text/plain"]
    assert (
        f"<code>approve → refund_approval</code> <em>{html.escape(f'with the note {NOTE!r}')}</em>"
        in (shown["text/html"])
    )
    assert "<b>&</b>" not in shown["text/html"]  # a person's text is escaped like any other

    # The next question, approved with no note: no note for it in the context (absent, not empty), the first kept.
    _form(views).approve.click()
    run = mkl_notebook.get_run("refund")
    assert (run.status, run.result) == ("done", SENT)
    assert "send_approval_note" not in run.context and run.context["refund_approval_note"] == NOTE
    assert [reply.get("note") for reply in _replies(ip.tmp / ".mkl" / "runs.sqlite")] == [NOTE, None]

    ip.out.clear()
    ip.run("%mkl trace refund")
    [traced] = [p.data for p in ip.out.published if str(p.data.get("text/plain", "")).startswith("Trace")]
    assert said in traced["text/plain"] and "answered approve → send_approval (by " in traced["text/plain"]
    assert html.escape(f"with the note {NOTE!r}") in traced["text/html"]
    answered = [line for line in traced["text/plain"].splitlines() if "↳ answered" in line]
    assert len(answered) == 2 and all(" · via form · key " in line for line in answered)  # who signed each


def test_reject_with_a_note_in_the_form_is_a_rejection_and_keeps_the_note(
    ip: Cells, monkeypatch: pytest.MonkeyPatch
) -> None:
    views = _views(ip, monkeypatch)
    _start(ip)
    form = _form(views)
    form.reply.value = "no receipt attached"
    form.reject.click()
    run = mkl_notebook.get_run("refund")
    assert (run.status, run.result) == ("done", WITHDRAWN)
    assert (run.context["refund_approval"], run.context["refund_approval_note"]) == ("reject", "no receipt attached")
    [reply] = _replies(ip.tmp / ".mkl" / "runs.sqlite")
    assert (reply["value"], reply["note"]) == ("reject", "no receipt attached")
    assert "answered reject → refund_approval with the note 'no receipt attached'" in _view_of(ip)["text/plain"]


def test_text_sent_with_send_reply_stays_the_reply_and_has_no_note(ip: Cells, monkeypatch: pytest.MonkeyPatch) -> None:
    views = _views(ip, monkeypatch)
    _start(ip)
    form = _form(views)
    form.reply.value = "approve it, but add an apology"
    form.send.click()
    run = mkl_notebook.get_run("refund")
    assert (run.status, run.result) == ("done", WITHDRAWN)  # not exactly `approve`: the machine's safe way
    assert run.context["refund_approval"] == "approve it, but add an apology"
    assert "refund_approval_note" not in run.context
    [reply] = _replies(ip.tmp / ".mkl" / "runs.sqlite")
    assert reply["value"] == "approve it, but add an apology" and "note" not in reply


def test_a_note_over_the_limit_is_refused_in_the_form_and_nothing_is_journaled(
    ip: Cells, monkeypatch: pytest.MonkeyPatch
) -> None:
    views = _views(ip, monkeypatch)
    _start(ip)
    form = _form(views)
    form.reply.value = "x" * 4001
    form.approve.click()
    assert form.status.value == (
        "<strong>Not sent:</strong> the note is 4,001 characters long; a note may have at most 4,000"
    )
    assert _replies(ip.tmp / ".mkl" / "runs.sqlite") == []
    assert not any(control.disabled for control in form.controls)  # the person can shorten it and send again
    form.reply.value = "x" * 4000
    form.approve.click()
    assert [(r["value"], len(r["note"])) for r in _replies(ip.tmp / ".mkl" / "runs.sqlite")] == [("approve", 4000)]


# -- the API ---------------------------------------------------------------------------------------------------


def test_approve_with_a_note_through_the_api(ip: Cells) -> None:
    ip.define(MACHINE)
    ip.run("import mkl_notebook")
    ip.run(f"r = mkl_notebook.run('refund', script={str(SCRIPT)!r}, input={{'ticket': 'broken'}})")
    run = ip.shell.user_ns["r"]
    assert (run.status, run.at) == ("suspended", "confirm")
    run.submit("approve", note=NOTE)
    assert (run.status, run.at) == ("suspended", "release")  # went on as approved
    assert (run.context["refund_approval"], run.context["refund_approval_note"]) == ("approve", NOTE)
    assert [(a["value"], a.get("note"), a["via"]) for a in run.run_result.answers] == [("approve", NOTE, "api")]
    text = str(run._repr_mimebundle_()["text/plain"])
    assert f"answered approve → refund_approval with the note {NOTE!r} (by " in text
    with pytest.raises(UserError, match="a note may have at most 4,000"):
        run.submit("approve", note="x" * 4001)
    assert len(_replies(ip.tmp / ".mkl" / "runs.sqlite")) == 1


# -- the command line ------------------------------------------------------------------------------------------


def test_approve_with_a_note_on_the_command_line(tmp_path: Path) -> None:
    shutil.copy(DATA / "refund.mkl", tmp_path / "refund.mkl")
    flags = ("--id", "refund", "--script", str(SCRIPT))
    code, status, _, err = mkl_cli(tmp_path, "run", "refund.mkl", *flags, "--hitl", "--set", "ticket=broken")
    assert (status["status"], status["at"]) == ("suspended", "confirm"), err
    question = status["question_id"]

    too_long = ("--question", question, "--reply", "approve", "--note", "x" * 4001)
    code, _, _, err = mkl_cli(tmp_path, "resume", *flags, *too_long)
    assert code == 2 and err.strip() == "mkl: error: the note is 4,001 characters long; a note may have at most 4,000"
    code, _, _, err = mkl_cli(tmp_path, "resume", *flags, "--question", question, "--note", "a note alone")
    assert code == 2 and "a note goes beside a reply" in err and err.count("\n") == 1
    assert _replies(tmp_path / ".mkl" / "runs.sqlite") == []  # nothing journaled by either

    code, status, out, err = mkl_cli(
        tmp_path, "resume", *flags, "--question", question, "--reply", "approve", "--note", NOTE
    )
    assert status["status"] == "suspended" and status["at"] == "release", err  # went on as approved
    assert [(a["reply_to"], a["value"], a["note"], a["via"]) for a in status["answers"]] == [
        ("refund_approval", "approve", NOTE, "cli")
    ]
    assert f"answered approve → refund_approval with the note {NOTE!r} (by " in out

    code, status, out, err = mkl_cli(
        tmp_path, "resume", *flags, "--question", status["question_id"], "--set", "send_approval=approve",
        "--note", "ship it",
    )  # fmt: skip
    assert (code, status["status"], status["result"]) == (0, "done", SENT), err
    assert [a.get("note") for a in status["answers"]] == [NOTE, "ship it"]
    store = tmp_path / ".mkl" / "runs.sqlite"
    assert [(r["value"], r["note"]) for r in _replies(store)] == [("approve", NOTE), ("approve", "ship it")]
    context = runs.read_run("refund", SQLiteStore(store).read("refund")).result.context
    assert (context["refund_approval_note"], context["send_approval_note"]) == (NOTE, "ship it")

    code, listing, out, err = mkl_cli(tmp_path, "runs")
    assert code == 0, err
    assert [a.get("note") for a in listing["runs"][0]["answers"]] == [NOTE, "ship it"]
    assert f"    answered 'approve' with the note {NOTE!r} (by " in out


def test_a_note_with_control_characters_is_shown_escaped_on_a_terminal(tmp_path: Path) -> None:
    shutil.copy(DATA / "refund.mkl", tmp_path / "refund.mkl")
    flags = ("--id", "refund", "--script", str(SCRIPT))
    _, status, _, _ = mkl_cli(tmp_path, "run", "refund.mkl", *flags, "--hitl", "--set", "ticket=broken")
    hostile = "fine\x1b[2J\rANSWERED reject"
    _, status, out, err = mkl_cli(
        tmp_path, "resume", *flags, "--question", status["question_id"], "--reply", "approve", "--note", hostile
    )
    assert status["answers"][0]["note"] == hostile, err  # journaled as given
    _, _, listed, _ = mkl_cli(tmp_path, "runs")
    for shown in (out, listed):
        assert "\x1b" not in shown and "\r" not in shown
        assert "with the note 'fine\\x1b[2J ANSWERED reject'" in shown  # ESC written out, CR a blank


# -- journals written before notes ------------------------------------------------------------------------------


class NoCalls(Oracle):
    """An oracle that must never be asked: everything has to come from the journal."""

    waits = False

    def ask(self, request: OracleRequest) -> Any:
        if isinstance(request, ReplyRequest):
            raise AwaitingHuman(request.position)
        raise AssertionError(f"the journal should have answered {request.position}")


def test_a_journal_written_before_notes_replays_unchanged_with_no_calls(tmp_path: Path) -> None:
    shutil.copy(LEGACY / "runs.sqlite", tmp_path / "runs.sqlite")
    expected = json.loads((LEGACY / "expected.json").read_text(encoding="utf-8"))
    store = SQLiteStore(tmp_path / "runs.sqlite")
    for run_id in ("refund-approved", "asked"):
        outcome = runs.replay(store, run_id, NoCalls())
        assert outcome.calls["made"] == 0
        assert len(outcome.records) == expected[run_id]["records"]  # nothing added to the old journal
        assert json.loads(json.dumps(outcome.result.context, default=str)) == expected[run_id]["context"]
        assert all("note" not in answer for answer in outcome.result.answers)
    context = runs.replay(store, "refund-approved", NoCalls()).result.context
    assert context["approval"] == {"answer": "approve"}  # no `answer_note` beside it: none was given


# -- the engine: where the note lands, and its taint ---------------------------------------------------------------

LOOPING = """\
machine: noted
entry: draft
budget: 10
context:
  house: "the author's literal"
states:
  draft:
    structure: A draft.
    prompt: "write"
    output: draft
    gates:
      - { when: it needs a person, escalate: true, to: use, ask: "OK?", reply_to: verdict }
  use:
    structure: A use of the note.
    prompt: "use [{{verdict_note}}] and [{{house}}]"
    output: used
    gates:
      - { when: another round is needed, then: ok, to: draft }
      - { when: otherwise, then: ok, to: END }
"""


class Answers(Oracle):
    """Answers every call: each judge with the next choice, each question with the next reply, and keeps the
    prompts it was asked to write."""

    waits = False

    def __init__(self, choices: list[int], replies: list[HumanReply]) -> None:
        self.choices, self.replies = choices, replies
        self.prompts: list[ProduceRequest] = []

    def ask(self, request: OracleRequest) -> Any:
        if isinstance(request, ProduceRequest):
            self.prompts.append(request)
            return ProduceAnswer("text")
        if isinstance(request, JudgeRequest):
            return JudgeAnswer(self.choices.pop(0))
        if isinstance(request, ReplyRequest):
            return self.replies.pop(0)
        raise AssertionError(f"unexpected request {request!r}")


def test_the_note_is_tainted_like_the_reply_and_an_answer_without_one_takes_the_earlier_note_away() -> None:
    replies = [HumanReply("approve", by="a", note="NOTE-ONE"), HumanReply("approve", by="b")]
    oracle = Answers([0, 0, 0, 1], replies)
    result = run_machine(load(LOOPING), oracle, options=RunOptions(hitl="all"))
    assert result.status == "done"
    first, second = [request for request in oracle.prompts if request.state == "use"]
    # Fenced as untrusted data (a per-call nonce around it), as a reply is; the author's literal is not.
    assert first.fenced
    assert re.search(r"use \[<data-(\w+)>\nNOTE-ONE\n</data-\1>\] and \[the author's literal\]", first.user), first.user
    assert "NOTE-ONE" not in second.user  # the second answer gave no note: the first one's is gone
    assert "verdict_note" not in result.context and result.context["verdict"] == "approve"
    assert [answer.get("note") for answer in result.answers] == ["NOTE-ONE", None]


def test_a_dotted_reply_path_has_its_note_beside_it() -> None:
    machine = load(LOOPING.replace(", reply_to: verdict }", " }").replace("{{verdict_note}}", "{{human.reply_note}}"))
    oracle = Answers([0, 1], [HumanReply("approve", note="beside")])
    result = run_machine(machine, oracle, options=RunOptions(hitl="all"))
    assert result.context["human"] == {"reply": "approve", "reply_note": "beside"}  # `human.reply` → `human.reply_note`
    assert "beside" in next(request.user for request in oracle.prompts if request.state == "use")
