"""One machine over many rows: ``mkl map``, ``%mkl map`` and ``mkl_notebook.map``.

Real components: the SQLite store, the scripted provider, a real IPython shell with real
widgets (clicked as a person would), pandas DataFrames, and the ``mkl`` command in a subprocess.
"""

from __future__ import annotations

import contextlib
import html
import json
import os
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import nbformat
import pandas as pd
import pytest
import yaml

import mkl_notebook
from mkl_notebook.app import batch, oracles
from mkl_notebook.app.errors import UsageProblem
from mkl_notebook.durable.stores import SQLiteStore
from mkl_notebook.lang.loader import load
from mkl_notebook.providers.scripted import oracle_from_script

from support import REFUND, REFUND_ASK, REFUND_SCRIPT, WIDGET_MIME, Cells, mkl_cli

GREETER = """\
machine: greeter
entry: greet
budget: 3
result: line
context:
  name: ""
states:
  greet:
    tool: shout
    input: { name: "{{name}}" }
    output: line
    gates:
      - { when: otherwise, then: ok, to: END }
"""
TICKETS = [{"id": f"T{n}", "ticket": f"Parcel A-{1000 + n} arrived broken"} for n in range(5)]


def _replies(store: Path, run_id: str) -> list[dict[str, Any]]:
    return [record for record in SQLiteStore(store).read(run_id) if record["t"] == "reply"]


# -- reading rows and naming their runs --------------------------------------------------------------


def test_rows_come_from_lists_data_frames_and_files(tmp_path: Path) -> None:
    rows = [{"name": "ada", "n": 1}, {"name": "bo", "n": 2}]
    assert batch.read_rows(rows) == rows
    assert batch.read_rows(pd.DataFrame(rows)) == rows  # numpy numbers become plain JSON numbers
    (tmp_path / "r.jsonl").write_text('{"name": "ada", "n": 1}\n\n{"name": "bo", "n": 2}\n', encoding="utf-8")
    assert batch.read_rows(tmp_path / "r.jsonl") == rows
    (tmp_path / "r.csv").write_text("name,n\nada,1\nbo,2\n", encoding="utf-8")
    assert batch.read_rows(str(tmp_path / "r.csv")) == [{"name": "ada", "n": "1"}, {"name": "bo", "n": "2"}]
    (tmp_path / "r.json").write_text(json.dumps(rows), encoding="utf-8")
    assert batch.read_rows(tmp_path / "r.json") == rows


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ('{"a": 1}\n[1, 2]\n', "r.jsonl, line 2: must be a JSON object, not list"),
        ('{"a": 1}\n{"a": \n', "r.jsonl, line 2: is not valid JSON"),
    ],
)
def test_a_bad_row_file_is_refused_naming_the_line(tmp_path: Path, content: str, message: str) -> None:
    (tmp_path / "r.jsonl").write_text(content, encoding="utf-8")
    with pytest.raises(UsageProblem, match=message.replace("[", r"\[")):
        batch.read_rows(tmp_path / "r.jsonl")


def test_bad_sources_say_what_rows_must_be(tmp_path: Path) -> None:
    with pytest.raises(UsageProblem, match="row 2 must be a mapping"):
        batch.read_rows([{"a": 1}, "two"])
    with pytest.raises(UsageProblem, match="must be a list of dicts, a pandas DataFrame"):
        batch.read_rows(42)
    with pytest.raises(UsageProblem, match="cannot be read"):
        batch.read_rows(tmp_path / "missing.jsonl")
    with pytest.raises(UsageProblem, match="row 1 holds a value JSON cannot carry"):
        batch.read_rows([{"x": float("inf")}])
    assert batch.read_rows(pd.DataFrame([{"x": 1.5}, {"x": None}])) == [{"x": 1.5}, {"x": None}]  # NaN: missing


def test_run_ids_come_from_a_key_or_from_the_content_and_repeat_alike() -> None:
    keyed = batch.plan_rows([{"id": "A 1"}, {"id": 2}], "b", "id")
    assert [row.run_id for row in keyed] == ["b-A_1", "b-2"]
    with pytest.raises(UsageProblem, match="rows 1 and 2 both make run id 'b-x'"):
        batch.plan_rows([{"id": "x"}, {"id": "x"}], "b", "id")
    with pytest.raises(UsageProblem, match="row 2 has no 'id'"):
        batch.plan_rows([{"id": "x"}, {"name": "y"}], "b", "id")
    rows = [{"a": 1}, {"a": 2}, {"a": 1}]
    first, second = batch.plan_rows(rows, "b"), batch.plan_rows(rows, "b")
    assert [r.run_id for r in first] == [r.run_id for r in second]  # running the rows again: the same runs
    assert first[2].run_id == first[0].run_id + ".2" and len({r.run_id for r in first}) == 3
    with pytest.raises(UsageProblem, match="batch id 'no spaces'"):
        batch.plan_rows(rows, "no spaces")


