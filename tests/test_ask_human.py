"""ask_human: a model may ask the person a question; the run suspends and resumes as a conversation.

A state with ``ask_human: true`` (or the run option / ``--ask-human``) lets the model
reply ``ASK: <question>``.  The run suspends (``asked``) with the question shown as
model output; the person's reply re-issues the same produce call as a conversation,
journaled at its own position, so a resume never repeats an earlier round's call.
"""

from __future__ import annotations

import html
import json
import sqlite3
import subprocess
import sys
from collections import Counter
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, cast

import pytest
import yaml
from IPython.core.interactiveshell import InteractiveShell

import mkl_notebook
from mkl_notebook.app.handle import Run
from mkl_notebook.durable import runs
from mkl_notebook.durable.stores import MemoryStore, SQLiteStore
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
from mkl_notebook.engine.result import RunResult
from mkl_notebook.engine.runner import run_machine
from mkl_notebook.lang.check import check
from mkl_notebook.lang.loader import load
from mkl_notebook.notebook.display import RunView
from mkl_notebook.notebook.forms import QuestionForm
from mkl_notebook.providers.prompts import ASK_RULE, produce_messages, produce_system
from mkl_notebook.providers.scripted import ScriptedOracle
from mkl_notebook.render.views import pending_card_html, pending_card_text, run_bundle

from support import record_presented

TRIP = """\
machine: trip
entry: plan
budget: 10
result: plan
context:
  who: Ana
states:
  plan:
    structure: A travel plan.
    prompt: "Plan a trip for {{who}}"
    output: plan
    ask_human: true
    gates:
      - { when: the plan names a city, then: ok, to: END }
      - { when: otherwise, fail: true }
"""
PLAIN_TRIP = TRIP.replace("    ask_human: true\n", "")
assert PLAIN_TRIP != TRIP

Q1, Q2 = "Where to?", "How many days?"
R1, R2 = "Lisbon", "Three days"
FINAL = "Lisbon for three days"
ROUND_ANSWERS = {0: f"ASK: {Q1}", 2: f"ASK: {Q2}", 4: FINAL}
PLAN = "root/0:plan#1"
MODEL_LABEL = "The model asks (model output"
AUTHOR_LABEL = "The machine's author asks"


class RoundOracle(Oracle):
    """Answers a produce call by how far its conversation has got; counts calls per round position.

    With ``replies`` it answers the model's questions itself (an uninterrupted run);
    without, a question waits for a person.
    """

    def __init__(self, answers: Mapping[int, str] = ROUND_ANSWERS, replies: list[str] | None = None) -> None:
        self.answers = dict(answers)
        self.replies = list(replies) if replies is not None else None
        self.rounds: Counter[str] = Counter()  # "produce", "produce~r1", … -> live calls
        self.produce: dict[str, ProduceRequest] = {}
        self.judged = 0
        self.reply_requests: list[ReplyRequest] = []

    def ask(self, request: OracleRequest) -> Any:
        if isinstance(request, ProduceRequest):
            suffix = request.position.rsplit("/", 1)[-1]
            self.rounds[suffix] += 1
            self.produce[suffix] = request
            return ProduceAnswer(
                self.answers[len(request.conversation)], input_tokens=10, output_tokens=5, model="round-model"
            )
        if isinstance(request, JudgeRequest):
            self.judged += 1
            return JudgeAnswer(0, input_tokens=3, output_tokens=1, model="judge-model")
        if isinstance(request, ReplyRequest):
            self.reply_requests.append(request)
            if not self.replies:
                raise AwaitingHuman(request.position)
            return HumanReply(self.replies.pop(0), by="test")
        raise AssertionError(f"unexpected request {request!r}")


