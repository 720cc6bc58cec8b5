"""Real models through litellm (docs/language.md §9), against a local OpenAI-compatible stub server.

Every model call here goes over HTTP to ``tests/openai_stub.py`` on 127.0.0.1; nothing reaches
the internet.  litellm is imported once per process (it takes seconds), by the session fixture.
"""

from __future__ import annotations

import base64
import json
import logging
import os
import re
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from IPython.utils.capture import capture_output
from openai_stub import Reply, StubServer, running_stub

from mkl_notebook.checkpoints.envelope import checkpoint_of
from mkl_notebook.durable import runs
from mkl_notebook.durable.stores import SQLiteStore
from mkl_notebook.engine.options import RunOptions
from mkl_notebook.engine.result import RunResult
from mkl_notebook.engine.runner import run_machine
from mkl_notebook.lang.loader import load
from mkl_notebook.lang.model import Machine
from mkl_notebook.providers.config import ConfigError, ModelConfig, load_config
from mkl_notebook.providers.judge_protocol import parse_judge_reply
from mkl_notebook.providers.litellm_provider import LiteLLMOracle, import_litellm, missing_keys, redact
from mkl_notebook.providers.secrets import scrub, url_secrets

HERE = Path(__file__).resolve().parent
STUB_SCRIPT = HERE / "openai_stub.py"
MODEL = "openai/stub-model"
FAKE_KEY = "mkltest-7d41c9e0b2a84f15-not-a-real-key"
REPAIR_NOTE = "\n\n[Repair feedback] The previous attempt did not satisfy: '{}'. Fix it."
# loggers whose level the test lowers to DEBUG; litellm's own loggers keep the level import_litellm() gives them
LOGGERS = ("", "mkl_notebook", "openai", "httpx", "httpcore")


# -- fixtures and helpers -------------------------------------------------------------------------


@pytest.fixture(scope="session")
def litellm_module() -> Iterator[Any]:
    """litellm, imported once for the whole session, offline (local cost map)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("LITELLM_LOCAL_MODEL_COST_MAP", "True")
        yield import_litellm()


@pytest.fixture(scope="module")
def stub_server() -> Iterator[StubServer]:
    with running_stub() as server:
        yield server


@pytest.fixture
def stub(stub_server: StubServer, litellm_module: Any, monkeypatch: pytest.MonkeyPatch) -> StubServer:
    """The module's stub with an empty route table and log, and a fake API key in the environment."""
    stub_server.reset()
    monkeypatch.setenv("OPENAI_API_KEY", FAKE_KEY)
    monkeypatch.setenv("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    return stub_server


def oracle_for(stub: StubServer, tmp_path: Path, **overrides: Any) -> LiteLLMOracle:
    """A litellm oracle on the stub; config from flags only (tmp_path has no config file, env is empty)."""
    values = {"model": MODEL, "api_base": stub.url, "backoff": 0.01, "retries": 2, **overrides}
    return LiteLLMOracle(load_config(cwd=tmp_path, env={}, overrides=values))


def machine(text: str) -> Machine:
    return load(text)


def run(
    machine_text: str,
    stub: StubServer,
    tmp_path: Path,
    *,
    options: RunOptions | None = None,
    context: dict[str, Any] | None = None,
    **overrides: Any,
) -> RunResult:
    return run_machine(machine(machine_text), oracle_for(stub, tmp_path, **overrides), context=context, options=options)


def fenced(message: str, label: str) -> str:
    """The text inside the ``label:`` fence of a judge message (fences pair by their nonce)."""
    match = re.search(rf"{label}:\n<data-([0-9a-f]{{12}})>\n(.*?)\n</data-\1>", message, re.DOTALL)
    assert match, f"no fenced {label} section in {message!r}"
    return match.group(2)


def clean_env(**extra: str) -> dict[str, str]:
    """The current environment without mkl or provider settings, plus ``extra``."""
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("MKL_", "OPENAI_", "ANTHROPIC_", "LITELLM_"))
    }
    env.update(LITELLM_LOCAL_MODEL_COST_MAP="True", PYTHONUNBUFFERED="1", **extra)
    return env


def mkl_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "mkl_notebook.cli", *args]


def status_line(stdout: str) -> dict[str, Any]:
    return json.loads(stdout.strip().splitlines()[-1])