# -- running a batch -------------------------------------------------------------------------------------


def test_an_interrupted_batch_goes_on_where_it_stopped(tmp_path: Path) -> None:
    """Row 3's tool call is cut off: the batch stops, rows 1-2 are journaled, and at most the row that was
    taken up next ran; the next time, what finished replays with no calls and only the rest run."""
    machine = load(GREETER)
    store = SQLiteStore(tmp_path / "runs.sqlite")
    names = ("Ada", "Bo", "Cy", "Di", "Ed")
    calls: list[str] = []
    interrupt = {"Cy"}

    @mkl_notebook.tool(effect="read", name="shout")
    def shout(name: str) -> str:
        calls.append(name)
        if name in interrupt:
            raise KeyboardInterrupt  # the call in flight is lost, as in a crash
        return name.upper() + "!"

    def oracle() -> Any:
        return oracles.choose(script={"llm": {}})

    rows = batch.plan_rows([{"name": name} for name in names], "greet")
    with pytest.raises(KeyboardInterrupt):
        list(batch.run_rows(batch.RowStart(machine, store, oracle), rows, concurrency=1))
    assert calls[:3] == ["Ada", "Bo", "Cy"] and "Ed" not in calls  # the batch stopped: Ed never started
    ran_before = set(calls) - {"Cy"}
    interrupt.clear()
    calls.clear()
    again = batch.plan_rows([{"name": name} for name in names], "greet")
    finished = sorted(
        (row for row in batch.run_rows(batch.RowStart(machine, store, oracle), again) if row), key=lambda r: r.index
    )
    assert [row.outcome.result.result for row in finished if row.outcome] == ["ADA!", "BO!", "CY!", "DI!", "ED!"]
    assert sorted(calls) == sorted(set(names) - ran_before)  # nothing that had finished was called again
    made = {row.input["name"]: row.outcome.calls["made"] for row in finished if row.outcome}
    assert made == {name: 0 if name in ran_before else 1 for name in names}


def test_a_row_that_cannot_run_says_why_and_the_others_go_on(tmp_path: Path) -> None:
    machine = load(GREETER)
    store = SQLiteStore(tmp_path / "runs.sqlite")
    rows = batch.plan_rows([{"name": "Ada"}, {"name": "Bo"}], "g")
    oracle = lambda: oracle_from_script({"tools": {"shout": ["HI"]}})  # noqa: E731
    with store.lease(rows[1].run_id):  # another process holds row 2's run
        finished = [row for row in batch.run_rows(batch.RowStart(machine, store, oracle), rows) if row]
    by_row = {row.index: row for row in finished}
    assert by_row[0].status == "done"
    assert by_row[1].status == "error" and "being advanced by another process" in (by_row[1].error or "")
    assert batch.overall(finished) == "error" and batch.counts(finished) == {"done": 1, "error": 1}


# -- the command line ---------------------------------------------------------------------------------------


def _mkl(cwd: Path, *args: str) -> tuple[int, dict[str, Any], str]:
    done = subprocess.run(
        [sys.executable, "-m", "mkl_notebook.cli", *args], cwd=cwd, capture_output=True, text=True, timeout=120
    )
    assert done.stderr == "" or done.returncode != 0, done.stderr
    return done.returncode, json.loads(done.stdout.strip().splitlines()[-1]), done.stdout


def _batch_notebook(folder: Path) -> Path:
    """A notebook mapping the refund machine over three tickets, each row's run waiting for a person, executed as
    JupyterLab runs it without the extension (the outputs carry the checkpoints)."""
    from lab_client import run_all

    notebook = nbformat.v4.new_notebook()
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    notebook.cells = [
        nbformat.v4.new_code_cell("%load_ext mkl_notebook"),
        nbformat.v4.new_code_cell("%%mkl\n" + REFUND),
        nbformat.v4.new_code_cell(f"rows = {TICKETS[:3]!r}"),
        nbformat.v4.new_code_cell(f"b = %mkl map refund --over $rows --key id --script {REFUND_SCRIPT} --hitl"),
    ]
    path = folder / "batch.ipynb"
    nbformat.write(notebook, path)
    run_all(path)
    return path


