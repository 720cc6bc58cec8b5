"""The ``%%mkl`` / ``%mkl`` magics in a real IPython shell.

Every test runs cells through ``InteractiveShell.run_cell`` exactly as a notebook
would, records the MIME bundles the cells publish, and works in its own folder
(runs are journaled to ``.mkl/runs.sqlite`` under the working directory) with a
fresh mkl session.
"""

from __future__ import annotations

import html
import json
import re
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
import yaml

import mkl_notebook
from mkl_notebook.checkpoints.envelope import verify
from mkl_notebook.notebook import session as session_module
from mkl_notebook.notebook.magic_args import SUBCOMMANDS
from mkl_notebook.render.common import PROSE_LEFT

from support import (
    REFUND,
    REFUND_ASK,
    REFUND_RESULT,
    REFUND_SCRIPT,
    REFUND_TESTS,
    RUN_MIME,
    WIDGET_MIME,
    Cells,
    env_without_models,
    fetch_page_interrupted_once,
)

SVG = "image/svg+xml"

LOOPER = """\
machine: looper
entry: draft
budget: 20
result: verdict
states:
  draft:
    structure: A draft.
    prompt: "write {{verdict}}"
    output: draft
    gates:
      - { when: otherwise, then: ok, to: check }
  check:
    structure: A verdict.
    prompt: "check {{draft}}"
    output: verdict
    gates:
      - { when: the draft is good enough, then: ok, to: END }
      - { when: otherwise, then: ok, to: draft }
"""

# draft, check (none), draft, check (none), draft, check (none), draft, check (good) -> 8 steps, done
LOOPER_SCRIPT = {
    "llm": {
        "produce": {"write": "a draft", "check": "looks fine"},
        "judge": ["none", "none", "none", 0],
        "tokens": [10, 5],
    },
}

UNREACHABLE = """\
machine: lonely
entry: a
budget: 5
states:
  a:
    structure: s
    prompt: p
    output: x
    gates:
      - { when: otherwise, then: ok, to: END }
  island:
    structure: s
    prompt: never
    output: y
    gates:
      - { when: otherwise, then: ok, to: END }
"""


LOG_STATE = """\
  log:
    structure: A log line.
    prompt: "log {{reply}}"
    output: logline
    gates:
      - { when: otherwise, then: ok, to: END }
"""


def _reply_records(store: Path) -> int:
    import sqlite3

    with sqlite3.connect(store) as db:
        bodies = [json.loads(body) for (body,) in db.execute("SELECT body FROM records")]
    return sum(1 for body in bodies if body.get("t") == "reply")


def _assert_safe_html(html: str) -> None:
    lowered = html.lower()
    assert "<script" not in lowered
    assert "<style" not in lowered
    assert "var(--" not in lowered
    assert "style=" not in lowered.replace(PROSE_LEFT, "")  # the one style: a cell of words, left-aligned


def _drawn_states(svg: str) -> list[str]:
    """The labels of the states a diagram's SVG drawing shows, as it draws them."""
    nodes = svg.split("<g class='node ", 1)[1]  # the nodes come after the edges and their labels
    return [html.unescape(label) for label in re.findall(r"<text [^>]*>([^<]*)</text>", nodes)]


# -- defining machines --------------------------------------------------------------------------


def test_define_draws_one_node_per_state_with_a_text_twin(ip: Cells) -> None:
    ip.define(REFUND)
    bundle = ip.out.last(SVG)
    assert bundle[SVG].startswith("<svg ")
    assert _drawn_states(bundle[SVG]) == ["lookup", "draft", "send", "withhold"]
    text = bundle["text/plain"]
    assert text.startswith("machine refund: entry lookup, budget 12")
    for state in ("lookup", "draft", "send"):
        assert re.search(rf"^\s+{state} \(", text, flags=re.MULTILINE), text
    assert "refund" in mkl_notebook.notebook.session.current_session().machines


def test_redefine_replaces_the_machine(ip: Cells) -> None:
    ip.define(REFUND)
    edited = (
        REFUND.replace(
            "      - { when: otherwise, then: ok, to: END }", "      - { when: otherwise, then: ok, to: log }"
        )
        + LOG_STATE
    )
    ip.out.clear()
    ip.define(edited)
    session = session_module.current_session()
    assert list(session.machines["refund"].states) == ["lookup", "draft", "send", "withhold", "log"]
    assert _drawn_states(ip.out.last(SVG)[SVG]) == ["lookup", "draft", "send", "withhold", "log"]


def test_cell_run_defines_and_runs(ip: Cells) -> None:
    ip.run(f"%%mkl run --no-hitl --script {REFUND_SCRIPT} --set ticket=broken\n{REFUND}")
    assert "refund" in session_module.current_session().machines
    run = mkl_notebook.get_run("refund")
    assert run.status == "done"
    assert run.result == REFUND_RESULT
    envelope = ip.out.last(RUN_MIME)[RUN_MIME]
    header, _ = verify(envelope)
    assert header["status"] == "done"