class RecordingScript(ScriptedOracle):
    """A scripted oracle that keeps every request it is asked."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.requests: list[OracleRequest] = []

    def ask(self, request: OracleRequest) -> Any:
        self.requests.append(request)
        return super().ask(request)

    def produce_requests(self) -> list[ProduceRequest]:
        return [r for r in self.requests if isinstance(r, ProduceRequest)]


STORES: dict[str, Callable[[Path], Any]] = {
    "memory": lambda tmp: MemoryStore(),
    "sqlite": lambda tmp: SQLiteStore(tmp / "runs.sqlite"),
}


def _suspended_asking(result: RunResult, question: str) -> None:
    assert (result.status, result.error, result.at, result.question) == ("suspended", "asked", "plan", question)
    assert result.ask is None
    assert result.trace == []


# -- 1. several rounds across durable resumes --------------------------------------------------------


@pytest.mark.parametrize("store_kind", sorted(STORES))
def test_the_model_asks_twice_and_each_resume_makes_only_the_next_call(store_kind: str, tmp_path: Path) -> None:
    machine = load(TRIP)
    store = STORES[store_kind](tmp_path)
    oracle = RoundOracle()

    first = runs.start(machine, oracle, store=store, run_id="trip-1")
    _suspended_asking(first.result, Q1)
    assert oracle.rounds == {"produce": 1}
    assert first.calls == {"made": 1, "replayed": 0}

    second = runs.resume_journal(store, "trip-1", oracle, reply=R1, has_reply=True)
    _suspended_asking(second.result, Q2)
    assert oracle.rounds == {"produce": 1, "produce~r1": 1}  # round 0 replayed from the journal
    assert second.calls == {"made": 1, "replayed": 1}

    third = runs.resume_journal(store, "trip-1", oracle, reply=R2, has_reply=True)
    assert third.status == "done", third.result
    assert third.result.result == FINAL
    assert oracle.rounds == {"produce": 1, "produce~r1": 1, "produce~r2": 1}
    assert oracle.judged == 1

    # a finished run replays without asking anybody anything again
    again = runs.replay(store, "trip-1", oracle)
    assert again.status == "done" and again.result.result == FINAL
    assert oracle.rounds == {"produce": 1, "produce~r1": 1, "produce~r2": 1}

    # the last round is the original prompt plus the conversation so far, in order
    first_request, last_request = oracle.produce["produce"], oracle.produce["produce~r2"]
    assert last_request.position == f"{PLAN}/produce~r2"
    assert last_request.user == first_request.user
    assert last_request.ask_human and first_request.ask_human
    assert last_request.conversation == (
        ("assistant", f"ASK: {Q1}"),
        ("user", R1),
        ("assistant", f"ASK: {Q2}"),
        ("user", R2),
    )
    messages = produce_messages(last_request)
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "user", "assistant", "user"]
    assert [m["content"] for m in messages[1:]] == [first_request.user, f"ASK: {Q1}", R1, f"ASK: {Q2}", R2]

    # each round and each reply sits at its own journal position, once
    records = store.read("trip-1")
    answers = Counter(r["pos"] for r in records if r.get("t") == "answer")
    assert answers == {f"{PLAN}/produce": 1, f"{PLAN}/produce~r1": 1, f"{PLAN}/produce~r2": 1, f"{PLAN}/judge@0": 1}
    assert [(r["pos"], r["value"]) for r in records if r.get("t") == "reply"] == [
        (f"{PLAN}/ask@r0", R1),
        (f"{PLAN}/ask@r1", R2),
    ]

    # the same as a run whose questions were answered on the spot
    straight_oracle = RoundOracle(replies=[R1, R2])
    straight = run_machine(machine, straight_oracle)
    assert straight.status == "done"
    done = third.result
    assert (done.trace, done.result, done.context, done.usage) == (
        straight.trace,
        straight.result,
        straight.context,
        straight.usage,
    )
    assert done.usage == {"input_tokens": 33, "output_tokens": 16}  # three produce rounds and one judge
    assert [(r.question, r.ask, r.state) for r in straight_oracle.reply_requests] == [
        (Q1, None, "plan"),
        (Q2, None, "plan"),
    ]

    # what the person typed is external: the judged decision on that output is tainted
    assert done.trace[0]["decision_tainted"] is True


def test_without_a_question_the_same_decision_is_not_tainted() -> None:
    oracle = RoundOracle(answers={0: FINAL})
    result = run_machine(load(TRIP), oracle)
    assert result.status == "done" and result.result == FINAL
    assert "decision_tainted" not in result.trace[0]
    assert oracle.reply_requests == []
    assert oracle.rounds == {"produce": 1}


def test_the_run_option_lets_a_machine_without_the_key_ask_and_survives_resume() -> None:
    store = MemoryStore()
    oracle = RoundOracle()
    first = runs.start(load(PLAIN_TRIP), oracle, store=store, run_id="opt", options=RunOptions(ask_human=True))
    _suspended_asking(first.result, Q1)
    second = runs.resume_journal(store, "opt", oracle, reply=R1, has_reply=True)
    _suspended_asking(second.result, Q2)
    third = runs.resume_journal(store, "opt", oracle, reply=R2, has_reply=True)
    assert (third.status, third.result.result) == ("done", FINAL)
    assert oracle.rounds == {"produce": 1, "produce~r1": 1, "produce~r2": 1}


def test_a_nested_call_that_asks_suspends_the_whole_run() -> None:
    child = load(TRIP.replace("machine: trip", "machine: child"))
    parent = load(
        "machine: parent\nentry: go\nbudget: 5\nresult: got\nstates:\n  go:\n    call: child\n"
        "    output: got\n    gates:\n      - { when: otherwise, then: ok, to: END }\n"
    )
    store = MemoryStore()
    oracle = RoundOracle()
    first = runs.start(parent, oracle, store=store, run_id="nested", registry={"child": child})
    assert (first.status, first.result.error, first.result.question) == ("suspended", "asked", Q1)
    runs.resume_journal(store, "nested", oracle, reply=R1, has_reply=True)
    done = runs.resume_journal(store, "nested", oracle, reply=R2, has_reply=True)
    assert (done.status, done.result.result) == ("done", FINAL)
    assert oracle.rounds == {"produce": 1, "produce~r1": 1, "produce~r2": 1}


# -- 2. the ask limit ------------------------------------------------------------------------------


ALWAYS_ASKS = {2 * n: f"ASK: question {n + 1}?" for n in range(6)}


def test_a_model_that_keeps_asking_halts_at_the_ask_limit() -> None:
    store = MemoryStore()
    oracle = RoundOracle(answers=ALWAYS_ASKS)
    outcome = runs.start(load(TRIP), oracle, store=store, run_id="limit")
    for answered in range(3):
        _suspended_asking(outcome.result, f"question {answered + 1}?")
        outcome = runs.resume_journal(store, "limit", oracle, reply=f"reply {answered + 1}", has_reply=True)
    result = outcome.result
    assert (result.status, result.error, result.at) == ("halt", "state-error: ask-limit", "plan")
    assert result.question is None
    assert len(result.trace) == 1
    step = result.trace[0]
    assert (step["state"], step["policy"], step["gate"], step["to"]) == ("plan", "state-error", None, None)
    assert oracle.rounds == {"produce": 1, "produce~r1": 1, "produce~r2": 1, "produce~r3": 1}
    assert result.usage == {"input_tokens": 40, "output_tokens": 20}  # the refused round still cost tokens
    assert oracle.judged == 0
    with pytest.raises(runs.RunStateError):
        runs.resume_journal(store, "limit", oracle, reply="one more", has_reply=True)


def test_the_ask_limit_option_and_a_fresh_allowance_per_visit() -> None:
    oracle = RoundOracle(answers=ALWAYS_ASKS, replies=["only one"])
    result = run_machine(load(TRIP), oracle, options=RunOptions(ask_limit=1))
    assert (result.status, result.error) == ("halt", "state-error: ask-limit")
    assert oracle.rounds == {"produce": 1, "produce~r1": 1}

    looping = load(
        "machine: loop\nentry: plan\nbudget: 10\nstates:\n  plan:\n    structure: A plan.\n"
        '    prompt: "Plan it"\n    output: plan\n    ask_human: true\n    max_visits: 2\n'
        "    gates:\n      - { when: the plan needs another pass, repair: 1, to: plan }\n"
        "      - { when: otherwise, then: ok, to: END }\n"
    )
    script = RecordingScript(
        {"produce": {"Plan it": "ASK: which one?", "first": "plan A", "second": "plan B"}, "judge": [0]},
        replies=["first", "second"],
    )
    looped = run_machine(looping, script, options=RunOptions(ask_limit=1))
    assert (looped.status, looped.result) == ("done", "plan B")  # one question on each of two visits
    assert looped.visits == {"plan": 2}
    assert [r.position for r in script.produce_requests()] == [
        "root/0:plan#1/produce",
        "root/0:plan#1/produce~r1",
        "root/1:plan#2/produce",
        "root/1:plan#2/produce~r1",
    ]


# -- 3. fan-out branches never ask -----------------------------------------------------------------


TOUR = """\
machine: tour
entry: describe
budget: 10
context:
  cities: [Paris, Rome]
