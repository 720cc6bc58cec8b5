"""Watching a run: answers streamed as the model writes them, and what the run took and cost.

Real components throughout: a real IPython shell with mkl loaded, litellm against the local
OpenAI-compatible stub speaking server-sent events (nothing reaches the internet), the
scripted provider streaming a word at a time, and the ``mkl`` command on a real pseudo-terminal.
"""

from __future__ import annotations

import io
import itertools
import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from openai_stub import Reply, StubServer, running_stub

import mkl_notebook
from mkl_notebook import cli
from mkl_notebook.app import status
from mkl_notebook.cli.live import TerminalStream
from mkl_notebook.durable.stores import SQLiteStore
from mkl_notebook.engine.options import RunOptions
from mkl_notebook.engine.runner import run_machine
from mkl_notebook.lang.loader import load
from mkl_notebook.providers.config import load_config
from mkl_notebook.providers.litellm_provider import LiteLLMOracle, import_litellm
from mkl_notebook.providers.scripted import oracle_from_script
from mkl_notebook.render import views

from support import RUN_MIME, Cells, mkl_on_a_terminal

FAKE_KEY = "mkltest-streaming-not-a-real-key"
PRICED = "openai/gpt-4o-mini"  # in litellm's local price list
UNPRICED = "openai/stub-model"  # not in it

DRAFT = """\
machine: drafter
entry: draft
budget: 3
result: draft
states:
  draft:
    structure: One short paragraph.
    prompt: "Write about {{topic}}."
    output: draft
    gates:
      - { when: otherwise, then: ok, to: END }
"""

# Drafts until the judge says the draft is good: every round costs a produce and a judge call.
LOOP = """\
machine: polisher
entry: draft
budget: 20
result: draft
states:
  draft:
    structure: A draft.
    prompt: "Draft it."
    output: draft
    gates:
      - { when: the draft is good, then: ok, to: END }
      - { when: otherwise, then: ok, to: draft }
"""

FAN = """\
machine: fan
entry: each
budget: 5
context:
  topics: [tea, rain, maps]
states:
  each:
    over: "{{topics}}"
    structure: A line.
    prompt: "A line about {{item}}."
    output: lines
    gates:
      - { when: otherwise, then: ok, to: END }
"""

STREAMED = "Rain taps the window while the kettle sings softly."


@pytest.fixture(scope="module")
def stub_server() -> Iterator[StubServer]:
    with running_stub() as server:
        yield server