def test_cell_run_rejects_another_machine_name(ip: Cells) -> None:
    error = ip.fails(f"%%mkl run other --script {REFUND_SCRIPT}\n{REFUND}")
    assert "refund" in str(error) and "other" in str(error)


# -- running and the run's display -------------------------------------------------------------


def test_run_output_carries_a_verifiable_envelope_safe_html_and_a_text_twin(ip: Cells) -> None:
    ip.define(REFUND)
    ip.out.clear()
    ip.run(f"%mkl run refund --no-hitl --script {REFUND_SCRIPT} --set ticket=broken")
    final = ip.out.last(RUN_MIME)
    header, records = verify(final[RUN_MIME], "run output")
    assert header["run_id"] == "refund"  # the run id defaults to the machine name
    assert header["machine"] == "refund"
    assert header["status"] == "done"
    assert records[0]["t"] == "start"
    assert set(final) >= {"text/html", "text/plain", RUN_MIME}
    _assert_safe_html(final["text/html"])
    assert REFUND_RESULT in final["text/html"]
    assert "Done." in final["text/plain"]
    assert REFUND_RESULT in final["text/plain"]
    # every bundle of the run, live ones included, is safe and has its twin, in ONE display output
    run_outputs = [p for p in ip.out.published if "text/html" in p.data and p.display_id]
    assert run_outputs
    for published in run_outputs:
        _assert_safe_html(published.data["text/html"])
        assert published.data.get("text/plain")
    ids = {p.display_id for p in ip.out.published if RUN_MIME in p.data}
    assert len(ids) == 1


def test_finished_run_draws_the_diagram_with_visit_counts(ip: Cells) -> None:
    ip.define(REFUND)
    ip.out.clear()
    ip.run(f"%mkl run refund --no-hitl --script {REFUND_SCRIPT}")
    diagram = ip.out.last(SVG)
    assert _drawn_states(diagram[SVG]) == ["lookup ×1", "draft ×1", "send ×1", "withhold"]
    assert "✔" in diagram[SVG]  # the path taken is marked
    assert "  lookup ×1  -> draft [otherwise ✔]" in diagram["text/plain"].splitlines()


def test_budget_halt_highlights_the_most_visited_state(ip: Cells) -> None:
    ip.define(LOOPER)
    script = ip.script("looper.yaml", LOOPER_SCRIPT)
    ip.out.clear()
    ip.run(f"%mkl run looper --max-steps 3 --script {script}")
    run = mkl_notebook.get_run("looper")
    assert (run.status, run.error) == ("halt", "budget-exhausted")
    assert run.visits == {"draft": 2, "check": 1}
    final = ip.out.last(RUN_MIME)
    html = final["text/html"]
    _assert_safe_html(html)
    visits_table = html[html.index("<caption>Visits of looper") :]
    assert re.search(r"<mark>(?:(?!</mark>).)*draft(?:(?!</mark>).)*</mark>", visits_table), visits_table
    assert not re.search(r"<mark>(?:(?!</mark>).)*check(?:(?!</mark>).)*</mark>", visits_table)
    text = final["text/plain"]
    assert re.search(r"^\* draft\s+2 / ", text, flags=re.MULTILINE), text
    assert "Most visited state: draft" in text


def test_suspend_then_resume_with_more_steps_continues(ip: Cells) -> None:
    ip.define(LOOPER)
    script = ip.script("looper.yaml", LOOPER_SCRIPT)
    ip.run(f"%mkl run looper --id loop-1 --max-steps 3 --suspend --script {script}")
    run = mkl_notebook.get_run("loop-1")
    assert (run.status, run.error, run.at) == ("suspended", "budget-exhausted", "check")
    ip.out.clear()
    ip.run("%mkl resume loop-1 --max-steps 50")
    run = mkl_notebook.get_run("loop-1")
    assert run.status == "done", (run.status, run.error)
    assert [step["state"] for step in run.trace] == ["draft", "check"] * 4
    assert run.result == "looks fine"
    header, _ = verify(ip.out.last(RUN_MIME)[RUN_MIME])
    assert header["status"] == "done"


def test_resuming_with_the_same_budget_suspends_again_in_the_same_place(ip: Cells) -> None:
    ip.define(LOOPER)
    script = ip.script("looper.yaml", LOOPER_SCRIPT)
    ip.run(f"%mkl run looper --id loop-2 --max-steps 3 --suspend --script {script}")
    ip.run("%mkl resume loop-2")
    run = mkl_notebook.get_run("loop-2")
    assert (run.status, run.error, run.at) == ("suspended", "budget-exhausted", "check")
    assert run.calls["made"] == 0
    assert len(run.trace) == 3