def test_mkl_map_over_jsonl_prints_the_table_and_a_status_line_with_counts(tmp_path: Path) -> None:
    (tmp_path / "refund.mkl").write_text(REFUND, encoding="utf-8")
    (tmp_path / "rows.jsonl").write_text("".join(json.dumps(row) + "\n" for row in TICKETS), encoding="utf-8")
    args = ("map", "refund.mkl", "--over", "rows.jsonl", "--key", "id", "--script", str(REFUND_SCRIPT))
    code, line, out = _mkl(tmp_path, *args)
    assert (code, line["status"], line["counts"]) == (0, "done", {"done": 5})
    assert [row["run"] for row in line["rows"]] == [f"refund-T{n}" for n in range(5)]
    assert all(row["calls"] == {"made": 4, "replayed": 0} for row in line["rows"])
    assert out.startswith("Batch — 5 rows: 5 done\nrow  run")
    code, line, _ = _mkl(tmp_path, *args)  # again: every row replays from its journal
    assert all(row["calls"] == {"made": 0, "replayed": 4} for row in line["rows"])

    code, line, out = _mkl(tmp_path, *args, "--hitl", "--id", "ask")
    assert (code, line["status"], line["counts"]) == (3, "suspended", {"suspended": 5})
    assert {row["ask"] for row in line["rows"]} == {REFUND_ASK} and all(row["question_id"] for row in line["rows"])
    code, line, _ = _mkl(tmp_path, "map", "refund.mkl", "--over", "rows.jsonl", "--key", "nope")
    assert code == 2 and "--key nope: row 1 has no 'nope'" in line["error"]


COUNTING_TOOLS = """\
import gc, json, pathlib, threading

import mkl_notebook
from mkl_notebook.durable.runs import Outcome

_lock = threading.Lock()
_calls = [0]


@mkl_notebook.tool(effect="read")
def shout(name: str) -> str:
    with _lock:
        _calls[0] += 1
        if _calls[0] % 25 == 0:  # how many rows' outcomes the batch holds while it runs
            alive = sum(1 for thing in gc.get_objects() if type(thing) is Outcome)
            seen = pathlib.Path("alive.json")
            before = json.loads(seen.read_text()) if seen.exists() else []
            seen.write_text(json.dumps([*before, alive]))
    return name.upper() + "!"
"""


def test_mkl_map_holds_the_rows_running_not_every_rows_outcome(tmp_path: Path) -> None:
    """Outcomes alive while 400 rows run, 4 at a time: a handful (the rows running and the one being counted),
    not one per row finished; the status line's counts are what the store holds, and a batch of more rows than
    its table shows prints the first of them and says where the rest are."""
    (tmp_path / "greeter.mkl").write_text(GREETER, encoding="utf-8")
    (tmp_path / "tools.py").write_text(COUNTING_TOOLS, encoding="utf-8")
    (tmp_path / "rows.jsonl").write_text("".join(f'{{"name": "n{n}"}}\n' for n in range(400)), encoding="utf-8")
    code, line, out = _mkl(
        tmp_path, "map", "greeter.mkl", "--over", "rows.jsonl", "--tools", "tools.py", "--concurrency", "4"
    )
    alive = json.loads((tmp_path / "alive.json").read_text())
    assert len(alive) == 16 and max(alive) <= 12, alive  # old: the 16th count saw ~400
    stored = Counter(run.status for run in SQLiteStore(tmp_path / ".mkl" / "runs.sqlite").runs())
    assert (code, line["counts"], dict(stored)) == (0, {"done": 400}, {"done": 400})
    assert [row["result"] for row in line["rows"]] == [f"N{n}!" for n in range(400)]  # every row, in row order
    lines = out.splitlines()
    assert lines[0] == "Batch — 400 rows: 400 done · 0 tokens · cost —"
    assert [(row.split()[0], row.split()[2]) for row in lines[2:52]] == [(str(n), "done") for n in range(1, 51)]
    assert len(lines) == 1 + 1 + 50 + 1 + 1  # caption, head, 50 rows, where the rest are, the status line
    assert lines[-2] == "350 more rows: the status line below holds them; `mkl runs` lists every run."


def test_a_bad_line_far_into_the_rows_is_refused_before_any_row_runs(tmp_path: Path) -> None:
    """The rows are read a line at a time, but all of them are checked before the first row's run starts."""
    (tmp_path / "greeter.mkl").write_text(GREETER, encoding="utf-8")
    (tmp_path / "tools.py").write_text(COUNTING_TOOLS, encoding="utf-8")
    good = "".join(f'{{"name": "n{n}"}}\n' for n in range(30))
    (tmp_path / "rows.jsonl").write_text(good + '{"name": \n', encoding="utf-8")
    code, line, _ = _mkl(tmp_path, "map", "greeter.mkl", "--over", "rows.jsonl", "--tools", "tools.py")
    assert code == 2 and "--over rows.jsonl, line 31: is not valid JSON" in line["error"]
    store = tmp_path / ".mkl" / "runs.sqlite"
    assert not store.exists() or SQLiteStore(store).runs() == []