def store_bytes(path: Path) -> bytes:
    """The SQLite store and its write-ahead log, as stored on disk."""
    data = b""
    for part in (path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-journal")):
        if part.is_file():
            data += part.read_bytes()
    return data


PIPELINE = """
mklang: "0.4"
machine: pipeline
entry: draft
budget: 20
context:
  topics: [alpha, beta]
states:
  draft:
    structure: One line that summarizes the topics.
    execution: Be brief.
    prompt: "Summarize the topics:\\n{{topics}}"
    output: summary
    gates:
      - { when: the summary is too vague, repair: 1, to: draft }
      - { when: the summary names every topic, then: ok, to: expand }
      - { when: otherwise, fail: true }
  expand:
    structure: One sentence about the topic.
    prompt: "Write about {{item}} (item {{index}})."
    over: "{{topics}}"
    output: notes
    gates:
      - { when: otherwise, then: ok, to: vote }
  vote:
    structure: A single capital letter.
    prompt: "Pick a letter for {{summary}}."
    sample: 2
    output: votes
    gates:
      - { when: otherwise, then: ok, to: END }
"""


def single(
    prompt: str, *, name: str = "single", gates: str = "- { when: otherwise, then: ok, to: END }", extra: str = ""
) -> str:
    """A one-state machine whose produce request is recognisable by ``prompt``."""
    return f"""
mklang: "0.4"
machine: {name}
entry: only
budget: 5
states:
  only:
    structure: A short answer.
    prompt: "{prompt}"
    output: answer
{extra}    gates:
      {gates}
"""


# -- the whole protocol on one machine ------------------------------------------------------------


def test_produce_judge_repair_and_fan_out_run_to_done(stub: StubServer, tmp_path: Path) -> None:
    stub.route(
        user="CONDITIONS:",
        replies=[
            Reply('{"choice": 1}', prompt_tokens=50, completion_tokens=3),
            Reply('{"choice": 1}', prompt_tokens=40, completion_tokens=2),
        ],
    )
    stub.route(
        user="Summarize the topics",
        replies=[
            Reply("some topics", prompt_tokens=30, completion_tokens=4),
            Reply("alpha and beta", prompt_tokens=35, completion_tokens=6),
        ],
    )
    stub.route(user="Write about alpha", replies=[Reply("Alpha is first.", prompt_tokens=20, completion_tokens=7)])
    stub.route(user="Write about beta", replies=[Reply("Beta is second.", prompt_tokens=21, completion_tokens=8)])
    stub.route(user="Pick a letter", replies=[Reply("A", prompt_tokens=12, completion_tokens=1)])

    result = run(PIPELINE, stub, tmp_path)

    assert (result.status, result.error) == ("done", None)
    assert result.context["summary"] == "alpha and beta"
    assert result.context["notes"] == ["Alpha is first.", "Beta is second."]
    assert result.result == ["A", "A"]
    assert [s["state"] for s in result.trace] == ["draft", "draft", "expand", "vote"]
    assert [s["policy"] for s in result.trace] == ["repair", "ok", "ok", "ok"]
    assert [s.get("gate_via") for s in result.trace] == ["llm", "llm", "otherwise", "otherwise"]
    assert result.trace[0]["gate"] == "the summary is too vague"
    assert result.trace[1]["gate"] == "the summary names every topic"
    assert result.trace[0]["judge_model"] == MODEL
    assert all(r.headers.get("authorization") == f"Bearer {FAKE_KEY}" for r in stub.chat)

    # produce: system = output contract + policy + rules; user = the rendered prompt; temperature 0.4
    drafts = [r for r in stub.produce_requests if "Summarize the topics" in r.user]
    assert len(drafts) == 2
    first, second = drafts
    assert [m["role"] for m in first.messages] == ["system", "user"]
    assert first.system.startswith("Output contract:\nOne line that summarizes the topics.")
    assert "Operational policy:\nBe brief." in first.system
    assert "No preamble" in first.system
    assert first.body["temperature"] == 0.4
    assert first.body["model"] == "stub-model"
    assert first.user == "Summarize the topics:\n1. alpha\n2. beta"
    # the repair feedback lands in the NEXT produce user message
    assert second.user == first.user + REPAIR_NOTE.format("the summary is too vague")
    assert second.body["temperature"] == 0.4

    # fan-out: one request per item (temperature 0.4 under `over`), then `sample: 2` at 0.8
    expands = [r for r in stub.produce_requests if "Write about" in r.user]
    assert sorted(r.user for r in expands) == ["Write about alpha (item 0).", "Write about beta (item 1)."]
    assert all(r.body["temperature"] == 0.4 for r in expands)
    assert all(r.system.startswith("Output contract:\nOne sentence about the topic.") for r in expands)
    votes = [r for r in stub.produce_requests if "Pick a letter" in r.user]
    assert len(votes) == 2
    assert all(r.body["temperature"] == 0.8 for r in votes)

    # judge: fixed role, temperature 0, fenced OUTPUT and CONTEXT, numbered conditions + the none option
    judges = stub.judge_requests
    assert len(judges) == 2
    assert all(r.body["temperature"] == 0 for r in judges)
    assert all("FIRST condition" in r.system and '{"choice": n}' in r.system for r in judges)
    assert fenced(judges[0].user, "OUTPUT") == "some topics"
    assert json.loads(fenced(judges[0].user, "CONTEXT")) == {"topics": ["alpha", "beta"], "summary": "some topics"}
    assert judges[0].user.endswith(
        "CONDITIONS:\n1. the summary is too vague\n2. the summary names every topic\n"
        "3. none of the above conditions is true"
    )
    assert "REASONING:" not in judges[0].user
    # the spent repair gate leaves the second batch
    assert fenced(judges[1].user, "OUTPUT") == "alpha and beta"
    assert judges[1].user.endswith(
        "CONDITIONS:\n1. the summary names every topic\n2. none of the above conditions is true"
    )

    # every token the stub reported is charged, produce and judge alike
    assert (
        result.usage
        == stub.usage()
        == {"input_tokens": 50 + 40 + 30 + 35 + 20 + 21 + 12 * 2, "output_tokens": 3 + 2 + 4 + 6 + 7 + 8 + 1 * 2}
    )
    assert result.trace[0]["cost"] == {"input_tokens": 30 + 50, "output_tokens": 4 + 3}
    assert len(stub.chat) == 8


JUDGED = """
mklang: "0.4"
machine: judged
entry: s1
budget: 10
states:
""" + "".join(
    f"""
  s{n}:
    structure: A word.
    prompt: "Step {n}."
    output: o{n}
    gates:
      - {{ when: s{n} looks red, then: ok, to: {f"s{n + 1}" if n < 5 else "END"} }}
      - {{ when: s{n} looks blue, then: ok, to: {f"s{n + 1}" if n < 5 else "END"} }}
      - {{ when: otherwise, then: ok, to: {f"s{n + 1}" if n < 5 else "END"} }}
"""
    for n in range(1, 6)
)


def test_judge_replies_in_every_accepted_form_are_parsed(stub: StubServer, tmp_path: Path) -> None:
    replies = {1: '{"choice": 2}', 2: "2", 3: "I think the answer is 2.", 4: "no idea, sorry", 5: "7"}
    for n, reply in replies.items():
        stub.route(user=["CONDITIONS:", f"s{n} looks red"], replies=[reply])

    result = run(JUDGED, stub, tmp_path)

    assert result.status == "done", result.error
    s1, s2, s3, s4, s5 = result.trace
    assert (s1["gate"], s1["gate_via"]) == ("s1 looks blue", "llm")
    assert "judge_parse" not in s1 and "judge_fallback" not in s1
    assert (s2["gate"], s2["gate_via"], s2["judge_parse"]) == ("s2 looks blue", "llm", "bare")
    assert (s3["gate"], s3["gate_via"], s3["judge_parse"]) == ("s3 looks blue", "llm", "last-number")
    assert (s4["gate"], s4["gate_via"], s4["judge_fallback"]) == ("otherwise", "otherwise", True)
    assert s4["judge_raw"] == "no idea, sorry"
    assert (s5["gate"], s5["gate_via"], s5["judge_fallback"]) == ("otherwise", "otherwise", True)
    assert s5["judge_raw"] == "out-of-range choice 7 for n=3"
    assert len(stub.judge_requests) == 5


@pytest.mark.parametrize(
    ("reply", "choice", "parse"),
    [
        ('{"choice": 3}', 2, None),
        (' {"choice": 1}\n', 0, None),
        ("3", 2, "bare"),
        ("Option 1 fits best.", 0, "last-number"),
        ('```json\n{"choice": 2}\n```', 1, "last-number"),
        ("", None, None),
        ('{"choice": true}', None, None),
        ("0", None, "bare"),
        ("4", None, "bare"),
    ],
)
def test_parse_judge_reply(reply: str, choice: int | None, parse: str | None) -> None:
    answer = parse_judge_reply(reply, 2)  # options 1, 2 and 3 = none
    assert (answer.choice, answer.parse) == (choice, parse)
    if choice is None:
        assert answer.raw


def test_context_reaches_the_judge_capped_with_head_and_tail(stub: StubServer, tmp_path: Path) -> None:
    blob = "HEAD-MARK " + "x" * 3000 + " MIDDLE-MARK " + "y" * 3000 + " TAIL-MARK"
    stub.route(user="CONDITIONS:", replies=['{"choice": 1}'])
    text = single("Look.", gates="- { when: it looks fine, then: ok, to: END }")

    result = run(text, stub, tmp_path, context={"blob": blob})

    assert result.status == "done", result.error
    (judge,) = stub.judge_requests
    context = fenced(judge.user, "CONTEXT")
    assert len(context) == 4000
    assert context.count("…[context_truncated]…") == 1
    assert context.startswith('{"blob": "HEAD-MARK xxx')
    assert context.endswith('yyy TAIL-MARK", "answer": "ok"}')
    assert "MIDDLE-MARK" not in context
    head, tail = context.split("…[context_truncated]…")
    assert abs(len(head) - len(tail)) <= 1
    assert "MIDDLE-MARK" not in stub.produce_requests[0].user  # the prompt never read the blob


def test_cost_budget_counts_produce_and_judge_tokens(stub: StubServer, tmp_path: Path) -> None:
    stub.route(user="CONDITIONS:", replies=[Reply('{"choice": 1}', prompt_tokens=5, completion_tokens=1)])
    stub.route(user="Spend.", replies=[Reply("more", prompt_tokens=20, completion_tokens=10)])
    text = single("Spend.", name="spender", gates="- { when: more work is needed, then: ok, to: only }")

    result = run(text, stub, tmp_path, options=RunOptions(cost_budget=100))

    # 36 tokens a visit: 72 < 100 lets a third visit run, 108 stops the fourth (produce alone would allow 4)
    assert (result.status, result.error, result.at) == ("halt", "cost-exhausted", None)
    assert result.usage == stub.usage() == {"input_tokens": 75, "output_tokens": 33}
    assert len(stub.produce_requests) == len(stub.judge_requests) == 3
    assert [s["cost"] for s in result.trace] == [{"input_tokens": 25, "output_tokens": 11}] * 3
    assert result.diagnosis == {"most_visited_state": "only", "visits": 3}


# -- transient and persistent provider failures ---------------------------------------------------


def test_overrides_accepted_by_load_config(tmp_path: Path) -> None:
    config = load_config(
        cwd=tmp_path,
        env={},
        overrides={
            "model": MODEL,
            "api_base": "http://127.0.0.1:1/v1",
            "backoff": 0.01,
            "retries": 1,
            "timeout": 5,
            "judge": "openai/judge",
            "fast": "openai/fast",
            "tiers": {"reasoning": {"params": {"top_p": 0.5}}},
            "balanced": None,
        },
    )
    assert (config.backoff, config.retries, config.timeout, config.judge) == (0.01, 1, 5.0, "openai/judge")
    assert (config.model_for("fast"), config.model_for("balanced")) == ("openai/fast", MODEL)
    assert config.params_for("reasoning") == {"top_p": 0.5}
    assert config.source == "flags"
    with pytest.raises(ConfigError, match="flags: unknown setting 'backof'"):
        load_config(cwd=tmp_path, env={}, overrides={"backof": 0.01})


def test_rate_limit_then_success_is_retried(stub: StubServer, tmp_path: Path) -> None:
    stub.route(user="Answer.", replies=[Reply(status=429, error_message="Rate limit reached"), "fine"])

    result = run(single("Answer."), stub, tmp_path, retries=3)

    assert (result.status, result.result) == ("done", "fine")
    assert len(stub.chat) == 2
    assert [r.reply.status for r in stub.chat if r.reply] == [429, 200]
    assert stub.chat[0].body == stub.chat[1].body
    assert result.usage == {"input_tokens": 10, "output_tokens": 5}  # the failed attempt costs nothing


FAN_OUT_SAY = """
machine: fan
entry: say
budget: 3
states:
  say:
    over: "{{words}}"
    structure: one word
    prompt: "Say {{item}}."
    output: said
    gates:
      - { when: otherwise, then: ok, to: END }
"""

TWO_STEPS = """
mklang: "0.4"
machine: outage
entry: first
budget: 6
states:
  first:
    structure: A word.
    prompt: "First."
    output: one
    gates:
      - { when: the word is fine, then: ok, to: second }
  second:
    structure: A word.
    prompt: "Second after {{one}}."
    output: two
    gates:
      - { when: otherwise, then: ok, to: END }
"""


def test_persistent_server_errors_halt_with_a_short_provider_error(stub: StubServer, tmp_path: Path) -> None:
    stub.route(user="CONDITIONS:", replies=['{"choice": 1}'])
    stub.route(user="First.", replies=["uno"])
    stub.route(user="Second", replies=[Reply(status=500, error_message="upstream exploded\nline two")])

    result = run(TWO_STEPS, stub, tmp_path, retries=2)

    assert (result.status, result.at) == ("halt", "second")
    assert result.error.startswith(f"provider-error: {MODEL}: ")
    assert "upstream exploded" in result.error
    assert "\n" not in result.error and "Traceback" not in result.error
    assert len(result.error) <= 350
    assert [s["state"] for s in result.trace] == ["first"]  # a provider error records no step
    assert len([r for r in stub.chat if "Second" in r.user]) == 3  # 1 try + 2 retries


def test_a_failed_call_is_history_a_re_run_replays_it_with_no_call_and_retry_makes_it_again(
    stub: StubServer, tmp_path: Path
) -> None:
    """A halted run re-run by id pays for nothing and ends as it ended; making the call again is a choice."""
    stub.route(user="CONDITIONS:", replies=[Reply('{"choice": 1}')])
    stub.route(user="First.", replies=[Reply("uno")])
    stub.route(user="Second", replies=[Reply(status=500, error_message="upstream exploded")])
    store = SQLiteStore(tmp_path / "runs.sqlite")

    halted = runs.start(machine(TWO_STEPS), oracle_for(stub, tmp_path, retries=0), store=store, run_id="h")
    assert (halted.status, halted.result.at) == ("halt", "second") and "upstream exploded" in str(halted.result.error)
    stub.reset()  # the provider would answer now: a replay must not ask it
    stub.route(user="Second", replies=[Reply("dos")])

    again = runs.start(machine(TWO_STEPS), oracle_for(stub, tmp_path), store=store, run_id="h")
    assert stub.chat == []  # nothing was asked, nothing was paid for
    assert again.calls == {"made": 0, "replayed": 3}
    assert (again.result.status, again.result.error, again.result.at) == (
        halted.result.status,
        halted.result.error,
        halted.result.at,
    )
    assert again.result.trace == halted.result.trace

    retried = runs.start(machine(TWO_STEPS), oracle_for(stub, tmp_path), store=store, run_id="h", retry=True)
    assert (retried.status, retried.result.result) == ("done", "dos")
    assert retried.calls == {"made": 1, "replayed": 2}
    assert len(stub.chat) == 1


def test_a_branch_that_failed_replays_as_the_same_marker_with_no_call(stub: StubServer, tmp_path: Path) -> None:
    stub.route(user="bad", replies=[Reply(status=500, error_message="no")])
    stub.route(user="Say", replies=[Reply("ok")])
    store = SQLiteStore(tmp_path / "runs.sqlite")
    words = {"words": ["good", "bad"]}
    first = runs.start(
        machine(FAN_OUT_SAY), oracle_for(stub, tmp_path, retries=0), store=store, run_id="f", input=words
    )
    assert first.status == "done" and any("branch-error" in str(item) for item in first.result.result)
    stub.reset()
    stub.route(user="Say", replies=[Reply("ok")])
    again = runs.start(machine(FAN_OUT_SAY), oracle_for(stub, tmp_path), store=store, run_id="f", input=words)
    assert stub.chat == [] and again.calls["made"] == 0
    assert again.result.result == first.result.result


def test_outage_suspends_a_suspendable_run_and_resume_finishes_it(stub: StubServer, tmp_path: Path) -> None:
    stub.route(user="CONDITIONS:", replies=[Reply('{"choice": 1}', prompt_tokens=7, completion_tokens=1)])
    stub.route(user="First.", replies=[Reply("uno", prompt_tokens=11, completion_tokens=2)])
    stub.route(user="Second", replies=[Reply(status=503, error_message="overloaded")])
    store = SQLiteStore(tmp_path / "runs.sqlite")
    oracle = oracle_for(stub, tmp_path, retries=1)

    outcome = runs.start(machine(TWO_STEPS), oracle, store=store, run_id="outage", options=RunOptions(suspendable=True))

    assert (outcome.status, outcome.result.at) == ("suspended", "second")
    assert outcome.result.error.startswith(f"provider-error: {MODEL}: ")
    assert len(stub.chat) == 2 + 2  # first + its judge, then two failed tries of second
    first_usage = stub.usage()

    stub.reset()  # the provider is healthy again
    stub.route(user="Second", replies=[Reply("dos", prompt_tokens=13, completion_tokens=3)])
    resumed = runs.resume_journal(store, "outage", oracle_for(stub, tmp_path))

    assert (resumed.status, resumed.result.result) == ("done", "dos")
    (asked,) = stub.chat  # completed calls were not asked again
    assert asked.user.startswith("Second after <data-") and "\nuno\n" in asked.user
    assert resumed.calls == {"made": 1, "replayed": 2}
    assert [s["state"] for s in resumed.result.trace] == ["first", "second"]
    assert resumed.result.usage == {
        "input_tokens": first_usage["input_tokens"] + 13,
        "output_tokens": first_usage["output_tokens"] + 3,
    }
    store.close()


def test_length_finish_marks_the_step_truncated(stub: StubServer, tmp_path: Path) -> None:
    stub.route(user="CONDITIONS:", replies=['{"choice": 1}'])
    stub.route(user="First.", replies=[Reply("a cut-off repl", finish_reason="length")])

    result = run(TWO_STEPS, stub, tmp_path)

    assert result.status == "done", result.error
    assert result.trace[0]["truncated"] is True
    assert result.trace[0]["output"] == "a cut-off repl"
    assert "truncated" not in result.trace[1]


FAN_OUT = """
mklang: "0.4"
machine: fan
entry: each
budget: 5
context:
  items: [short, long]
states:
  each:
    structure: A line about the item.
    prompt: "Describe {{item}}."
    over: "{{items}}"
    REASON
    output: lines
    gates:
      - { when: every line is complete, then: ok, to: END }
      - { when: otherwise, then: ok, to: END }
"""


def test_length_finish_in_a_fan_out_branch_marks_the_step_truncated(stub: StubServer, tmp_path: Path) -> None:
    stub.route(user="CONDITIONS:", replies=['{"choice": 1}'])
    stub.route(user="Describe short.", replies=["short line"])
    stub.route(user="Describe long.", replies=[Reply("a long line that got cu", finish_reason="length")])

    result = run(FAN_OUT.replace("REASON", "tier: fast"), stub, tmp_path)

    assert result.status == "done", result.error
    (step,) = result.trace
    assert step["branches"] == ["short line", "a long line that got cu"]
    assert step.get("truncated") is True  # the reference interpreter marks a fan-out step with a truncated branch


def test_reason_in_a_fan_out_traces_reasonings_and_shows_them_to_the_judge(stub: StubServer, tmp_path: Path) -> None:
    stub.route(user="CONDITIONS:", replies=['{"choice": 1}'])
    stub.route(user="Describe short.", replies=["<scratchpad>THOUGHT-S</scratchpad>short line"])
    stub.route(user="Describe long.", replies=["<scratchpad>THOUGHT-L</scratchpad>long line"])

    result = run(FAN_OUT.replace("REASON", "reason: true"), stub, tmp_path)

    assert result.status == "done", result.error
    (step,) = result.trace
    assert step["branches"] == ["short line", "long line"]
    assert step["reasonings"] == ["THOUGHT-S", "THOUGHT-L"]
    assert result.context["lines"] == ["short line", "long line"]
    assert "THOUGHT" not in json.dumps(result.context)
    (judge,) = stub.judge_requests
    assert "THOUGHT" not in fenced(judge.user, "OUTPUT") + fenced(judge.user, "CONTEXT")
    # docs/language.md §4: the scratchpad is "shown to the judge" (fan-out included)
    assert "REASONING:" in judge.user, "the judge never saw the branches' reasonings"
    reasoning = fenced(judge.user, "REASONING")
    assert "THOUGHT-S" in reasoning and "THOUGHT-L" in reasoning


REASONING = """
mklang: "0.4"
machine: thinker
entry: think
budget: 5
states:
  think:
    structure: The final answer only.
    prompt: "Think about it."
    reason: true
    output: answer
    gates:
      - { when: the answer is final, then: ok, to: use }
  use:
    structure: A sentence.
    prompt: "Use {{answer}}."
    output: used
    gates:
      - { when: otherwise, then: ok, to: END }
"""


def test_reason_splits_the_scratchpad_off_and_never_deposits_it(stub: StubServer, tmp_path: Path) -> None:
    stub.route(user="CONDITIONS:", replies=['{"choice": 1}'])
    stub.route(user="Think about it.", replies=["<scratchpad>\nPRIVATE-THOUGHT: 6 x 7\n</scratchpad>\nFinal: 42"])
    stub.route(user="Use", replies=["used it"])

    result = run(REASONING, stub, tmp_path)

    assert result.status == "done", result.error
    think_step, use_step = result.trace
    assert think_step["reasoning"] == "PRIVATE-THOUGHT: 6 x 7"
    assert think_step["output"] == "Final: 42"
    assert "reasoning" not in use_step
    assert result.context["answer"] == "Final: 42"
    assert "PRIVATE-THOUGHT" not in json.dumps(result.context)
    think_request = next(r for r in stub.produce_requests if r.user == "Think about it.")
    assert "<scratchpad>" in think_request.system  # asked for a scratchpad (the stub is not a reasoning model)
    (judge,) = stub.judge_requests
    assert fenced(judge.user, "REASONING") == "PRIVATE-THOUGHT: 6 x 7"  # shown to the judge as evidence
    assert "PRIVATE-THOUGHT" not in fenced(judge.user, "CONTEXT")
    use_request = next(r for r in stub.produce_requests if r.user.startswith("Use"))
    assert "PRIVATE-THOUGHT" not in use_request.user
    assert "Final: 42" in use_request.user


def test_judge_model_override_and_per_tier_settings(stub: StubServer, tmp_path: Path) -> None:
    stub.route(user="CONDITIONS:", replies=['{"choice": 1}'])
    stub.route(user="Fast one.", replies=["quick"])
    text = single("Fast one.", gates="- { when: it is quick, then: ok, to: END }", extra="    tier: fast\n")
    config = load_config(
        cwd=tmp_path,
        env={"MKL_JUDGE_MODEL": "openai/judge-model"},
        overrides={
            "model": MODEL,
            "api_base": "http://127.0.0.1:9/v1",  # unused: the fast tier has its own base
            "tiers": {"fast": {"model": "openai/fast-model", "api_base": stub.url, "params": {"max_tokens": 77}}},
        },
    )

    result = run_machine(machine(text), LiteLLMOracle(config))

    assert result.status == "done", result.error
    (produce,) = stub.produce_requests
    (judge,) = stub.judge_requests
    assert (produce.body["model"], produce.body["max_tokens"]) == ("fast-model", 77)
    assert judge.body["model"] == "judge-model"
    assert result.trace[0]["judge_model"] == "openai/judge-model"


def test_no_model_for_a_tier_halts_with_a_provider_error(tmp_path: Path) -> None:
    result = run_machine(machine(single("Anything.")), LiteLLMOracle(load_config(cwd=tmp_path, env={})))
    assert (result.status, result.at) == ("halt", "only")
    assert result.error.startswith("provider-error: no model is configured for tier 'balanced'")
    assert "MKL_MODEL" in result.error


def test_missing_keys_and_redact(litellm_module: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    assert missing_keys("openai/gpt-4o-mini") == ["OPENAI_API_KEY"]
    monkeypatch.setenv("OPENAI_API_KEY", FAKE_KEY)
    assert missing_keys("openai/gpt-4o-mini") == []
    assert redact(f"auth failed for {FAKE_KEY}!") == "auth failed for ***!"
    assert redact("key sk-abcdefgh12345678 leaked", env={}) == "key *** leaked"
    assert redact("short values stay", env={"MY_TOKEN": "stay"}) == "short values stay"
    assert redact("public value", env={"HOME_DIR": "public value"}) == "public value"


# -- secrets --------------------------------------------------------------------------------------


def test_api_key_never_reaches_store_envelope_or_trace(
    stub: StubServer, tmp_path: Path, caplog: pytest.LogCaptureFixture, capfd: pytest.CaptureFixture[str]
) -> None:
    """Durable runs (done, refused credentials, suspended outage) whose provider error bodies echo the key."""
    caplog.set_level(logging.DEBUG, logger="mkl_notebook")
    echo = f"Incorrect API key provided: {FAKE_KEY}. You can find your API key at the dashboard."
    stub.route(user="CONDITIONS:", replies=[Reply(status=429, error_message=f"slow down, {FAKE_KEY}"), '{"choice": 1}'])
    stub.route(user="First.", replies=["uno"])
    stub.route(user="Second after refused.", replies=[Reply(status=401, error_message=echo)])
    stub.route(user="Second after down.", replies=[Reply(status=500, error_message=f"{echo} (server)")])
    stub.route(user="Second after", replies=["dos"])
    path = tmp_path / "runs.sqlite"
    store = SQLiteStore(path)
    oracle = oracle_for(stub, tmp_path, retries=1)
    outage = machine(TWO_STEPS)

    done = runs.start(outage, oracle, store=store, run_id="secret-done")
    assert done.status == "done", done.result.error
    # the same machine, with the second prompt picking a failing route
    refused = runs.start(machine(TWO_STEPS.replace("{{one}}", "refused")), oracle, store=store, run_id="secret-refused")
    down = runs.start(
        machine(TWO_STEPS.replace("{{one}}", "down")),
        oracle,
        store=store,
        run_id="secret-down",
        options=RunOptions(suspendable=True),
    )

    assert (refused.status, refused.result.at) == ("halt", "second")
    assert "refused the credentials" in refused.result.error and "***" in refused.result.error
    assert (down.status, down.result.at) == ("suspended", "second")
    assert "***" in down.result.error

    # the test means something: the key did go to the provider, and error bodies echoed it
    assert stub.chat and all(r.headers.get("authorization") == f"Bearer {FAKE_KEY}" for r in stub.chat)
    assert any(r.reply and r.reply.error_message and FAKE_KEY in r.reply.error_message for r in stub.chat)

    texts = {"mkl_notebook log": caplog.text, "captured stdout/stderr": "".join(capfd.readouterr())}
    for name, outcome in (("done", done), ("refused", refused), ("down", down)):
        texts[f"{name} envelope"] = json.dumps(checkpoint_of(outcome))
        texts[f"{name} result"] = json.dumps(outcome.result.as_dict(), default=str)
        texts[f"{name} records"] = json.dumps(store.read(outcome.run_id), default=str)
    for where, text in texts.items():
        assert FAKE_KEY not in text, f"the API key leaked into the {where}"
    assert FAKE_KEY.encode() not in store_bytes(path)
    store.close()
    assert FAKE_KEY.encode() not in store_bytes(path)


def test_api_key_never_reaches_debug_log_output(
    stub: StubServer, tmp_path: Path, caplog: pytest.LogCaptureFixture, capfd: pytest.CaptureFixture[str]
) -> None:
    """A host that logs at DEBUG (root logger) must not receive the key from a provider's error body."""
    for name in LOGGERS:
        caplog.set_level(logging.DEBUG, logger=name)
    echo = f"Incorrect API key provided: {FAKE_KEY}"
    stub.route(user="Retried.", replies=[Reply(status=429, error_message=echo), "fine"])
    stub.route(user="Refused.", replies=[Reply(status=401, error_message=echo)])

    retried = run(single("Retried."), stub, tmp_path)
    refused = run(single("Refused."), stub, tmp_path)

    assert (retried.status, refused.status) == ("done", "halt")
    assert FAKE_KEY not in refused.error
    assert caplog.records  # DEBUG records were captured
    leaks = [
        f"{record.name}:{record.levelname}: {record.getMessage()[:160]!r}"
        for record in caplog.records
        if FAKE_KEY in record.getMessage()
    ]
    if FAKE_KEY in "".join(capfd.readouterr()):
        leaks.append("stdout/stderr")
    assert not leaks, "the API key reached the log output:\n" + "\n".join(leaks)


# -- the command line ------------------------------------------------------------------------------


CLI_MACHINE = """mklang: "0.4"
machine: greet
entry: hello
budget: 4
context:
  name: world
states:
  hello:
    structure: A greeting.
    prompt: "Greet {{name}}."
    output: greeting
    gates:
      - { when: the greeting is friendly, then: ok, to: END }
"""


def test_cli_run_against_a_standalone_stub_process(tmp_path: Path) -> None:
    script = {
        "routes": [
            {
                "user": "CONDITIONS:",
                "replies": [{"content": '{"choice": 1}', "prompt_tokens": 9, "completion_tokens": 1}],
            },
            {
                "user": "Greet world.",
                "replies": [
                    {"status": 429, "error_message": f"slow down, {FAKE_KEY}"},
                    {"content": "Hello, world!", "prompt_tokens": 14, "completion_tokens": 4},
                ],
            },
        ]
    }
    (tmp_path / "mkl.toml").write_text("backoff = 0.01\n", encoding="utf-8")
    (tmp_path / "script.json").write_text(json.dumps(script), encoding="utf-8")
    (tmp_path / "m.mkl").write_text(CLI_MACHINE, encoding="utf-8")
    server = subprocess.Popen(
        [sys.executable, str(STUB_SCRIPT), str(tmp_path / "script.json")],
        stdout=subprocess.PIPE,
        text=True,
        cwd=tmp_path,
    )
    try:
        assert server.stdout is not None
        port = int(server.stdout.readline())
        api_base = f"http://127.0.0.1:{port}/v1"
        completed = subprocess.run(
            mkl_command(
                "run",
                "m.mkl",
                "--model",
                MODEL,
                "--api-base",
                api_base,
                "--id",
                "greeting",
                "--checkpoint",
                "greeting.json",
            ),
            cwd=tmp_path,
            env=clean_env(OPENAI_API_KEY=FAKE_KEY),
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/_requests", timeout=10) as response:
            seen = json.loads(response.read())
    finally:
        server.terminate()
        server.wait(timeout=10)

    assert completed.returncode == 0, completed.stderr
    status = status_line(completed.stdout)
    assert status["status"] == "done"
    assert status["result"] == "Hello, world!"
    assert status["run"] == "greeting"
    assert status["usage"] == {"input_tokens": 23, "output_tokens": 5}
    assert status["calls"] == {"made": 2, "replayed": 0}
    assert [r["path"] for r in seen] == ["/v1/chat/completions"] * 3  # the produce call was retried once
    assert [r["reply"]["status"] for r in seen] == [429, 200, 200]
    assert all(r["headers"]["authorization"] == f"Bearer {FAKE_KEY}" for r in seen)
    for text in (completed.stdout, completed.stderr, (tmp_path / "greeting.json").read_text(encoding="utf-8")):
        assert FAKE_KEY not in text
    assert FAKE_KEY.encode() not in store_bytes(tmp_path / ".mkl" / "runs.sqlite")


def test_cli_never_writes_the_api_key(stub: StubServer, tmp_path: Path) -> None:
    """An outage whose error bodies echo the key, suspended with --checkpoint."""
    echo = f"Incorrect API key provided: {FAKE_KEY}"
    stub.route(user="\noutage\n", replies=[Reply(status=500, error_message=echo)])
    (tmp_path / "m.mkl").write_text(CLI_MACHINE, encoding="utf-8")
    (tmp_path / "mkl.toml").write_text("retries = 1\nbackoff = 0.01\n", encoding="utf-8")
    completed = subprocess.run(
        mkl_command(
            "run",
            "m.mkl",
            "--model",
            MODEL,
            "--api-base",
            stub.url,
            "--set",
            "name=outage",
            "--suspend",
            "--id",
            "down",
            "--checkpoint",
            "down.json",
        ),
        cwd=tmp_path,
        env=clean_env(OPENAI_API_KEY=FAKE_KEY),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )

    assert completed.returncode == 3, completed.stderr
    status = status_line(completed.stdout)
    assert (status["status"], status["at"], status["run"]) == ("suspended", "hello", "down")
    assert status["error"].startswith(f"provider-error: {MODEL}: ") and "***" in status["error"]
    assert len(stub.chat) == 2  # one try and the retry mkl.toml allows
    assert all(r.headers.get("authorization") == f"Bearer {FAKE_KEY}" for r in stub.chat)
    assert FAKE_KEY not in completed.stdout
    assert FAKE_KEY not in completed.stderr
    assert FAKE_KEY not in (tmp_path / "down.json").read_text(encoding="utf-8")
    assert FAKE_KEY.encode() not in store_bytes(tmp_path / ".mkl" / "runs.sqlite")


def test_cli_re_run_of_a_halted_run_pays_for_nothing_until_retry_is_asked_for(stub: StubServer, tmp_path: Path) -> None:
    stub.route(user="\noutage\n", replies=[Reply(status=500, error_message="down")])
    (tmp_path / "m.mkl").write_text(CLI_MACHINE, encoding="utf-8")
    (tmp_path / "mkl.toml").write_text("retries = 0\nbackoff = 0.01\n", encoding="utf-8")
    given = ("run", "m.mkl", "--model", MODEL, "--api-base", stub.url, "--set", "name=outage", "--id", "o")

    def mkl(*args: str) -> tuple[int, dict[str, Any]]:
        done = subprocess.run(
            mkl_command(*args), cwd=tmp_path, env=clean_env(OPENAI_API_KEY=FAKE_KEY), capture_output=True, text=True
        )
        return done.returncode, status_line(done.stdout)

    code, first = mkl(*given)
    assert (code, first["status"]) == (1, "halt") and "down" in first["error"]
    stub.reset()
    stub.route(user="\noutage\n", replies=[Reply("Hello, outage!")])
    stub.route(user="CONDITIONS:", replies=[Reply('{"choice": 1}')])
    code, again = mkl(*given)
    assert (code, again["error"], again["calls"]) == (1, first["error"], {"made": 0, "replayed": 1})
    assert stub.chat == []
    code, retried = mkl(*given, "--retry")
    assert (code, retried["result"], retried["calls"]["made"]) == (0, "Hello, outage!", 2)


def test_cli_without_a_model_explains_in_one_line(tmp_path: Path) -> None:
    (tmp_path / "m.mkl").write_text(CLI_MACHINE, encoding="utf-8")
    completed = subprocess.run(
        mkl_command("run", "m.mkl"),
        cwd=tmp_path,
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )

    assert completed.returncode == 2
    lines = completed.stderr.strip().splitlines()
    assert len(lines) == 1, completed.stderr
    assert "MKL_MODEL" in lines[0] and "--script" in lines[0]
    assert "Traceback" not in completed.stderr + completed.stdout
    assert status_line(completed.stdout)["status"] == "error"


def test_importing_the_package_does_not_import_litellm(tmp_path: Path) -> None:
    code = (
        "import sys\nimport mkl_notebook\nprint('litellm' in sys.modules)\nimport mkl_notebook.cli\n"
        "print('litellm' in sys.modules)\nimport mkl_notebook.providers.litellm_provider\n"
        "print('litellm' in sys.modules)\n"
    )
    completed = subprocess.run(
        [sys.executable, "-c", code],
        cwd=tmp_path,
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert completed.stdout.split() == ["False", "False", "False"]


# -- configuration ---------------------------------------------------------------------------------


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def test_config_defaults(tmp_path: Path) -> None:
    config = load_config(cwd=tmp_path, env={})
    assert config == ModelConfig()
    assert not config.configured
    assert (config.timeout, config.retries, config.backoff, config.source) == (60.0, 3, 1.0, "defaults")
    assert all(config.model_for(tier) is None for tier in ("fast", "balanced", "reasoning"))


def test_config_precedence(tmp_path: Path) -> None:
    outer = tmp_path / "outer"
    write(
        outer / "pyproject.toml",
        '[project]\nname = "x"\n\n[tool.mkl]\nmodel = "openai/from-pyproject"\n'
        'judge = "openai/judge-pyproject"\ntimeout = 5\n\n[tool.mkl.tiers.fast]\nmodel = "openai/fast-pyproject"\n'
        'api_base = "http://fast.invalid/v1"\nparams = { max_tokens = 100 }\n',
    )
    inner = outer / "a" / "b"
    inner.mkdir(parents=True)

    from_pyproject = load_config(cwd=inner, env={})  # found upward
    assert from_pyproject.source == str(outer / "pyproject.toml")
    assert from_pyproject.model_for("balanced") == "openai/from-pyproject"
    assert from_pyproject.model_for("fast") == "openai/fast-pyproject"  # the tier table beats model
    assert from_pyproject.api_base_for("fast") == "http://fast.invalid/v1"
    assert from_pyproject.api_base_for("balanced") is None
    assert from_pyproject.params_for("fast") == {"max_tokens": 100}
    assert (from_pyproject.judge, from_pyproject.timeout, from_pyproject.retries) == ("openai/judge-pyproject", 5.0, 3)

    # a nearer folder's mkl.toml wins (the whole file; nothing is merged from farther files)
    write(outer / "a" / "mkl.toml", 'model = "openai/from-mkl-toml"\nretries = 1\n')
    nearer = load_config(cwd=inner, env={})
    assert nearer.source == str(outer / "a" / "mkl.toml")
    assert nearer.model_for("fast") == "openai/from-mkl-toml"
    assert (nearer.judge, nearer.timeout, nearer.retries) == (None, 60.0, 1)

    # in one folder mkl.toml beats pyproject.toml; a pyproject.toml without [tool.mkl] is skipped
    write(inner / "pyproject.toml", '[tool.mkl]\nmodel = "openai/same-folder-pyproject"\n')
    write(inner / "mkl.toml", 'model = "openai/same-folder-mkl"\n')
    assert load_config(cwd=inner, env={}).model_for("balanced") == "openai/same-folder-mkl"
    (inner / "mkl.toml").unlink()
    assert load_config(cwd=inner, env={}).model_for("balanced") == "openai/same-folder-pyproject"
    write(inner / "pyproject.toml", '[project]\nname = "no-mkl-table"\n')
    assert load_config(cwd=inner, env={}).model_for("balanced") == "openai/from-mkl-toml"

    # the environment beats the file; a tier variable beats MKL_MODEL
    env = {
        "MKL_MODEL": "openai/env",
        "MKL_MODEL_REASONING": "openai/env-reasoning",
        "MKL_JUDGE_MODEL": "openai/env-judge",
        "MKL_API_BASE": "http://env.invalid/v1",
    }
    from_env = load_config(cwd=inner, env=env)
    assert from_env.source == "environment"
    assert (from_env.model_for("balanced"), from_env.model_for("reasoning")) == ("openai/env", "openai/env-reasoning")
    assert (from_env.judge, from_env.api_base) == ("openai/env-judge", "http://env.invalid/v1")
    assert from_env.retries == 1  # file values the environment does not set survive

    # flags beat the environment; None means "not given"
    flags = load_config(cwd=inner, env=env, overrides={"model": "openai/flag", "api_base": None, "judge": None})
    assert flags.source == "flags"
    assert (flags.model_for("balanced"), flags.model_for("reasoning")) == ("openai/flag", "openai/flag")
    assert (flags.judge, flags.api_base) == ("openai/env-judge", "http://env.invalid/v1")


def test_config_reads_os_environ_by_default(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [name for name in os.environ if name.startswith("MKL_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("MKL_MODEL", "openai/os-environ")
    monkeypatch.chdir(tmp_path)
    assert load_config().model_for("balanced") == "openai/os-environ"


@pytest.mark.parametrize(
    ("body", "key"),
    [
        ('modle = "openai/typo"\n', "modle"),
        ('timeout = "soon"\n', "timeout"),
        ("retries = 1.5\n", "retries"),
        ("backoff = -1\n", "backoff"),
        ("model = 3\n", "model"),
        ('judge = ""\n', "judge"),
        ('[tiers.quick]\nmodel = "x"\n', "quick"),
        ('[tiers.fast]\nmodel = "x"\ntemperature = 0\n', "temperature"),
        ("[tiers.fast]\nparams = 3\n", "tiers.fast.params"),
        ("fast = 7\n", "fast"),
        ("timeout = true\n", "timeout"),
        ("retries = false\n", "retries"),
    ],
)
def test_bad_config_names_the_file_and_the_key(tmp_path: Path, body: str, key: str) -> None:
    for name, text in (
        ("mkl.toml", body),
        ("pyproject.toml", "[tool.mkl]\n" + body.replace("[tiers.", "[tool.mkl.tiers.")),
    ):
        folder = tmp_path / name.replace(".", "_")
        path = write(folder / name, text)
        with pytest.raises(ConfigError) as caught:
            load_config(cwd=folder, env={})
        message = str(caught.value)
        assert str(path) in message and key in message, message


def test_unreadable_config_file_names_the_file(tmp_path: Path) -> None:
    path = write(tmp_path / "mkl.toml", "model = \n")
    with pytest.raises(ConfigError, match=re.escape(str(path))):
        load_config(cwd=tmp_path, env={})


# -- the canary: URL credentials and authorization values reach nothing a run writes ---------------

URL_PASSWORD = "Canary-S3cr3t-Pa55"
URL_PAIR = f"alice:{URL_PASSWORD}"
URL_BASIC = base64.b64encode(URL_PAIR.encode()).decode()
CANARIES = (URL_PASSWORD, URL_BASIC, FAKE_KEY)


def _left_behind(folder: Path) -> bytes:
    """Every file a run left in ``folder``: the store and its log, checkpoints, notebooks."""
    return b"".join(path.read_bytes() for path in sorted(folder.rglob("*")) if path.is_file())


def test_url_credentials_and_authorization_echoes_never_reach_anything_a_run_writes(
    stub: StubServer, tmp_path: Path
) -> None:
    """A provider that echoes the Authorization header (and the URL) in its answers and in its error
    bodies: the run's store, checkpoint, stdout and stderr hold none of it."""
    with_credentials = stub.url.replace("http://", f"http://{URL_PAIR}@")
    echo = f"Authorization: Basic {URL_BASIC}; Authorization: Bearer {FAKE_KEY}; from {with_credentials}"
    stub.route(user="CONDITIONS:", replies=['{"choice": 1}'])
    stub.route(user="\necho\n", replies=[f"Hello! ({echo})"])
    stub.route(user="\noutage\n", replies=[Reply(status=500, error_message=echo)])
    (tmp_path / "m.mkl").write_text(CLI_MACHINE, encoding="utf-8")
    (tmp_path / "mkl.toml").write_text("retries = 0\n", encoding="utf-8")
    outputs = []
    for name, flags in (("echo", ()), ("outage", ("--suspend",))):
        completed = subprocess.run(
            mkl_command(
                "run",
                "m.mkl",
                "--model",
                MODEL,
                "--api-base",
                with_credentials,
                "--set",
                f"name={name}",
                "--id",
                name,
                "--checkpoint",
                f"{name}.json",
                *flags,
            ),
            cwd=tmp_path,
            env=clean_env(OPENAI_API_KEY=FAKE_KEY),
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert completed.returncode in (0, 3), completed.stderr
        outputs.append(completed.stdout + completed.stderr)
    assert "Hello! (Authorization: ***" in outputs[0], outputs[0]  # the answer arrived, scrubbed
    assert "provider-error" in outputs[1]
    written = _left_behind(tmp_path)
    for canary in CANARIES:
        assert canary not in "".join(outputs), canary
        assert canary.encode() not in written, canary


def test_config_display_never_shows_url_credentials(load_mkl: Any, shell: Any) -> None:
    load_mkl(lambda *args, **kwargs: None)
    with capture_output() as shown:
        shell.run_line_magic("mkl", f"config api_base=http://{URL_PAIR}@models.example:8080/v1")
    assert "http://***@models.example:8080/v1" in shown.stdout
    assert URL_PASSWORD not in shown.stdout and "alice" not in shown.stdout


def test_scrub_removes_every_kind_of_secret() -> None:
    text = (
        f"key {FAKE_KEY} sk-abcdefghijklmnop, url https://bob:pw123456@h/x, 'authorization': 'Basic QWxhZGRpbjpvcGVu', "
        "Proxy-Authorization: Bearer eyJhbGciOi.JIUzI1.NiIsInR5c, x-api-key=abc123456789"
    )
    clean = scrub(text, url_secrets("https://bob:pw123456@h/x"), env={"OPENAI_API_KEY": FAKE_KEY})
    for secret in (FAKE_KEY, "sk-abcdefghijklmnop", "pw123456", "QWxhZGRpbjpvcGVu", "eyJhbGciOi", "abc123456789"):
        assert secret not in clean, (secret, clean)
    assert "https://***@h/x" in clean