def test_rerunning_the_cell_replays_without_calls_and_fresh_pays_again(ip: Cells) -> None:
    ip.define(REFUND)
    cell = f"%mkl run refund --no-hitl --script {REFUND_SCRIPT} --set ticket=broken"
    ip.run(cell)
    first = mkl_notebook.get_run("refund")
    assert first.calls["made"] > 0
    made_first = first.calls["made"]
    ip.run(cell)
    again = mkl_notebook.get_run("refund")
    assert again.calls["made"] == 0
    assert again.calls["replayed"] >= made_first
    assert (again.status, again.result) == ("done", REFUND_RESULT)
    ip.run(cell + " --fresh")
    fresh = mkl_notebook.get_run("refund")
    assert fresh.calls["made"] == made_first
    assert (fresh.status, fresh.result) == ("done", REFUND_RESULT)


def test_a_refused_resume_journals_nothing_of_it(ip: Cells) -> None:
    ip.define(REFUND)
    ip.run(f"%mkl run refund --script {REFUND_SCRIPT}")
    ip.fails("%mkl resume refund --set approval=approve --max-steps 0")
    run = mkl_notebook.get_run("refund")
    assert (run.status, run.error) == ("suspended", "escalated")  # the reply did not go through either
    assert _reply_records(Path(".mkl/runs.sqlite")) == 0


def test_editing_a_prompt_reexecutes_only_the_changed_call_and_keeps_the_reply(ip: Cells) -> None:
    ip.define(REFUND)
    cell = f"%mkl run refund --script {REFUND_SCRIPT} --set ticket=broken"
    ip.run(cell)
    run = mkl_notebook.get_run("refund")
    assert (run.status, run.error, run.at) == ("suspended", "escalated", "send")
    assert run.pending is not None and run.pending["ask"] == REFUND_ASK
    ip.run(f"%mkl resume refund --question {run.question_id} --set approval=approve")
    run = mkl_notebook.get_run("refund")
    assert (run.status, run.result) == ("done", REFUND_RESULT)
    assert _reply_records(Path(".mkl/runs.sqlite")) == 1
    ip.define(REFUND.replace("Final reply based on {{draft}}.", "Final reply, kept short, based on {{draft}}."))
    ip.run(cell)
    edited = mkl_notebook.get_run("refund")
    assert edited.status == "done", (edited.status, edited.error)  # the earlier reply still answers the gate
    assert edited.calls["made"] == 1  # only the edited `send` prompt is produced again
    assert edited.calls["replayed"] >= 3  # order_lookup, draft, the judge
    assert edited.run_result.context["approval"] == "approve"
    assert _reply_records(Path(".mkl/runs.sqlite")) == 1


# -- Python values in flags --------------------------------------------------------------------


def test_python_values_reach_the_run_through_var_expr_and_input(ip: Cells) -> None:
    ip.define(REFUND)
    ip.run(
        "tk = 'Parcel A-1001 arrived broken'\nprefix = 'case'\n"
        "payload = {'ticket': 'replaced below', 'meta': {'n': 3, 'tags': ['a', 'b']}}"
    )
    ip.run(
        f"%mkl run refund --id {{prefix}}-{{1+1}} --input $payload --set ticket=$tk "
        f"--set note=len-{{len(tk)}}-$prefix --no-hitl --script {REFUND_SCRIPT}"
    )
    run = mkl_notebook.get_run("case-2")
    assert run.status == "done"
    context = run.run_result.context
    assert context["ticket"] == "Parcel A-1001 arrived broken"
    assert context["meta"] == {"n": 3, "tags": ["a", "b"]}  # the dict itself, not its text
    assert context["note"] == "len-28-case"


def test_expr_with_spaces_in_a_flag_is_one_value(ip: Cells) -> None:
    """``{expr}`` is a Python expression, as in any IPython magic: spaces inside the braces belong to it."""
    ip.define(REFUND)
    ip.run("n = 2")
    ip.run(
        f"%mkl run refund --id case-{{n + 1}} --set ticket={{'A-' + str(n * 500)}} --no-hitl --script {REFUND_SCRIPT}"
    )
    run = mkl_notebook.get_run("case-3")
    assert run.run_result.context["ticket"] == "A-1000"


def test_input_accepts_a_json_object(ip: Cells) -> None:
    ip.define(REFUND)
    ip.run(f"""%mkl run refund --input '{{"ticket": "json ticket"}}' --no-hitl --script {REFUND_SCRIPT}""")
    assert mkl_notebook.get_run("refund").run_result.context["ticket"] == "json ticket"


# -- every subcommand ----------------------------------------------------------------------------


def test_help_lists_every_subcommand(ip: Cells, capsys: pytest.CaptureFixture[str]) -> None:
    for cell in ("%mkl help", "%mkl"):
        capsys.readouterr()
        ip.run(cell)
        text = capsys.readouterr().out
        lines = text.splitlines()
        for command in SUBCOMMANDS:  # each at the start of a line of its own, as a person scans for it
            assert any(line.startswith(f"%mkl {command}") for line in lines), (command, text)


