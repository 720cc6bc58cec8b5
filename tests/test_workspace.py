"""The workspace's one road per use case, as a person meets it: reading a run changes nothing, a reply is read
once, a click parses nothing it already has, and every command printed pastes as one."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

import pytest
from IPython.core.interactiveshell import InteractiveShell

import mkl_notebook
import mkl_notebook.notebook.session
from mkl_notebook import cli
from mkl_notebook.durable import runs as durable_runs
from mkl_notebook.durable.stores import SQLiteStore

from support import REFUND, REFUND_SCRIPT, Cells, fetch_page_interrupted_once, mkl_cli, record_presented, store_rows

INTERRUPTIBLE = """
machine: slow
entry: draft
budget: 5
tools:
  - { name: fetch_page, description: a tool a person interrupts }
states:
  draft:
    structure: one line
    prompt: "Write a line."
    output: line
    gates: [{ when: otherwise, then: ok, to: fetch }]
  fetch:
    tool: fetch_page
    output: page
    gates: [{ when: otherwise, then: ok, to: END }]
"""


def _interrupted(ip: Cells) -> tuple[Path, list[str]]:
    """Run ``slow`` until its tool is interrupted: the journal holds the draft's answer and no ending. The
    tool's calls are counted (after the interrupt it would answer), so that a read that runs the run shows."""
    calls = fetch_page_interrupted_once()
    ip.define(INTERRUPTIBLE)
    script = ip.script("slow.yaml", {"llm": {"produce": ["A line."]}})
    ip.fails(f"%mkl run slow --script {script}")
    return ip.tmp / ".mkl" / "runs.sqlite", calls


def test_trace_and_visits_of_an_interrupted_run_in_a_notebook_call_and_record_nothing(
    ip: Cells, capsys: pytest.CaptureFixture[str]
) -> None:
    store, calls = _interrupted(ip)
    before = store_rows(store)
    assert [row for row in before if '"t":"finish"' in str(row) or '"t":"suspend"' in str(row)] == []
    ip.out.clear()
    ip.run("%mkl trace slow")
    ip.run("%mkl visits slow")
    assert calls == ["fetch"]  # the tool was not called again
    assert store_rows(store) == before  # nothing was appended
    trace = ip.out.published[0].data["text/plain"]
    assert "draft" in trace and "A line." in trace  # the step the journal holds
    visits = ip.out.published[1].data["text/plain"]
    assert "draft" in visits and "fetch" in visits


def test_trace_of_an_interrupted_run_from_the_command_line_records_nothing(ip: Cells) -> None:
    store, calls = _interrupted(ip)
    before = store_rows(store)
    code, status, out, err = mkl_cli(ip.tmp, "trace", "--id", "slow")
    assert code == 0, err
    assert store_rows(store) == before
    assert calls == ["fetch"]
    assert "draft" in out and "A line." in out
    assert status["status"] == "suspended" and status["error"].startswith("interrupted")
    assert status["at"] == "fetch"  # where the journal ends: resuming goes on from there


def test_a_reply_from_the_command_line_reads_the_journal_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    machine = tmp_path / "refund.mkl"
    machine.write_text(REFUND, encoding="utf-8")
    script = ["--script", str(REFUND_SCRIPT)]
    assert cli.main(["run", str(machine), "--id", "r1", "--hitl", "--quiet", *script]) == 3
    question = durable_runs.read_run("r1", SQLiteStore(tmp_path / ".mkl" / "runs.sqlite").read("r1"))
    question_id = question.result.question_id("r1")
    whole_reads: list[str] = []
    read = SQLiteStore.read

    def counting_read(self: SQLiteStore, run_id: str, since: int = 0) -> list[dict[str, Any]]:
        if since == 0:
            whole_reads.append(run_id)
        return read(self, run_id, since)

    monkeypatch.setattr(SQLiteStore, "read", counting_read)
    args = ["resume", "--id", "r1", "--question", str(question_id), "--reply", "approve", "--quiet", *script]
    assert cli.main(args) == 0
    assert whole_reads == ["r1"]


def test_a_click_parses_no_machine_it_already_has(
    shell: InteractiveShell, load_mkl: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As a kernel that shows a waiting run its cells did not define (``%mkl pending`` after a restart): the
    machine the run pinned is read once to show it, and the click that answers it reads it no more."""
    views = record_presented(load_mkl(lambda *args, **kwargs: None), monkeypatch)
    for cell in ("%%mkl\n" + REFUND, f"%mkl run refund --script {REFUND_SCRIPT}"):
        assert shell.run_cell(cell).success
    session = mkl_notebook.notebook.session.current_session()
    session.machines.clear()  # a new kernel: the defining cell has not run
    session.runs.clear()
    assert shell.run_cell("%mkl pending").success
    run = mkl_notebook.get_run("refund")
    assert run.pending is not None and run.machine is None
    question = run.question_id
    parsed: list[str] = []
    load = durable_runs.load

    def counting_load(source: str, *args: Any, **kwargs: Any) -> Any:
        parsed.append(source[:40])
        return load(source, *args, **kwargs)

    monkeypatch.setattr(durable_runs, "load", counting_load)
    views[-1].current_form.approve.click()
    assert run.answer_to(question) is not None  # answered (the run then waits for a model this kernel lacks)
    assert parsed == []


def test_commands_name_a_store_with_a_space_so_that_they_paste(tmp_path: Path) -> None:
    folder = tmp_path / "my dir"
    folder.mkdir()
    machine = tmp_path / "refund.mkl"
    machine.write_text(REFUND, encoding="utf-8")
    store = str(folder / "runs.sqlite")
    code, _, out, _ = mkl_cli(
        tmp_path, "run", str(machine), "--id", "r1", "--hitl", "--store", store, "--script", str(REFUND_SCRIPT)
    )
    assert code == 3
    listed_code, _, listed, _ = mkl_cli(tmp_path, "runs", store)
    assert listed_code == 0
    for text in (out, listed):
        commands = [line.strip() for line in text.splitlines() if "mkl resume" in line and line[0] != "{"]
        assert commands, text
        for command in commands:
            words = shlex.split(command[command.index("mkl resume") :])
            assert words[words.index("--store") + 1] == store, command