def test_a_large_batchs_tally_keeps_the_rows_not_done_first_in_order_and_counts_the_rest(tmp_path: Path) -> None:
    machine = load(GREETER)
    store = SQLiteStore(tmp_path / "runs.sqlite")
    rows = batch.plan_rows([{"name": f"n{n}"} for n in range(10)], "g")
    oracle = lambda: oracle_from_script({"tools": {"shout": ["HI"]}})  # noqa: E731
    tally = batch.Tally(total=10, keep=3)
    with contextlib.ExitStack() as held:
        for index in (1, 4, 7, 8):  # held by another process: these four rows cannot run
            held.enter_context(store.lease(rows[index].run_id))
        for row in batch.run_rows(batch.RowStart(machine, store, oracle), rows, concurrency=3):
            if row is not None:
                tally.add(row)
    assert tally.counts == {"done": 6, "error": 4} and tally.status == "error"
    assert [(row["row"], row["status"]) for row in tally.rows()] == [(2, "error"), (5, "error"), (8, "error")]
    assert tally.left_out == 7  # the six done, and the last error past the three kept
    assert tally.spent() == {"tokens": 0, "cost_usd": None}  # a tool's call has no price


# -- in a notebook --------------------------------------------------------------------------------------------


def test_map_over_a_data_frame_with_its_progress_bar_table_and_one_form_for_every_question(ip: Cells) -> None:
    ip.define(REFUND)
    ip.shell.user_ns["tickets"] = pd.DataFrame(TICKETS[:4])
    ip.out.clear()
    ip.run(f"b = %mkl map refund --over $tickets --key id --script {REFUND_SCRIPT} --hitl")
    b = ip.shell.user_ns["b"]
    assert (b.progress.n, b.progress.total) == (4, 4)  # the progress bar reached every row
    assert any(WIDGET_MIME in p.data and "refund: rows" in p.data["text/plain"] for p in ip.out.published)
    table = next(p.data for p in ip.out.published if str(p.data.get("text/plain", "")).startswith("Batch —"))
    assert table["text/plain"].splitlines()[0] == "Batch — 4 rows: 4 suspended"
    assert "<table><caption>Batch — 4 rows: 4 suspended</caption>" in table["text/html"]
    form = b.form
    assert [row.run.id for row in form.rows] == [f"refund-T{n}" for n in range(4)]
    first = form.rows[0]
    draft = "Hello! Your order A-1001 qualifies: we will refund it today."
    assert first.text == REFUND_ASK and first.about == draft  # the draft the gate decided on
    assert draft in first.controls[2].value and "A-1000" not in first.controls[2].value  # not the input row

    approve = first.approve
    approve.click()
    approve.click()  # a double click is one reply
    form.row("refund-T1").approve.click()
    third = form.row("refund-T2")
    third.note.value = "no refund for this one"
    third.reject.click()
    store = ip.tmp / ".mkl" / "runs.sqlite"
    answered = {run_id: _replies(store, run_id) for run_id in ("refund-T0", "refund-T1", "refund-T2", "refund-T3")}
    assert [len(replies) for replies in answered.values()] == [1, 1, 1, 0]  # each journaled once
    assert [(replies[0]["value"], replies[0].get("note")) for replies in list(answered.values())[:3]] == [
        ("approve", None),
        ("approve", None),
        ("reject", "no refund for this one"),  # the decision, and the text typed beside it as its note
    ]
    for replies in list(answered.values())[:3]:
        assert replies[0]["via"] == "queue" and replies[0]["by"] and replies[0]["time"] > 0
        assert replies[0]["question"]  # bound to the question the row showed
    latest = [p.data for p in ip.out.published if str(p.data.get("text/plain", "")).startswith("Batch —")][-1]
    assert latest["text/plain"].splitlines()[0] == "Batch — 4 rows: 3 done, 1 suspended"  # redrawn as they went
    assert b.counts == {"done": 3, "suspended": 1}

    frame = b.frame()
    assert list(frame["run"]) == [f"refund-T{n}" for n in range(4)] and list(frame["status"]).count("done") == 3

    ip.out.clear()
    ip.run(f"b2 = %mkl map refund --over $tickets --key id --script {REFUND_SCRIPT} --hitl")
    again = ip.shell.user_ns["b2"]
    assert all(row.outcome.calls["made"] == 0 for row in again.rows if row.outcome)  # re-running makes 0 calls
    assert [len(row.run.pending or {}) > 0 for row in again.form.rows] == [True]  # only T3 still asks

    form2 = again.form
    form2.approve_shown.click()
    assert len(_replies(store, "refund-T3")) == 1 and again.counts == {"done": 4}


