"""An approval survives an edit only while what the person approved is unchanged.

A three-state machine researches, drafts (an escalate gate asks "Approve the draft?") and sends.
Editing the draft's prompt re-makes the draft, so the old approval no longer answers: the run asks
again, showing the new draft, the earlier answer (who, when) and what changed. Editing only the
send step keeps the approval. Real components: the ``mkl`` command in a subprocess, the SQLite
store, and a real IPython shell with the approval form.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from support import RUN_MIME, WIDGET_MIME, Cells

FLOW = """\
machine: flow
entry: research
budget: 8
result: sent
states:
  research:
    structure: Notes.
    prompt: "Research the topic."
    output: notes
    gates: [{ when: otherwise, then: ok, to: draft }]
  draft:
    structure: A draft.
    prompt: "Draft from {{notes}}."
    output: draft
    gates:
      - { when: otherwise, escalate: true, to: send, ask: "Approve the draft?", reply_to: approval }
  send:
    structure: A confirmation.
    prompt: "Send {{draft}} ({{approval}})."
    output: sent
    gates: [{ when: otherwise, then: ok, to: END }]
"""
SCRIPT = {
    "llm": {
        "produce": {
            "Research": "notes",
            "Redraft from": "new draft text",
            "Draft from": "draft text",
            "Send": "sent",
            "Deliver": "delivered",
        }
    }
}


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    (tmp_path / "flow.mkl").write_text(FLOW, encoding="utf-8")
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(SCRIPT), encoding="utf-8")
    return tmp_path


def _mkl(folder: Path, *args: str) -> tuple[int, dict[str, Any], str]:
    done = subprocess.run(
        [sys.executable, "-m", "mkl_notebook.cli", *args], cwd=folder, capture_output=True, text=True, timeout=120
    )
    return done.returncode, json.loads(done.stdout.strip().splitlines()[-1]), done.stdout


def _edit(folder: Path, old: str, new: str) -> None:
    path = folder / "flow.mkl"
    path.write_text(path.read_text(encoding="utf-8").replace(old, new), encoding="utf-8")


def _approved(folder: Path) -> str:
    code, line, _ = _mkl(folder, "run", "flow.mkl", "--script", "s.yaml", "--id", "f", "--hitl")
    assert (code, line["status"]) == (3, "suspended")
    code, done, _ = _mkl(
        folder,
        "resume",
        "--id",
        "f",
        "--question",
        line["question_id"],
        "--reply",
        "approve",
        "--as",
        "ada",
        "--script",
        "s.yaml",
    )
    assert (code, done["result"]) == (0, "sent")
    return str(line["question_id"])


def test_editing_what_was_approved_asks_again_with_the_earlier_answer_and_the_change(folder: Path) -> None:
    first = _approved(folder)
    _edit(folder, '"Draft from {{notes}}."', '"Redraft from {{notes}}."')
    code, line, out = _mkl(folder, "run", "flow.mkl", "--script", "s.yaml", "--id", "f", "--hitl")
    assert (code, line["status"], line["at"]) == (3, "suspended", "send")  # waits at the same gate again
    assert line["question_id"] != first  # a question about new content: the old answer cannot answer it
    [again] = line["asked_again"]
    assert (again["value"], again["claimed"], again["via"]) == ("approve", "ada", "cli") and again["time"] > 0
    assert again["changed"] == ["-draft text", "+new draft text"]
    assert "Asked again: 'approve' (by " in out and "    +new draft text" in out
    assert "[asked again: this answer was to an earlier version of the output, which an edit changed]" in out
    assert line["calls"] == {"made": 1, "replayed": 1}  # the new draft made; the research replayed

    code, stale, _ = _mkl(
        folder, "resume", "--id", "f", "--question", first, "--reply", "approve", "--script", "s.yaml"
    )
    assert code == 2 and stale["error"].startswith(f"question {first} was answered already: 'approve' by ")
    assert stale["error"].endswith(
        f"; run 'f' now waits on question {line['question_id']} ('Approve the draft?'); nothing was recorded"
    )
    code, done, _ = _mkl(
        folder, "resume", "--id", "f", "--question", line["question_id"], "--reply", "approve", "--script", "s.yaml"
    )
    assert (code, done["status"]) == (0, "done")


def test_editing_only_a_step_after_the_gate_keeps_the_approval(folder: Path) -> None:
    _approved(folder)
    _edit(folder, '"Send {{draft}} ({{approval}})."', '"Deliver {{draft}} ({{approval}})."')
    code, line, _ = _mkl(folder, "run", "flow.mkl", "--script", "s.yaml", "--id", "f", "--hitl")
    assert (code, line["status"], line["result"]) == (0, "done", "delivered")
    assert line["calls"] == {"made": 1, "replayed": 2} and "asked_again" not in line


def test_an_edit_undone_brings_back_the_approval_of_that_very_content(folder: Path) -> None:
    _approved(folder)
    _edit(folder, '"Draft from {{notes}}."', '"Redraft from {{notes}}."')
    code, line, _ = _mkl(folder, "run", "flow.mkl", "--script", "s.yaml", "--id", "f", "--hitl")
    assert code == 3
    _edit(folder, '"Redraft from {{notes}}."', '"Draft from {{notes}}."')  # back to the draft ada approved
    code, line, _ = _mkl(folder, "run", "flow.mkl", "--script", "s.yaml", "--id", "f", "--hitl")
    assert (code, line["result"]) == (0, "sent")


def test_the_form_shows_the_new_content_and_the_earlier_answer(ip: Cells) -> None:
    script = ip.script("s.yaml", SCRIPT)
    ip.define(FLOW)
    ip.run(f"r = %mkl run flow --script {script} --hitl")
    r = ip.shell.user_ns["r"]
    old_question = r.question_id
    r.submit("approve", by="ada")
    assert r.status == "done"
    ip.define(FLOW.replace('"Draft from {{notes}}."', '"Redraft from {{notes}}."'))
    ip.out.clear()
    ip.run(f"r = %mkl run flow --script {script} --hitl")
    r = ip.shell.user_ns["r"]
    assert r.status == "suspended" and r.question_id != old_question
    form = next(p for p in ip.out.published if WIDGET_MIME in p.data)
    assert form is not None
    view = ip.out.last(RUN_MIME)["text/plain"]  # what a reader without a kernel sees too
    assert "Asked again: 'approve' (by " in view and "    -draft text\n    +new draft text" in view
    assert "[asked again: this answer was to an earlier version of the output" in view
    header = r.pending
    assert header["about"] == "new draft text"
    [(sentence, diff)] = header["asked_again"]
    assert sentence.startswith("Asked again: 'approve' (by ") and diff == ["-draft text", "+new draft text"]
    with pytest.raises(Exception, match="q-"):  # the form shown before the edit cannot answer the new question
        r.submit("approve", question=old_question)


def test_mkl_plan_says_what_replays_what_runs_anew_and_what_is_asked_again_and_running_matches(folder: Path) -> None:
    _approved(folder)
    code, unchanged, out = _mkl(folder, "plan", "flow.mkl", "--id", "f")
    assert code == 0 and unchanged["first_call"] is None and len(unchanged["replays"]) == 3
    assert unchanged["answers_kept"] == ["root/1:draft#1/reply@0"]
    assert "calls nothing anew" in out

    _edit(folder, '"Send {{draft}} ({{approval}})."', '"Deliver {{draft}} ({{approval}})."')
    code, after_gate, _ = _mkl(folder, "plan", "flow.mkl", "--id", "f")
    assert after_gate["replays"] == ["root/0:research#1/produce", "root/1:draft#1/produce"]
    assert after_gate["answers_kept"] == ["root/1:draft#1/reply@0"] and after_gate["may_ask_again"] == []
    assert after_gate["first_call"] == {"position": "root/2:send#1/produce", "kind": "produce", "state": "send"}
    code, ran, _ = _mkl(folder, "run", "flow.mkl", "--script", "s.yaml", "--id", "f", "--hitl")
    assert ran["calls"] == {"made": 1, "replayed": len(after_gate["replays"])}  # as planned

    _edit(folder, '"Draft from {{notes}}."', '"Redraft from {{notes}}."')
    code, edited, out = _mkl(folder, "plan", "flow.mkl", "--id", "f")
    assert edited["replays"] == ["root/0:research#1/produce"]
    assert edited["first_call"] == {"position": "root/1:draft#1/produce", "kind": "produce", "state": "draft"}
    assert edited["may_rerun"] == ["root/2:send#1/produce"]
    assert [(a["position"], a["value"]) for a in edited["may_ask_again"]] == [("root/1:draft#1/reply@0", "approve")]
    assert "asks again at root/1:draft#1/reply@0 if what it asks about changes" in out
    code, ran, _ = _mkl(folder, "run", "flow.mkl", "--script", "s.yaml", "--id", "f", "--hitl")
    assert (code, ran["calls"]) == (3, {"made": 1, "replayed": 1})  # the draft re-made; its approval asked again
    assert ran["asked_again"][0]["value"] == "approve"


def test_mkl_plan_in_a_notebook_uses_the_machines_as_defined_now(ip: Cells) -> None:
    script = ip.script("s.yaml", SCRIPT)
    ip.define(FLOW)
    ip.run(f"r = %mkl run flow --script {script} --hitl")
    ip.shell.user_ns["r"].submit("approve", by="ada")
    ip.define(FLOW.replace('"Draft from {{notes}}."', '"Redraft from {{notes}}."'))
    ip.out.clear()
    ip.run("%mkl plan flow")
    shown = ip.out.last("text/html")["text/plain"]
    assert shown.splitlines()[:3] == [
        "Plan for run flow:",
        "  replays 1 call from the journal: root/0:research#1/produce",
        "  then calls anew: root/1:draft#1/produce (produce at state draft), whose request changed or was never made",
    ]
    assert "asks again at root/1:draft#1/reply@0 if what it asks about changes (it was answered 'approve' by" in shown
    assert ip.fails("%mkl plan nosuch").args[0].startswith("no run 'nosuch' in ")