states:
  describe:
    structure: One line about the city.
    prompt: "Describe {{item}}"
    output: lines
    over: "{{cities}}"
    ask_human: true
    gates:
      - { when: otherwise, then: ok, to: END }
"""


def test_a_branch_that_asks_becomes_a_branch_error_and_the_run_goes_on() -> None:
    store = MemoryStore()
    oracle = RecordingScript({"produce": {"Paris": "ASK: Which season?", "Rome": "Rome in spring"}, "tokens": [5, 7]})
    outcome = runs.start(load(TOUR), oracle, store=store, run_id="tour")
    result = outcome.result
    assert result.status == "done", result
    expected = ["[branch-error: ask: Which season?]", "Rome in spring"]
    assert result.context["lines"] == expected
    assert result.trace[0]["branches"] == expected
    assert result.question is None
    assert result.usage == {"input_tokens": 10, "output_tokens": 14}  # the branch that asked still cost tokens
    assert oracle.calls["reply"] == 0
    assert all(r.ask_human for r in oracle.produce_requests())
    assert not [r for r in store.read("tour") if r.get("t") in ("reply", "suspend")]


# -- 4. portability: without the key, ASK: is just text -----------------------------------------------


def test_without_ask_human_an_ask_line_is_ordinary_output() -> None:
    oracle = RecordingScript({"produce": ["ASK: something"], "judge": [0]})
    result = run_machine(load(PLAIN_TRIP), oracle)
    assert (result.status, result.result, result.question) == ("done", "ASK: something", None)
    assert result.context["plan"] == "ASK: something"
    assert oracle.calls["reply"] == 0
    (request,) = oracle.produce_requests()
    assert request.ask_human is False
    assert request.conversation == ()
    assert ASK_RULE not in produce_system(request)
    assert ASK_RULE not in produce_messages(request)[0]["content"]

    asking = RecordingScript({"produce": ["ASK: something"]})
    suspended = run_machine(load(TRIP), asking)
    assert (suspended.status, suspended.question) == ("suspended", "something")
    (asked,) = asking.produce_requests()
    assert asked.ask_human is True
    assert ASK_RULE in produce_system(asked)


def test_check_warns_that_ask_human_is_an_extension() -> None:
    warnings = [f for f in check(TRIP) if f.key == "ask_human"]
    assert [(f.severity, f.code, f.state) for f in warnings] == [("warning", "extension-key", "plan")]
    assert "extension" in warnings[0].message
    assert not [f for f in check(PLAIN_TRIP) if f.key == "ask_human"]
    assert not [f for f in check(TRIP) if f.severity == "error"]


# -- 5. the question is model output ---------------------------------------------------------------


HOSTILE = "<script>alert(1)</script>"


def test_the_question_is_shown_labelled_as_model_output_and_escaped() -> None:
    machine = load(TRIP)
    result = run_machine(machine, ScriptedOracle({"produce": [f"ASK: {HOSTILE}"]}))
    assert (result.status, result.error, result.question, result.ask) == ("suspended", "asked", HOSTILE, None)
    assert result.as_dict()["question"] == HOSTILE and "ask" not in result.as_dict()

    bundle = run_bundle("r-1", machine, result)
    card = pending_card_html("r-1", "trip", result)
    for page in (bundle["text/html"], card):
        assert MODEL_LABEL in page
        assert AUTHOR_LABEL not in page
        assert "<script>" not in page
        assert html.escape(HOSTILE) in page or html.escape(HOSTILE, quote=False) in page
        assert page.index(MODEL_LABEL) < page.index("&lt;script&gt;")
    for text in (bundle["text/plain"], pending_card_text("r-1", "trip", result)):
        assert MODEL_LABEL in text and HOSTILE in text and AUTHOR_LABEL not in text

    unanswerable = Run(cast(Any, None), "r-1", "trip", cast(Any, None))  # (a form drawn, never clicked)
    form = QuestionForm(
        unanswerable, {"reason": "asked", "at": "plan", "ask": None, "reply_to": None, "question": HOSTILE}
    )
    assert "The model asks" in form.header.value and "model output" in form.header.value
    assert "<script>" not in form.header.value and "&lt;script&gt;" in form.header.value


# -- 6. the command line ---------------------------------------------------------------------------


def mkl(cwd: Path, *args: str) -> tuple[int, dict[str, Any], str]:
    completed = subprocess.run(
        [sys.executable, "-m", "mkl_notebook.cli", *args], capture_output=True, text=True, cwd=cwd, check=False
    )
    lines = completed.stdout.strip().splitlines()
    assert lines, completed.stderr
    return completed.returncode, json.loads(lines[-1]), completed.stdout + completed.stderr


def test_cli_run_and_resume_a_run_whose_model_asks(tmp_path: Path) -> None:
    (tmp_path / "m.mkl").write_text(TRIP, encoding="utf-8")
    (tmp_path / "plain.mkl").write_text(PLAIN_TRIP.replace("machine: trip", "machine: plain"), encoding="utf-8")
    script = {"llm": {"produce": [f"ASK: {Q1}", f"ASK: {Q2}", FINAL], "judge": [0]}}
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(script), encoding="utf-8")

    code, status, out = mkl(tmp_path, "run", "m.mkl", "--script", "s.yaml", "--id", "r")
    assert code == 3, out
    assert (status["status"], status["error"], status["at"], status["question"]) == ("suspended", "asked", "plan", Q1)
    assert status["ask"] is None
    assert "model output" in out

    code, status, out = mkl(
        tmp_path, "resume", "--id", "r", "--question", status["question_id"], "--reply", R1, "--script", "s.yaml"
    )
    assert code == 3, out
    assert (status["status"], status["error"], status["question"]) == ("suspended", "asked", Q2)
    assert status["calls"] == {"made": 1, "replayed": 1}

    code, status, out = mkl(
        tmp_path, "resume", "--id", "r", "--question", status["question_id"], "--reply", R2, "--script", "s.yaml"
    )
    assert code == 0, out
    assert (status["status"], status["result"], status["question"]) == ("done", FINAL, None)
    assert status["calls"] == {"made": 2, "replayed": 2}  # round 2 and the judge; rounds 0 and 1 replayed

    with sqlite3.connect(tmp_path / ".mkl" / "runs.sqlite") as db:
        bodies = [json.loads(body) for (body,) in db.execute("SELECT body FROM records ORDER BY run_id, seq")]
    produce = Counter(b["pos"] for b in bodies if b.get("t") == "answer" and b.get("kind") == "produce")
    assert produce == {f"{PLAN}/produce": 1, f"{PLAN}/produce~r1": 1, f"{PLAN}/produce~r2": 1}

    code, status, out = mkl(tmp_path, "run", "plain.mkl", "--script", "s.yaml", "--id", "p", "--ask-human")
    assert code == 3, out
    assert (status["status"], status["error"], status["question"]) == ("suspended", "asked", Q1)
    code, status, out = mkl(tmp_path, "run", "plain.mkl", "--script", "s.yaml", "--id", "p2")
    assert code == 0, out
    assert (status["status"], status["result"]) == ("done", f"ASK: {Q1}")

    code, status, out = mkl(tmp_path, "check", "m.mkl")
    assert code == 0, out
    assert status["warnings"] >= 1 and status["errors"] == 0
    assert "ask_human" in out and "extension" in out


# -- 7. the notebook form --------------------------------------------------------------------------


@pytest.fixture
def views(load_mkl: Any, monkeypatch: pytest.MonkeyPatch) -> list[RunView]:
    magics = load_mkl(lambda *args, **kwargs: None)
    return record_presented(magics, monkeypatch)


def _cell(shell: InteractiveShell, source: str) -> None:
    result = shell.run_cell(source)
    assert result.error_in_exec is None and result.error_before_exec is None, (source, result.error_in_exec)


def _produce_answers(folder: Path) -> Counter[str]:
    with sqlite3.connect(folder / ".mkl" / "runs.sqlite") as db:
        bodies = [json.loads(body) for (body,) in db.execute("SELECT body FROM records ORDER BY run_id, seq")]
    return Counter(b["pos"] for b in bodies if b.get("t") == "answer" and b.get("kind") == "produce")


def test_the_notebook_form_shows_the_model_question_and_sends_replies(
    shell: InteractiveShell, views: list[RunView], tmp_path: Path
) -> None:
    script = tmp_path / "trip.yaml"
    script.write_text(
        yaml.safe_dump({"llm": {"produce": [f"ASK: {Q1}", f"ASK: {Q2}", FINAL], "judge": [0]}}), encoding="utf-8"
    )
    _cell(shell, "%%mkl\n" + TRIP)
    _cell(shell, f"%mkl run trip --script {script}")
    run = mkl_notebook.get_run("trip")
    assert (run.status, run.error, run.pending["question"]) == ("suspended", "asked", Q1)

    view = views[-1]
    form = view.current_form
    assert isinstance(form, QuestionForm)
    assert "The model asks" in form.question_html and "model output" in form.question_html
    assert html.escape(Q1) in form.question_html
    assert AUTHOR_LABEL not in form.question_html
    buttons = form.buttons.children
    assert [button.description for button in buttons] == ["Send reply"]
    assert _produce_answers(tmp_path) == {f"{PLAN}/produce": 1}

    form.reply.value = R1
    form.send.click()
    run = mkl_notebook.get_run("trip")
    assert (run.status, run.error, run.pending["question"]) == ("suspended", "asked", Q2)
    assert all(control.disabled for control in form.controls)
    second = view.current_form
    assert isinstance(second, QuestionForm) and second is not form
    assert html.escape(Q2) in second.question_html and "model output" in second.question_html
    assert _produce_answers(tmp_path) == {f"{PLAN}/produce": 1, f"{PLAN}/produce~r1": 1}
    assert run.calls == {"made": 1, "replayed": 1}

    second.reply.value = R2
    second.send.click()
    run = mkl_notebook.get_run("trip")
    assert (run.status, run.result) == ("done", FINAL)
    assert view.current_form is None  # no third form: nothing more to answer
    assert all(control.disabled for control in second.controls)
    assert _produce_answers(tmp_path) == {f"{PLAN}/produce": 1, f"{PLAN}/produce~r1": 1, f"{PLAN}/produce~r2": 1}
    assert run.run_result.trace[0]["decision_tainted"] is True