def test_mkl_notebook_map_reads_a_jsonl_file_and_gives_the_results(ip: Cells) -> None:
    path = ip.tmp / "names.jsonl"
    path.write_text('{"name": "ada"}\n{"name": "bo"}\n', encoding="utf-8")
    ip.define(GREETER)
    script = ip.script("shout.yaml", {"tools": {"shout": {"ada": "ADA!", "bo": "BO!"}}})
    b = mkl_notebook.map("greeter", str(path), script=str(script))
    assert b.results == ["ADA!", "BO!"] and repr(b) == "<Batch greeter: 2 rows (2 done)>"
    assert yaml.safe_load(script.read_text()) == {"tools": {"shout": {"ada": "ADA!", "bo": "BO!"}}}


def test_the_batch_forms_place_says_what_was_answered_and_a_rerun_of_the_cell_says_it_again(ip: Cells) -> None:
    """As JupyterLab runs it (the kernel knows the cell): once every row is answered the form's place says
    who answered what, and running the cell again shows the same words there, from the journal."""
    from mkl_notebook.notebook import session as session_module

    notebook = session_module.current_notebook()
    executions = iter(range(1, 100))
    notebook.current_cell = lambda: ("batch-cell", f"execution-{next(executions)}")
    ip.define(REFUND)
    ip.shell.user_ns["tickets"] = TICKETS[:2]
    cell = f"b = %mkl map refund --over $tickets --key id --script {REFUND_SCRIPT} --hitl"
    ip.out.clear()
    ip.run(cell)
    progress = [p for p in ip.out.published if p.update and p.data.get("text/plain") == "refund: 2 rows run"]
    assert progress, "the progress bar gives way to a line without timings"
    place = next(p for p in ip.out.published if "of this batch wait" in p.data.get("text/plain", ""))
    assert WIDGET_MIME not in place.data  # printed for every reader; the form's widget is the next output
    form_output = ip.out.published[ip.out.published.index(place) + 1]
    assert form_output.data[WIDGET_MIME]["model_id"] == ip.shell.user_ns["b"].form.widget.model_id
    assert place.data["text/plain"].startswith("2 questions of this batch wait for a person: the form is here")
    assert f"\n  mkl resume --id refund-T0 --script {REFUND_SCRIPT} --question q-" in place.data["text/plain"]
    ip.shell.user_ns["b"].form.approve_shown.click()
    said = [p for p in ip.out.published if p.display_id == place.display_id and p.update][-1].data["text/plain"]
    assert said.startswith("Answered in this cell's form:\nrefund-T0: Answered 'approve' (by ")
    emptied = [p for p in ip.out.published if p.display_id == form_output.display_id and p.update][-1].data
    assert emptied == {"text/plain": ""}  # the answered form leaves the file's outputs
    assert "\nrefund-T1: Answered 'approve' (by " in said and "via queue" in said

    ip.out.clear()
    ip.run(cell)
    again = [p.data["text/plain"] for p in ip.out.published if p.data.get("text/plain", "").startswith("Answered in")]
    assert again == [said]  # the same words, in the same place, from the journal
    assert all(row.outcome.calls["made"] == 0 for row in ip.shell.user_ns["b"].rows if row.outcome)


def test_a_row_answered_by_another_process_says_so_on_its_next_click_and_records_nothing(ip: Cells) -> None:
    ip.define(REFUND)
    ip.shell.user_ns["tickets"] = TICKETS[:2]
    ip.run(f"b = %mkl map refund --over $tickets --key id --script {REFUND_SCRIPT} --hitl")
    row = ip.shell.user_ns["b"].form.rows[0]
    answered = mkl_cli(
        ip.tmp,
        "resume",
        "--id",
        row.run.id,
        "--question",
        str(row.question_id),
        "--reply",
        "reject",
        "--as",
        "bob",
        "--script",
        str(REFUND_SCRIPT),
    )
    assert answered[0] == 0, answered
    form = ip.shell.user_ns["b"].form
    row.approve.click()  # too late: bob answered it from a terminal
    assert "Answered 'reject' (by " in html.unescape(form.status.value)
    assert "claims bob) · " in html.unescape(form.status.value)  # the name given with --as is a claim
    assert [reply["value"] for reply in _replies(ip.tmp / ".mkl" / "runs.sqlite", row.run.id)] == ["reject"]
    assert row.run.status == "done" and form.row(row.run.id) is None  # the row left the queue


def test_a_row_whose_run_asks_again_shows_the_next_question_in_its_place(ip: Cells) -> None:
    tutorial = Path(__file__).resolve().parent.parent / "notebooks" / "data"
    ip.define((tutorial / "refund.mkl").read_text(encoding="utf-8"))
    ip.shell.user_ns["tickets"] = TICKETS[:2]
    ip.run(f"b = %mkl map refund --over $tickets --key id --script {tutorial / 'refund.script.yaml'} --hitl")
    form = ip.shell.user_ns["b"].form
    first = form.rows[0].text
    form.rows[0].approve.click()
    again = form.row("refund-T0")
    assert again is not None and again.run.status == "suspended" and again.text != first  # the next question
    assert not again.approve.disabled and again.question_id == again.run.question_id
    clicks = 0
    while form.rows and clicks < 10:
        form.rows[0].approve.click()
        clicks += 1
    assert ip.shell.user_ns["b"].counts == {"done": 2}
    replies = [_replies(ip.tmp / ".mkl" / "runs.sqlite", f"refund-T{n}") for n in range(2)]
    assert [len(given) for given in replies] == [2, 2] and len({r["question"] for r in replies[0]}) == 2