def test_check_reports_findings_with_lines(ip: Cells, capsys: pytest.CaptureFixture[str]) -> None:
    ip.define(REFUND)
    capsys.readouterr()
    ip.run("%mkl check refund")
    assert capsys.readouterr().out.strip() == "refund: no findings"
    ip.define(UNREACHABLE)
    capsys.readouterr()
    ip.run("%mkl check lonely")
    out = capsys.readouterr().out
    island_line = UNREACHABLE.splitlines().index("  island:") + 2  # in the cell, whose line 1 is %%mkl
    found = re.search(r"^line (\d+)(, column \d+)?: warning: .*'island'.*reached", out, flags=re.MULTILINE)
    assert found, out
    assert int(found.group(1)) in (island_line, island_line + 1), out  # the state's line (or its body's)


def test_test_runs_scenarios_as_a_table(ip: Cells) -> None:
    ip.define(REFUND)
    ip.out.clear()
    ip.run(f"%mkl test refund --script {REFUND_TESTS}")
    bundle = ip.out.last("text/html")
    assert "3 passed, 0 failed" in bundle["text/plain"]
    assert "3 passed, 0 failed" in bundle["text/html"]
    assert "refund-escalates-for-approval" in bundle["text/plain"]
    _assert_safe_html(bundle["text/html"])


def test_test_reports_a_failing_scenario(ip: Cells) -> None:
    ip.define(REFUND)
    scenarios = yaml.safe_load(REFUND_TESTS.read_text(encoding="utf-8"))
    scenarios["scenarios"][0]["expect"]["status"] = "done"
    path = ip.script("wrong.test.yaml", scenarios)
    ip.out.clear()
    ip.run(f"%mkl test refund --script {path}")
    text = ip.out.last("text/html")["text/plain"]
    assert "2 passed, 1 failed" in text
    assert "FAIL refund-escalates-for-approval" in text


def test_config_shows_and_changes_settings(ip: Cells, capsys: pytest.CaptureFixture[str]) -> None:
    capsys.readouterr()
    ip.run("%mkl config")
    out = capsys.readouterr().out
    assert "hitl = asking" in out
    assert "store = .mkl/runs.sqlite" in out
    ip.run("%mkl config hitl=none max_workers=2")
    out = capsys.readouterr().out
    assert "hitl = none" in out and "max_workers = 2" in out
    settings = session_module.current_session().settings
    assert (settings.hitl, settings.max_workers) == ("none", 2)
    error = ip.fails("%mkl config colour=blue")
    assert "colour" in str(error)
    error = ip.fails("%mkl config hitl=sometimes")
    assert "hitl" in str(error)


def test_config_store_moves_the_journal(ip: Cells) -> None:
    ip.define(REFUND)
    ip.run("%mkl config store=elsewhere/runs.sqlite")
    ip.run(f"%mkl run refund --no-hitl --script {REFUND_SCRIPT}")
    assert (ip.tmp / "elsewhere" / "runs.sqlite").is_file()
    assert not (ip.tmp / ".mkl" / "runs.sqlite").exists()


def test_trace_of_a_run_waiting_inside_a_called_machine_shows_its_steps(ip: Cells) -> None:
    ip.define(
        "machine: child\nentry: a\nbudget: 1\nstates:\n"
        "  a:\n    structure: s\n    prompt: one\n    output: o\n"
        "    gates: [{ when: otherwise, then: ok, to: b }]\n"
        "  b:\n    structure: s\n    prompt: two\n    output: o\n"
        "    gates: [{ when: otherwise, then: ok, to: END }]\n"
    )
    ip.define(
        "machine: parent\nentry: c\nbudget: 5\nstates:\n  c:\n    call: child\n    output: sub\n"
        "    gates: [{ when: otherwise, then: ok, to: END }]\n"
    )
    script = ip.script("nested", {"llm": {"produce": ["first draft"]}})
    ip.run(f"%mkl run parent --id nested --suspend --script {script}")
    ip.out.clear()
    ip.run("%mkl trace nested")
    trace = ip.out.last("text/html")
    assert "(suspended inside child)" in trace["text/plain"]
    assert "first draft" in trace["text/plain"]  # what the called machine wrote before it ran out of steps
    _assert_safe_html(trace["text/html"])