@pytest.fixture
def stub(stub_server: StubServer, monkeypatch: pytest.MonkeyPatch) -> StubServer:
    stub_server.reset()
    monkeypatch.setenv("OPENAI_API_KEY", FAKE_KEY)
    monkeypatch.setenv("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import_litellm()
    return stub_server


def _prices(model: str) -> tuple[float, float]:
    """(input, output) US dollars per token, read straight from litellm's local price list."""
    entry = import_litellm().model_cost[model.split("/", 1)[1]]
    return float(entry["input_cost_per_token"]), float(entry["output_cost_per_token"])


def _live_texts(ip: Cells) -> list[str]:
    """Every text the live line showed, in order."""
    return [p.data["text/plain"] for p in ip.out.published if str(p.data.get("text/plain", "")).startswith("running")]


def _records(path: Path, run_id: str) -> list[dict[str, Any]]:
    return SQLiteStore(path).read(run_id)


# -- streaming into the live view -------------------------------------------------------------------


def test_a_streamed_answer_grows_in_the_live_view_and_the_journal_holds_it_once(ip: Cells, stub: StubServer) -> None:
    stub.route(
        system="Output contract:",
        replies=[Reply(content=STREAMED, chunk_delay=0.2, prompt_tokens=31, completion_tokens=12)],
    )
    ip.run(f"%mkl config model={UNPRICED} api_base={stub.url}")
    ip.define(DRAFT)
    ip.out.clear()
    ip.run("%mkl run drafter --set topic=rain")

    writing = [text for text in _live_texts(ip) if text.startswith("running — writing draft …")]
    shown = [text.split("\n", 1)[1].strip() if "\n" in text else "" for text in writing]
    grown = [text for text in dict.fromkeys(shown) if text]
    assert len(grown) >= 3, f"the answer was drawn growing only {len(grown)} time(s): {writing}"
    assert all(STREAMED.startswith(text) for text in grown)
    assert all(len(a) < len(b) for a, b in itertools.pairwise(grown))
    assert grown[0] != STREAMED  # it was seen half-written, before the step finished
    index_of_view = next(i for i, p in enumerate(ip.out.published) if RUN_MIME in p.data)
    index_of_last_growth = max(
        i for i, p in enumerate(ip.out.published) if str(p.data.get("text/plain", "")).startswith("running — writing")
    )
    assert index_of_last_growth < index_of_view  # the growing text came before the finished step's view

    [request] = stub.produce_requests
    assert request.body["stream"] is True and request.body["stream_options"] == {"include_usage": True}
    answers = [r for r in _records(ip.tmp / ".mkl" / "runs.sqlite", "drafter") if r["t"] == "answer"]
    assert len(answers) == 1  # the journal holds the final answer only, not its chunks
    assert answers[0]["answer"]["text"] == STREAMED
    assert answers[0]["usage"] == [31, 12]  # what the server reported in its last chunk
    assert "cost_usd" not in answers[0]  # this model has no price in the list

    ip.out.clear()
    ip.run("%mkl run drafter --set topic=rain")  # a replay: instant, and nothing streams
    assert not [text for text in _live_texts(ip) if "writing" in text]
    assert len(stub.produce_requests) == 1


def test_the_scripted_provider_streams_a_word_at_a_time_and_a_replay_never_does(ip: Cells) -> None:
    ip.define(DRAFT)
    script = ip.script("stream.yaml", {"llm": {"produce": [STREAMED], "stream": 0.2}})
    ip.out.clear()
    ip.run(f"%mkl run drafter --set topic=rain --script {script}")
    writing = [text for text in _live_texts(ip) if "writing draft" in text]
    grown = list(dict.fromkeys(text.split("\n", 1)[1].strip() for text in writing if "\n" in text))
    assert len(grown) >= 3 and all(STREAMED.startswith(text) for text in grown)
    assert grown[0] != STREAMED
    ip.out.clear()
    ip.run(f"%mkl run drafter --set topic=rain --script {script}")
    assert not [text for text in _live_texts(ip) if "writing" in text]


def test_fan_out_branches_each_show_a_line_while_they_run(ip: Cells) -> None:
    ip.define(FAN)
    # One answer is short, two are long: one branch is done for a good second while the others still write
    # (equal answers finish together, and whether a redraw falls between them would be left to chance).
    answers = ["short", *["a much longer line that goes on streaming word after word"] * 2]
    script = ip.script("fan.yaml", {"llm": {"produce": answers, "stream": 0.15}})
    ip.out.clear()
    ip.run(f"%mkl run fan --script {script}")
    with_branches = [text for text in _live_texts(ip) if "branch 1:" in text]
    assert with_branches, _live_texts(ip)
    for text in with_branches:
        assert [line.split(":")[0].strip() for line in text.splitlines()[1:]] == ["branch 1", "branch 2", "branch 3"]
    assert any("writing …" in text for text in with_branches)
    assert any(": done" in text and "writing" in text for text in with_branches)  # done beside still writing
    assert sorted(mkl_notebook.get_run("fan").result) == sorted(answers)  # which branch gets which: call order


# -- time and cost ------------------------------------------------------------------------------------


def test_the_cost_of_a_run_is_its_tokens_times_the_local_price_list(stub: StubServer, tmp_path: Path) -> None:
    stub.route(user="CONDITIONS:", replies=[Reply('{"choice": 1}', prompt_tokens=40, completion_tokens=3)])
    stub.route(system="Output contract:", replies=[Reply("a draft", prompt_tokens=1200, completion_tokens=300)])
    config = load_config(cwd=tmp_path, env={}, overrides={"model": PRICED, "api_base": stub.url})
    result = run_machine(load(LOOP), LiteLLMOracle(config))
    price_in, price_out = _prices(PRICED)
    expected = (1200 + 40) * price_in + (300 + 3) * price_out
    assert result.usage == {"input_tokens": 1240, "output_tokens": 303}
    assert result.cost_usd == pytest.approx(expected, rel=1e-9)
    assert result.trace[0]["cost_usd"] == pytest.approx(expected, rel=1e-9)
    assert result.trace[0]["seconds"] > 0
    assert status.usage(result)["cost_usd"] == pytest.approx(expected, rel=1e-6)
    shown = views.result_summary_text(result)
    assert views.money(expected) in shown and "s of model time" in shown
    assert views.money(expected) in views.trace_table_text(result.trace)


def test_a_model_not_in_the_price_list_shows_no_cost_anywhere(stub: StubServer, tmp_path: Path) -> None:
    stub.route(system="Output contract:", replies=["a draft"])
    config = load_config(cwd=tmp_path, env={}, overrides={"model": UNPRICED, "api_base": stub.url})
    result = run_machine(load(DRAFT), LiteLLMOracle(config), context={"topic": "tea"})
    assert result.status == "done" and result.cost_usd is None
    assert "cost_usd" not in status.usage(result) and "cost_usd" not in result.trace[0]
    assert "$" not in views.result_summary_text(result) + views.trace_table_text(result.trace)


def _mkl(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict[str, Any], str]:
    code = cli.main(list(args))
    out = capsys.readouterr().out
    return code, json.loads(out.strip().splitlines()[-1]), out


def test_max_cost_suspends_the_run_and_a_higher_limit_resumes_it(
    stub: StubServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    stub.route(user="CONDITIONS:", replies=['{"choice": 2}', '{"choice": 2}', '{"choice": 2}', '{"choice": 1}'])
    stub.route(system="Output contract:", replies=[Reply("a draft", prompt_tokens=1000, completion_tokens=500)])
    (tmp_path / "loop.mkl").write_text(LOOP, encoding="utf-8")
    price_in, price_out = _prices(PRICED)
    one_round = 1000 * price_in + 500 * price_out + 10 * price_in + 5 * price_out  # a draft and its judge
    flags = ("--model", PRICED, "--api-base", stub.url, "--id", "capped")
    limit = f"{one_round * 1.5:.8f}"  # the second round crosses it

    code, line, out = _mkl(capsys, "run", "loop.mkl", *flags, "--max-cost", limit, "--suspend")
    assert (code, line["status"], line["error"], line["at"]) == (3, "suspended", "spend-exhausted", "draft")
    assert line["usage"]["cost_usd"] == pytest.approx(2 * one_round, rel=1e-6)
    assert "--max-cost USD" in out  # the command that continues it
    start = _records(tmp_path / ".mkl" / "runs.sqlite", "capped")[0]
    assert start["options"]["max_cost"] == pytest.approx(float(limit))  # journaled with the run's options

    code, line, _ = _mkl(capsys, "resume", *flags, "--max-cost", "1.00")
    assert (code, line["status"]) == (0, "done")
    assert line["usage"]["cost_usd"] == pytest.approx(4 * one_round, rel=1e-6)
    assert line["calls"]["replayed"] == 4  # the two rounds before the limit were not paid for again
    code, listing, out = _mkl(capsys, "runs")
    assert listing["runs"][0]["cost_usd"] == pytest.approx(4 * one_round, rel=1e-6)
    assert f"spent {views.money(4 * one_round)}" in out


def test_max_cost_halts_without_suspend_and_refuses_an_unknown_price(
    stub: StubServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    stub.route(user="CONDITIONS:", replies=['{"choice": 2}'])  # never good enough
    stub.route(system="Output contract:", replies=[Reply("a draft", prompt_tokens=1000, completion_tokens=500)])
    (tmp_path / "loop.mkl").write_text(LOOP, encoding="utf-8")
    code, line, _ = _mkl(capsys, "run", "loop.mkl", "--model", PRICED, "--api-base", stub.url, "--max-cost", "$0.001")
    assert (code, line["status"], line["error"]) == (1, "halt", "spend-exhausted")
    assert line["usage"]["cost_usd"] >= 0.001
    before = len(stub.produce_requests)
    code, line, _ = _mkl(capsys, "run", "loop.mkl", "--model", UNPRICED, "--api-base", stub.url, "--max-cost", "1")
    assert (code, line["status"]) == (1, "halt")
    assert line["error"].startswith(f"spend-unknown: the price of model '{UNPRICED}' is not known")
    assert len(stub.produce_requests) == before + 1  # one draft from the unpriced model, and no more
    code, line, _ = _mkl(capsys, "run", "loop.mkl", "--model", PRICED, "--max-cost", "-2")
    assert code == 2 and "max_cost (--max-cost) must be an amount of US dollars above 0" in line["error"]


def test_max_cost_in_a_notebook_suspends_and_resumes(ip: Cells, stub: StubServer) -> None:
    stub.route(user="CONDITIONS:", replies=['{"choice": 2}', '{"choice": 1}'])
    stub.route(system="Output contract:", replies=[Reply("a draft", prompt_tokens=1000, completion_tokens=500)])
    ip.run(f"%mkl config model={PRICED} api_base={stub.url}")
    ip.define(LOOP)
    ip.run("r = %mkl run polisher --max-cost 0.0001 --suspend")
    r = ip.shell.user_ns["r"]
    assert (r.status, r.error) == ("suspended", "spend-exhausted")
    view = ip.out.last(RUN_MIME)["text/plain"]
    assert "waiting for a higher cost limit" in view and "$0.0" in view
    ip.run("r = %mkl resume polisher --max-cost 1")
    assert ip.shell.user_ns["r"].status == "done"
    ip.out.clear()
    ip.run("%mkl runs")
    listing = next(p.data["text/plain"] for p in ip.out.published if "Runs" in p.data.get("text/plain", ""))
    assert "spent" in listing and "$0.00" in listing


def test_a_real_models_run_reads_the_same_when_it_is_replayed(ip: Cells, stub: StubServer) -> None:
    """Time and cost come from the journal: the cell's output does not change when it runs again."""
    stub.route(
        system="Output contract:", replies=[Reply(STREAMED, chunk_delay=0.01, prompt_tokens=800, completion_tokens=90)]
    )
    ip.run(f"%mkl config model={PRICED} api_base={stub.url}")
    ip.define(DRAFT)
    ip.run("%mkl run drafter --set topic=tea")
    first = ip.out.last(RUN_MIME)
    price_in, price_out = _prices(PRICED)
    assert views.money(800 * price_in + 90 * price_out) in first["text/plain"]
    assert re.search(r"800 \+ 90|890 · \d+\.\d s · \$", first["text/plain"]), first["text/plain"]
    ip.out.clear()
    ip.run("%mkl run drafter --set topic=tea")
    assert ip.out.last(RUN_MIME) == first
    assert len(stub.produce_requests) == 1


# -- the terminal ---------------------------------------------------------------------------------------


class _Writes(io.StringIO):
    """Every write, kept apart, so a test sees the text arrive in pieces."""

    def __init__(self) -> None:
        super().__init__()
        self.pieces: list[str] = []

    def write(self, text: str) -> int:
        self.pieces.append(text)
        return super().write(text)


def test_the_terminal_stream_writes_each_answer_as_it_grows_under_its_state() -> None:
    out = _Writes()
    oracle = oracle_from_script({"llm": {"produce": [STREAMED], "stream": 0.001}})
    run_machine(load(DRAFT), oracle, context={"topic": "x"}, options=RunOptions(observer=TerminalStream(out).observer))
    assert out.getvalue() == f"── draft ──\n{STREAMED}\n\n"
    words = [piece for piece in out.pieces if piece.strip() and not piece.startswith("──")]
    assert len(words) == len(STREAMED.split())  # a write per word as it came, not the answer at once


def test_the_terminal_stream_shows_a_models_escape_sequences_as_text() -> None:
    out = _Writes()
    said = "Fine.\x1b[2K\r\x1b[1A All approved."  # would erase the line, and go up to write over the one above
    oracle = oracle_from_script({"llm": {"produce": [said], "stream": 0.001}})
    run_machine(load(DRAFT), oracle, context={"topic": "x"}, options=RunOptions(observer=TerminalStream(out).observer))
    assert out.getvalue() == "── draft ──\nFine.\\x1b[2K\\r\\x1b[1A All approved.\n\n"


def _run_on_a_terminal(args: list[str], cwd: Path) -> str:
    """``mkl`` with its stdout on a pseudo-terminal: everything it printed there."""
    return mkl_on_a_terminal(args, cwd, {**os.environ, "PYTHONUNBUFFERED": "1", "COLUMNS": "200"}, timeout=60)


def test_mkl_run_streams_to_a_terminal_and_never_into_a_pipe_or_the_status_line(tmp_path: Path) -> None:
    (tmp_path / "d.mkl").write_text(DRAFT, encoding="utf-8")
    (tmp_path / "s.yaml").write_text(json.dumps({"llm": {"produce": [STREAMED], "stream": 0.01}}), encoding="utf-8")
    args = ["run", "d.mkl", "--script", "s.yaml", "--set", "topic=rain", "--id", "t"]
    shown = _run_on_a_terminal(args, tmp_path)
    assert f"── draft ──\n{STREAMED}\n" in shown
    assert shown.index("── draft ──") < shown.index("Done.")
    line = json.loads(shown.strip().splitlines()[-1])
    assert line["status"] == "done" and line["result"] == STREAMED

    piped = subprocess.run(
        [sys.executable, "-m", "mkl_notebook.cli", *args, "--fresh"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert "── draft ──" not in piped.stdout
    assert json.loads(piped.stdout.strip().splitlines()[-1])["result"] == STREAMED