def _waiting_count(form: Any) -> str:
    return html.unescape(form.header.value).split(".")[0].removeprefix("<p><strong>")


def test_the_review_queue_drops_answered_rows_and_approves_exactly_the_rows_shown(ip: Cells) -> None:
    """Thirty questions in pages of 25: a row answered here, or by any other path, leaves the queue and the
    count follows; a filter narrows the rows, and 'Approve the N shown' journals one answer with the note per
    row shown, and none for the rows the filter hides."""
    ip.define(REFUND)
    ip.shell.user_ns["tickets"] = [{"id": f"T{n}", "ticket": f"Parcel A-{1000 + n} arrived broken"} for n in range(30)]
    ip.run(f"b = %mkl map refund --over $tickets --key id --script {REFUND_SCRIPT} --hitl")
    b = ip.shell.user_ns["b"]
    form = b.form
    store = ip.tmp / ".mkl" / "runs.sqlite"
    assert _waiting_count(form) == "30 questions wait for a person"
    assert len(form.shown) == 25 and form.approve_shown.description == "Approve the 25 shown"
    assert sum(1 for row in form.rows if row.controls) == 25  # widgets for the page shown only

    form.row("refund-T3").approve.click()
    assert _waiting_count(form) == "29 questions wait for a person" and form.row("refund-T3") is None
    assert "refund-T3" not in [row.run.id for row in form.rows]
    printed = [p.data["text/plain"] for p in ip.out.published if "of this batch wait" in p.data.get("text/plain", "")]
    assert printed[-1].startswith("29 questions of this batch wait") and "refund-T3 asks" not in printed[-1]
    b.runs["refund-T4"].submit("reject")  # another path: the session tells the queue the run moved
    assert _waiting_count(form) == "28 questions wait for a person" and form.row("refund-T4") is None
    tables = [p.data["text/plain"] for p in ip.out.published if p.data.get("text/plain", "").startswith("Batch —")]
    assert tables[-1].splitlines()[0] == "Batch — 30 rows: 28 suspended, 2 done"  # the table followed too

    form.filter.value = "T1"  # T1, T10 … T19
    shown = [row.run.id for row in form.shown]
    assert sorted(shown) == sorted(["refund-T1", *(f"refund-T1{n}" for n in range(10))])
    assert form.approve_shown.description == "Approve the 11 shown"
    form.bulk_note.value = "checked in the review"
    form.approve_shown.click()
    answers = {f"refund-T{n}": _replies(store, f"refund-T{n}") for n in range(30)}
    approved = {run_id: given for run_id, given in answers.items() if given and given[0]["value"] == "approve"}
    assert sorted(approved) == sorted(["refund-T3", *shown])  # exactly the rows shown, and the one clicked
    for run_id in shown:
        assert [(r["value"], r.get("note"), r["via"]) for r in answers[run_id]] == [
            ("approve", "checked in the review", "queue")
        ]
    assert sum(len(given) for given in answers.values()) == 13  # nothing for the rows the filter hid
    assert _waiting_count(form) == "17 questions wait for a person; 0 match the filter"
    form.filter.value = ""
    assert len(form.rows) == 17 and b.counts == {"done": 13, "suspended": 17}
    form.sort.value = "run"
    assert [row.run.id for row in form.rows] == sorted(row.run.id for row in form.rows)


def test_mkl_pending_queue_shows_every_waiting_run_in_one_review_queue(ip: Cells) -> None:
    ip.define(REFUND)
    ip.shell.user_ns["tickets"] = TICKETS[:3]
    ip.run(f"b = %mkl map refund --over $tickets --key id --script {REFUND_SCRIPT} --hitl")
    ip.run("q = %mkl pending --queue")
    queue = ip.shell.user_ns["q"]
    assert sorted(row.run.id for row in queue.rows) == ["refund-T0", "refund-T1", "refund-T2"]
    queue.row("refund-T1").reject.click()
    assert _waiting_count(queue) == "2 questions wait for a person"
    assert [r["value"] for r in _replies(ip.tmp / ".mkl" / "runs.sqlite", "refund-T1")] == ["reject"]
    batch_form = ip.shell.user_ns["b"].form
    assert batch_form.row("refund-T1") is None  # the batch's own queue follows the run too