def test_runs_trace_visits_and_pending(ip: Cells, capsys: pytest.CaptureFixture[str]) -> None:
    ip.define(REFUND)
    ip.run(f"%mkl run refund --script {REFUND_SCRIPT}")  # suspends at its escalate gate (notebook default)
    ip.run(f"%mkl run refund --id quick --no-hitl --script {REFUND_SCRIPT}")

    ip.out.clear()
    ip.run("%mkl runs")
    runs = ip.out.last("text/html")
    assert re.search(r"^refund\s+refund\s+suspended\s+escalated\s+send\s+—$", runs["text/plain"], flags=re.MULTILINE)
    assert re.search(r"^quick\s+refund\s+done", runs["text/plain"], flags=re.MULTILINE)
    _assert_safe_html(runs["text/html"])

    ip.out.clear()
    ip.run("%mkl trace quick")
    trace = ip.out.last("text/html")
    assert "3 steps" in trace["text/plain"]
    assert trace["text/html"].count("<tr>") >= 4  # header + three steps
    for state in ("lookup", "draft", "send"):
        assert state in trace["text/plain"]
    _assert_safe_html(trace["text/html"])

    ip.out.clear()
    ip.run("%mkl visits quick")
    visits = ip.out.last("text/html")
    assert re.search(r"draft\s+1 / 4", visits["text/plain"]), visits["text/plain"]
    assert "Visits of refund" in visits["text/html"]

    ip.out.clear()
    capsys.readouterr()
    ip.run("%mkl pending")
    pending = ip.out.last(RUN_MIME)
    header, _ = verify(pending[RUN_MIME])
    assert (header["run_id"], header["status"], header["ask"]) == ("refund", "suspended", REFUND_ASK)
    assert ip.out.with_mime(WIDGET_MIME), "the pending run shows its form again"

    ip.run(f"%mkl resume refund --question {mkl_notebook.get_run('refund').question_id} --reply approve")
    assert mkl_notebook.get_run("refund").status == "done"
    capsys.readouterr()
    ip.out.clear()
    ip.run("%mkl pending")
    assert "No run is waiting for a person." in capsys.readouterr().out
    assert not ip.out.with_mime(RUN_MIME)


def test_resume_with_set_answers_the_gate(ip: Cells) -> None:
    ip.define(REFUND)
    ip.run(f"%mkl run refund --script {REFUND_SCRIPT}")
    ip.out.clear()
    question = mkl_notebook.get_run("refund").question_id
    ip.run(f"%mkl resume refund --question {question} --set approval=approve")
    run = mkl_notebook.get_run("refund")
    assert (run.status, run.result) == ("done", REFUND_RESULT)
    assert run.run_result.context["approval"] == "approve"
    header, _ = verify(ip.out.last(RUN_MIME)[RUN_MIME])
    assert header["status"] == "done"
    error = ip.fails(f"%mkl resume refund --question {question} --set approval=again")
    assert "not waiting" in str(error)


def test_resume_set_at_the_wrong_path_names_the_right_one(ip: Cells) -> None:
    ip.define(REFUND)
    ip.run(f"%mkl run refund --script {REFUND_SCRIPT}")
    error = ip.fails("%mkl resume refund --set human.reply=approve")
    assert "approval" in str(error)
    assert mkl_notebook.get_run("refund").status == "suspended"
    assert _reply_records(Path(".mkl/runs.sqlite")) == 0


# -- user errors: one UsageError line, no traceback --------------------------------------------

BAD_YAML = "machine: bad\nentry: a\nbudget: 3\nstates:\n  a: { structure: s, prompt: p\n  b: 1\n"


def _waiting(ip: Cells) -> str:
    ip.run(f"%mkl run refund --script {REFUND_SCRIPT}")  # suspends at its escalate gate (notebook default)
    return "%mkl resume refund"


def _not_waiting(ip: Cells) -> str:
    ip.run(f"%mkl run refund --no-hitl --script {REFUND_SCRIPT}")
    return "%mkl resume refund --reply yes"


USER_ERRORS = {
    # positions as the cell shows them: its line 1 is %%mkl
    "yaml": (lambda ip: "%%mkl\n" + BAD_YAML, ["line 6, column 6", "YAML", "opened with '{'"]),
    "unknown-state-key": (
        lambda ip: "%%mkl\n" + REFUND.replace("    prompt: |\n      Customer", "    promt: |\n      Customer"),
        [f"line {REFUND.splitlines().index('    prompt: |') + 2}, column 5", "'draft'", "promt", "'prompt'?"],
    ),
    "unknown-machine": (lambda ip: "%mkl run nosuch", ["nosuch", "%%mkl"]),
    "unknown-subcommand": (lambda ip: "%mkl frobnicate", ["frobnicate", "run"]),
    "bad-flag": (lambda ip: "%mkl run refund --bogus", ["--bogus"]),
    "max-steps-0": (lambda ip: f"%mkl run refund --max-steps 0 --script {REFUND_SCRIPT}", ["--max-steps", "1"]),
    "max-steps-not-a-number": (lambda ip: "%mkl run refund --max-steps many", ["--max-steps", "many"]),
    "resume-max-steps-0": (lambda ip: _waiting(ip) + " --max-steps 0", ["--max-steps", "1"]),
    "resume-max-tokens-negative": (lambda ip: _waiting(ip) + " --max-tokens -5", ["--max-tokens", "1"]),
    "resume-reply-with-max-steps-0": (lambda ip: _waiting(ip) + " --reply approve --max-steps 0", ["--max-steps", "1"]),
    "input-not-a-dict": (
        lambda ip: f"lst = [1, 2]\n%mkl run refund --input $lst --script {REFUND_SCRIPT}",
        ["--input", "dict"],
    ),
    "input-bad-json": (lambda ip: f"%mkl run refund --input '[1, 2]' --script {REFUND_SCRIPT}", ["--input", "dict"]),
    "unknown-var": (
        lambda ip: f"%mkl run refund --set ticket=$no_such_variable --script {REFUND_SCRIPT}",
        ["no_such_variable"],
    ),
    "bad-expr": (lambda ip: f"%mkl run refund --id {{1+}} --script {REFUND_SCRIPT}", ["{1+}", "SyntaxError"]),
    "set-without-equals": (lambda ip: f"%mkl run refund --set ticket --script {REFUND_SCRIPT}", ["--set", "ticket"]),
    "reply-when-not-waiting": (_not_waiting, ["refund", "not waiting"]),
    "resume-unknown-run": (lambda ip: "%mkl resume ghost --reply yes", ["ghost"]),
    "trace-unknown-run": (lambda ip: "%mkl trace ghost", ["ghost"]),
    "test-missing-script": (
        lambda ip: "%mkl test refund --script missing.test.yaml",
        ["missing.test.yaml", "cannot be read"],
    ),
    "test-without-script": (lambda ip: "%mkl test refund", ["--script"]),
    "missing-script-for-run": (lambda ip: "%mkl run refund --script nowhere.yaml", ["nowhere.yaml"]),
    "no-model": (lambda ip: "%mkl run refund", ["no model", "--script"]),
    "unbalanced-quote": (lambda ip: "%mkl run refund --set ticket='oops", ["%mkl"]),
}


@pytest.mark.parametrize("case", list(USER_ERRORS))
def test_user_errors_are_one_usage_error_line(ip: Cells, case: str, capsys: pytest.CaptureFixture[str]) -> None:
    make_cell, expected = USER_ERRORS[case]
    ip.define(REFUND)
    cell = make_cell(ip)
    capsys.readouterr()
    ip.out.clear()
    error = ip.fails(cell)
    message = str(error)
    assert "\n" not in message.strip(), message
    for fragment in expected:
        assert fragment in message, (fragment, message)
    captured = capsys.readouterr()
    shown = captured.out + captured.err
    assert "Traceback" not in shown, shown
    usage_lines = [line for line in shown.splitlines() if line.startswith("UsageError")]
    assert usage_lines == [f"UsageError: {message}"], shown
    assert not ip.out.with_mime(RUN_MIME), "a refused command draws no run"


def test_a_bad_definition_keeps_the_previous_machine(ip: Cells) -> None:
    ip.define(REFUND)
    before = session_module.current_session().machines["refund"]
    ip.fails("%%mkl\n" + REFUND.replace("budget: 12", "budget: 0"))
    assert session_module.current_session().machines["refund"] is before


# -- import cost --------------------------------------------------------------------------------


def test_loading_the_extension_imports_no_litellm(tmp_path: Path) -> None:
    code = textwrap.dedent("""
        import json, sys, time
        from IPython.core.interactiveshell import InteractiveShell
        shell = InteractiveShell.instance()
        started = time.perf_counter()
        result = shell.run_cell("%load_ext mkl_notebook")
        seconds = time.perf_counter() - started
        slow = sorted(name for name in ("litellm", "openai", "httpx", "tiktoken", "tokenizers") if name in sys.modules)
        print(json.dumps({"ok": result.success, "slow": slow,
                          "mkl": "mkl_notebook.notebook.magics" in sys.modules, "seconds": seconds}))
    """)
    completed = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
        env={**env_without_models(), "IPYTHONDIR": str(tmp_path / "ipython")},
    )
    assert completed.returncode == 0, completed.stderr
    facts = json.loads(completed.stdout.strip().splitlines()[-1])
    assert facts["ok"] and facts["mkl"]
    assert facts["slow"] == []
    print(f"%load_ext mkl_notebook took {facts['seconds']:.3f} s (information only)")


TOOLED = """
machine: tooled
entry: look
budget: 6
context:
  order: ""
states:
  look:
    tool: lookup_order
    input: { order: "{{order}}", verbose: true }
    output: record
    gates:
      - { when: the order can be refunded, hook: refundable, then: ok, to: refund }
      - { when: otherwise, then: ok, to: END }
  refund:
    tool: issue_refund
    input: { order: "{{order}}" }
    output: receipt
    gates:
      - { when: otherwise, then: ok, to: END }
"""