def test_a_queue_made_by_hand_follows_its_runs_and_a_late_click_answers_nothing(ip: Cells) -> None:
    """A review queue made of runs' handles learns that a run moved from the notebook, like every view: when
    another path answers a row's question, the row leaves at once and the counts say so; a click on its button,
    drawn before, journals nothing. A reply that comes late through the queue's own road (its run answered in
    a store the notebook does not follow) says who answered, and journals nothing either."""
    from mkl_notebook.notebook.review import ReviewQueue
    from mkl_notebook.notebook.session import current_notebook

    ip.define(REFUND)
    ip.shell.user_ns["tickets"] = TICKETS[:3]
    ip.run(f"b = %mkl map refund --over $tickets --key id --script {REFUND_SCRIPT} --hitl")
    b = ip.shell.user_ns["b"]
    moves: list[str] = []
    runs = [b.runs["refund-T0"], b.runs["refund-T1"], b.runs["refund-T2"]]
    queue = ReviewQueue(runs, lambda: moves.append("moved"), None, current_notebook())
    row = queue.row("refund-T0")
    assert row is not None and row.approve is not None
    button = row.approve
    mkl_notebook.get_run("refund-T0").submit("reject", question=row.question_id)  # another path, first
    assert queue.row("refund-T0") is None and [r.run.id for r in queue.rows] == ["refund-T1", "refund-T2"]
    assert moves == ["moved"] and "2 questions wait" in queue.header.value
    button.click()
    assert [r["value"] for r in _replies(ip.tmp / ".mkl" / "runs.sqlite", "refund-T0")] == ["reject"]

    late = queue.row("refund-T1")
    assert late is not None
    other = subprocess.run(  # another process answers it: nobody in this kernel is told
        [
            sys.executable,
            "-m",
            "mkl_notebook.cli",
            "resume",
            "--id",
            "refund-T1",
            "--script",
            str(REFUND_SCRIPT),
            "--question",
            str(late.question_id),
            "--reply",
            "reject",
        ],
        cwd=ip.tmp,
        capture_output=True,
        text=True,
        check=False,
    )
    assert other.returncode == 0, other.stdout + other.stderr
    assert queue.answer(late, "approve") is False
    said = html.unescape(queue.status.value)
    assert "refund-T1" in said and "'reject'" in said and "Not sent" not in said, said
    assert [r["value"] for r in _replies(ip.tmp / ".mkl" / "runs.sqlite", "refund-T1")] == ["reject"]
    assert queue.row("refund-T1") is None