def test_notebook_python_functions_serve_as_tools_and_hooks(ip: Cells) -> None:
    """@mkl_notebook.tool and @mkl_notebook.hook register notebook functions; keyword inputs reach them."""
    ip.run("""
import mkl_notebook
calls = []

@mkl_notebook.tool(effect="read")
def lookup_order(order, verbose):
    calls.append(("lookup", order, verbose))
    return {"order": order, "refundable": True}

@mkl_notebook.hook
def refundable(context, output):
    calls.append(("hook", context["record"]))
    return '"refundable": true' in output

@mkl_notebook.tool(effect="effect")
def issue_refund(order):
    calls.append(("refund", order))
    return f"refund issued for {order}"
""")
    ip.define(TOOLED)
    script = ip.script("tooled.yaml", {"llm": {"produce": []}})
    ip.run(f"%mkl run tooled --set order=A-7 --script {script}")
    ip.run("run = mkl_notebook.get_run('tooled')")
    run = ip.shell.user_ns["run"]
    assert (run.status, run.result) == ("done", "refund issued for A-7")
    calls = ip.shell.user_ns["calls"]
    assert calls[0] == ("lookup", "A-7", True)
    assert calls[1][0] == "hook" and "A-7" in calls[1][1]
    assert calls[2] == ("refund", "A-7")
    assert [step["gate_via"] for step in run.trace] == ["hook", "otherwise"]
    ip.run(f"%mkl run tooled --set order=A-7 --script {script}")  # a re-run replays: no tool runs again
    assert len(ip.shell.user_ns["calls"]) == 3


def test_config_magic_sets_the_model_for_every_tier(ip: Cells, capsys: pytest.CaptureFixture[str]) -> None:
    ip.run('%config MklMagics.model = "openai/some-model"')
    capsys.readouterr()
    ip.run("%mkl config")
    shown = capsys.readouterr().out
    assert "balanced=openai/some-model" in shown and "fast=openai/some-model" in shown
    ip.run("%config MklMagics.model = None")
    capsys.readouterr()
    ip.run("%mkl config")
    assert "balanced=—" in capsys.readouterr().out


# -- honest progress -----------------------------------------------------------------------------

INTERRUPTIBLE = """\
machine: slow
entry: fetch
budget: 5
tools:
  - { name: fetch_page, description: a tool a person interrupts }
states:
  fetch:
    tool: fetch_page
    output: page
    gates: [{ when: otherwise, then: ok, to: END }]
"""


def _live_lines(ip: Cells) -> dict[str, str]:
    """Each display id's latest text/plain: what the cell's outputs show now."""
    latest: dict[str, str] = {}
    for item in ip.out.published:
        if item.display_id is not None and "text/plain" in item.data:
            latest[item.display_id] = item.data["text/plain"]
    return latest


def test_an_interrupt_ends_in_one_line_naming_the_state_and_the_live_line_does_not_stay(
    ip: Cells, monkeypatch: pytest.MonkeyPatch
) -> None:
    fetch_page_interrupted_once()  # the person presses Interrupt while the tool works
    ip.define(INTERRUPTIBLE)
    error = ip.fails(f"%mkl run slow --script {ip.script('none.yaml', {'llm': {'produce': []}})}")
    assert str(error) == (
        "run 'slow' was interrupted at state 'fetch' after 0 step(s); every answer so far is "
        "journaled: run this cell again to continue from there"
    )
    assert not any(line.startswith("running") for line in _live_lines(ip).values())
    ip.run(f"%mkl run slow --script {ip.script('none.yaml', {'llm': {'produce': []}})}")
    assert mkl_notebook.get_run("slow").result == "the page"


def test_a_refused_run_leaves_no_live_line_behind(ip: Cells) -> None:
    ip.define(REFUND)
    ip.fails(f"%mkl run refund --max-steps 0 --script {REFUND_SCRIPT}")
    assert ip.out.published, "the live line was drawn first"
    assert not any(line.startswith("running") for line in _live_lines(ip).values())


def test_the_live_line_shows_the_time_taken_and_a_replay_leaves_the_saved_output_as_it_was(ip: Cells) -> None:
    ip.define(REFUND)
    ip.out.clear()
    cell = f"%mkl run refund --script {REFUND_SCRIPT} --no-hitl"
    ip.run(cell)
    first_text = [item.data["text/plain"] for item in ip.out.published if "text/plain" in item.data]
    assert re.fullmatch(r"running — starting · 0 steps · 0 tokens · 0\.0 s", first_text[0])
    first = ip.out.last(RUN_MIME)
    assert "· 4 answers journaled" in first["text/plain"]  # order_lookup, draft, the judge, send
    assert mkl_notebook.get_run("refund").calls == {"made": 4, "replayed": 0}
    ip.out.clear()
    ip.run(cell)
    assert mkl_notebook.get_run("refund").calls == {"made": 0, "replayed": 4}
    assert ip.out.last(RUN_MIME) == first  # the saved output is the same: the file does not change


# -- results as values ----------------------------------------------------------------------------------


def test_a_run_is_a_value_and_a_cell_ending_with_one_shows_its_view_once(ip: Cells) -> None:
    def cell(source: str) -> Any:  # numbered as a kernel numbers cells
        result = ip.shell.run_cell(source, store_history=True)
        assert result.success, result.error_in_exec
        return result

    ip.define(REFUND)
    ip.out.clear()
    ran = cell(f"%mkl run refund --id valued --script {REFUND_SCRIPT} --no-hitl")
    assert isinstance(ran.result, mkl_notebook.app.handle.Run) and ran.result.id == "valued"  # the cell's value
    views = [p for p in ip.out.published if RUN_MIME in p.data and not p.update]
    assert len(views) == 1  # drawn live once; the value at the end of the cell adds no second view

    ip.out.clear()
    cell(f"r = %mkl run refund --id valued --script {REFUND_SCRIPT} --no-hitl")
    r = ip.shell.user_ns["r"]
    assert (r.status, r.result) == ("done", REFUND_RESULT)
    assert r.result in r.context.values() and r.trace[0]["state"] == "lookup"
    assert isinstance(r.trace, list) and all(isinstance(step, dict) for step in r.trace)
    r.trace.clear()  # a copy: the run's own trace is untouched
    assert r.trace

    ip.out.clear()
    cell("r")  # a later cell that ends with the run shows it
    assert len([p for p in ip.out.published if RUN_MIME in p.data and not p.update]) == 1


def test_trace_frame_gives_a_data_frame_and_says_pandas_is_needed_without_it(
    ip: Cells, monkeypatch: pytest.MonkeyPatch
) -> None:
    ip.define(REFUND)
    ip.run(f"r = %mkl run refund --script {REFUND_SCRIPT} --no-hitl")
    frame = ip.shell.user_ns["r"].trace_frame()
    assert list(frame["state"]) == [step["state"] for step in ip.shell.user_ns["r"].trace]
    monkeypatch.setitem(sys.modules, "pandas", None)  # as if it were not installed: importing it fails
    with pytest.raises(Exception, match="needs pandas, which is not installed: pip install pandas"):
        ip.shell.user_ns["r"].trace_frame()


def test_load_defines_a_machine_from_a_file_with_the_machines_it_calls(ip: Cells) -> None:
    folder = ip.tmp / "flows"
    folder.mkdir()
    (folder / "helper.mkl").write_text(
        "machine: helper\nentry: a\nbudget: 3\nstates:\n"
        "  a: {structure: s, prompt: p, output: o, gates: [{when: otherwise, then: ok, to: END}]}\n",
        encoding="utf-8",
    )
    (folder / "main.mkl").write_text(
        "machine: main\nentry: go\nbudget: 3\nstates:\n"
        "  go: {call: helper, output: o, gates: [{when: otherwise, then: ok, to: END}]}\n",
        encoding="utf-8",
    )
    ip.out.clear()
    ip.run(f"%mkl load {folder / 'main.mkl'}")
    assert "image/svg+xml" in ip.out.published[0].data  # its diagram
    import mkl_notebook

    machines = mkl_notebook.notebook.session.current_session().machines
    assert {"main", "helper"} <= set(machines)
    assert repr(machines["main"]) == "<Machine main: 1 state, entry go, budget 3>"
    assert repr(mkl_notebook.load(folder / "helper.mkl")) == "<Machine helper: 1 state, entry a, budget 3>"
    error = ip.fails(f"%mkl load {folder / 'missing.mkl'}")
    assert "missing.mkl" in str(error)


def test_load_says_when_a_machine_calls_one_that_nothing_defines(ip: Cells, capsys: Any) -> None:
    path = ip.tmp / "lonely.mkl"
    path.write_text(
        "machine: lonely\nentry: go\nbudget: 3\nstates:\n"
        "  go: {call: nowhere, output: o, gates: [{when: otherwise, then: ok, to: END}]}\n",
        encoding="utf-8",
    )
    capsys.readouterr()
    ip.run(f"%mkl load {path}")
    printed = capsys.readouterr().out
    assert "line 5, column 8: error: state 'go' calls machine 'nowhere'" in printed


def test_models_lists_each_tier_with_where_its_model_was_set(
    ip: Cells, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    monkeypatch.setenv("MKL_MODEL_FAST", "ollama/llama3.2")
    ip.run("%mkl config balanced=openai/gpt-4o-mini")
    capsys.readouterr()
    ip.run("%mkl models")
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["fast", "ollama/llama3.2", "from", "environment"]
    assert lines[1].split()[:3] == ["balanced", "openai/gpt-4o-mini", "from"] and "%mkl config" in lines[1]
    assert lines[2] == "reasoning (not configured)"
    assert lines[3] == "judge     (each state's tier model)"