def test_a_machine_of_tools_alone_needs_no_model(tmp_path: Path) -> None:
    (tmp_path / "greeter.mkl").write_text(GREETER, encoding="utf-8")
    (tmp_path / "tools.py").write_text(
        "import mkl_notebook\n\n@mkl_notebook.tool(effect='read')\ndef shout(name: str) -> str:\n"
        "    return name.upper() + '!'\n",
        encoding="utf-8",
    )
    (tmp_path / "rows.jsonl").write_text('{"name": "ada"}\n{"name": "bo"}\n', encoding="utf-8")
    env_free = {key: value for key, value in os.environ.items() if not key.startswith(("MKL_", "OPENAI_"))}
    done = subprocess.run(
        [sys.executable, "-m", "mkl_notebook.cli", "map", "greeter.mkl", "--over", "rows.jsonl", "--tools", "tools.py"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        env=env_free,
    )
    line = json.loads(done.stdout.strip().splitlines()[-1])
    assert (done.returncode, line["counts"]) == (0, {"done": 2}), done.stderr
    assert [row["result"] for row in line["rows"]] == ["ADA!", "BO!"]


def _printed_questions(notebook: nbformat.NotebookNode) -> str:
    """What the batch cell prints where its form asks (the text a reader without a kernel sees)."""
    marked = [
        output
        for output in notebook.cells[3].outputs
        if "application/vnd.mkl.batch-form+json" in output.get("data", {})
    ]
    assert len(marked) == 1
    return str(marked[0]["data"]["text/plain"])


def test_a_saved_notebook_carries_its_batch_and_a_terminal_answers_a_row_in_the_file(tmp_path: Path) -> None:
    """Executed as JupyterLab runs it (without the extension, outputs carry the checkpoints): the file lists
    every row's run, and `mkl resume NOTEBOOK --run ROW` answers one row's question inside the file."""
    from lab_client import run_all

    from mkl_notebook.checkpoints import notebook_file as nbfile
    from mkl_notebook.checkpoints.envelope import BATCH_MIME_TYPE

    path = _batch_notebook(tmp_path)
    outputs = nbformat.read(path, as_version=4).cells[3].outputs
    table = next(output for output in outputs if BATCH_MIME_TYPE in output.get("data", {}))
    assert [entry["run_id"] for entry in table["data"][BATCH_MIME_TYPE]] == ["refund-T0", "refund-T1", "refund-T2"]
    runs = {run.run_id: run for run in nbfile.embedded_runs(path)}
    assert sorted(runs) == ["refund-T0", "refund-T1", "refund-T2"]

    secret = SQLiteStore(tmp_path / ".mkl" / "runs.sqlite").read("refund-T0")[0]["secret"]
    shutil.rmtree(tmp_path / ".mkl")  # another machine, no store: the kernel takes the rows up from the file
    run_all(path)
    assert SQLiteStore(tmp_path / ".mkl" / "runs.sqlite").read("refund-T0")[0]["secret"] == secret

    code, listing, _ = _mkl(tmp_path, "runs", "batch.ipynb")
    assert sorted((run["run"], run["status"]) for run in listing["runs"]) == [
        (f"refund-T{n}", "suspended") for n in range(3)
    ]
    question = next(run["question_id"] for run in listing["runs"] if run["run"] == "refund-T1")
    printed = _printed_questions(nbformat.read(path, as_version=4))
    assert question in printed and "mkl resume batch.ipynb --run refund-T1" in printed  # the file's own command
    store = tmp_path / "elsewhere.sqlite"  # another person's terminal: not the kernel's store
    code, line, _ = _mkl(
        tmp_path,
        "resume",
        "batch.ipynb",
        "--run",
        "refund-T1",
        "--question",
        question,
        "--reply",
        "approve",
        "--store",
        str(store),
        "--script",
        str(REFUND_SCRIPT),
        "--trust-file",
    )
    assert (code, line["status"]) == (0, "done")
    saved = nbformat.read(path, as_version=4)
    entries = next(o for o in saved.cells[3].outputs if BATCH_MIME_TYPE in o.get("data", {}))["data"][BATCH_MIME_TYPE]
    assert [entry["status"] for entry in entries] == ["suspended", "done", "suspended"]  # that row's entry alone
    printed = _printed_questions(saved)
    assert "2 questions of this batch wait" in printed and question not in printed and "refund-T0 asks" in printed
    table = next(o for o in saved.cells[3].outputs if BATCH_MIME_TYPE in o.get("data", {}))["data"]["text/plain"]
    lines = table.splitlines()
    assert lines[0] == "Batch — 3 rows: 2 suspended, 1 done"  # the table says what the file now holds
    assert [line.split()[:3] for line in lines[2:]] == [
        ["1", "refund-T0", "suspended"],
        ["2", "refund-T1", "done"],
        ["3", "refund-T2", "suspended"],
    ]
    assert saved.metadata["mkl"]["runs"]["refund-T1"]["status"] == "done"
    code, listing, _ = _mkl(tmp_path, "runs", "batch.ipynb")
    assert {run["run"]: run["status"] for run in listing["runs"]} == {
        "refund-T0": "suspended",
        "refund-T1": "done",
        "refund-T2": "suspended",
    }
    assert listing["runs"][-1]["run"] == "refund-T1"  # the most recently changed is listed last


def test_a_batch_output_that_lists_a_run_twice_is_answered_once_and_the_file_says_what_the_store_says(
    tmp_path: Path,
) -> None:
    """A received notebook whose batch output lists one row's run twice (edited, or merged badly): answering that
    run from the file journals the reply once, and the file then lists it as the store holds it (done), never
    'suspended' beside a store that says done."""
    from mkl_notebook.checkpoints.envelope import BATCH_MIME_TYPE

    from support import mkl_cli

    path = _batch_notebook(tmp_path)
    edited = nbformat.read(path, as_version=4)
    table = next(o for o in edited.cells[3].outputs if BATCH_MIME_TYPE in o.get("data", {}))
    entries = table["data"][BATCH_MIME_TYPE]
    entries[2] = entries[1]  # refund-T1 twice, refund-T2 gone
    nbformat.write(edited, path)
    code, listing, _, err = mkl_cli(tmp_path, "runs", "batch.ipynb")
    question = next(run["question_id"] for run in listing["runs"] if run["run"] == "refund-T1")
    store = tmp_path / "elsewhere.sqlite"
    code, line, _, err = mkl_cli(
        tmp_path, "resume", "batch.ipynb", "--run", "refund-T1", "--question", question, "--reply", "approve",
        "--store", str(store), "--script", str(REFUND_SCRIPT), "--trust-file",
    )  # fmt: skip
    assert (code, line.get("status")) == (0, "done"), err
    replies = [record for record in SQLiteStore(store).read("refund-T1") if record["t"] == "reply"]
    assert len(replies) == 1
    code, listing, _, err = mkl_cli(tmp_path, "runs", "batch.ipynb")
    assert code == 0, err
    assert {run["run"]: run["status"] for run in listing["runs"]}["refund-T1"] == "done"
