"""Durable runs: a resumed, replayed or edited run behaves exactly like an uninterrupted one.

Every test here drives the public durable API (``mkl_notebook.durable.runs``) or the
``mkl`` command, and compares what a user sees (result, trace, context, usage, status,
error) and what they pay for (the scripted oracle's per-kind call counts, the
``calls`` counter) against an uninterrupted run of the same machine.
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from mkl_notebook.durable import runs
from mkl_notebook.durable.fingerprint import fingerprint
from mkl_notebook.durable.stores import MemoryStore, SQLiteStore
from mkl_notebook.engine import tools as tools_module
from mkl_notebook.engine.options import RunOptions
from mkl_notebook.engine.oracle import HookRequest, JudgeRequest, ProduceRequest, ToolRequest
from mkl_notebook.engine.result import RunResult
from mkl_notebook.engine.runner import run_machine
from mkl_notebook.lang.loader import load
from mkl_notebook.lang.model import Machine
from mkl_notebook.providers.host import HostOracle, Registry
from mkl_notebook.providers.scripted import ScriptedOracle, oracle_from_script
from mkl_notebook.testing import load_cases, run_options

from support import LOOKUP

HERE = Path(__file__).resolve().parent
CASES = sorted((HERE / "conformance" / "cases").glob("*.yaml"))
SECRET = b"durable-test-key"
COMPARED = ("status", "error", "at", "result", "usage", "trace", "context", "ask", "reply_to", "diagnosis")


# -- helpers ------------------------------------------------------------------------------


def _view(result: RunResult) -> dict[str, Any]:
    return {key: copy.deepcopy(getattr(result, key)) for key in COMPARED}


def _uninterrupted(
    machine: Machine,
    script: dict[str, Any],
    options: RunOptions,
    *,
    registry: dict[str, Machine] | None = None,
    input: dict[str, Any] | None = None,
    context: dict[str, Any] | None = None,
    replies: list[Any] | None = None,
) -> tuple[RunResult, dict[str, int]]:
    script = copy.deepcopy(script)
    if replies:
        script["replies"] = list(replies)
    oracle = oracle_from_script(script)
    result = run_machine(
        machine,
        oracle,
        registry=registry,
        context=copy.deepcopy(context or {}),
        input=copy.deepcopy(input or {}),
        options=options,
    )
    return result, dict(oracle.calls)


@dataclasses.dataclass
class Stepped:
    outcome: runs.Outcome
    calls: dict[str, int]
    advances: int  # start + every resume
    suspensions: list[tuple[str | None, str | None]]  # (reason, at) of every intermediate suspension
    made: int  # sum of Outcome.calls["made"] over all advances


def _stepped(
    machine: Machine,
    script: dict[str, Any],
    options: RunOptions,
    *,
    registry: dict[str, Machine] | None = None,
    input: dict[str, Any] | None = None,
    context: dict[str, Any] | None = None,
    replies: list[Any] | None = None,
    store: Any = None,
    run_id: str = "stepped",
) -> Stepped:
    """Start with a budget of one step and resume with one more step each time; answer escalations by reply."""
    store = store if store is not None else MemoryStore()
    oracle = oracle_from_script(copy.deepcopy(script))  # no replies: every escalation waits for resume(reply=)
    ceiling = options.max_steps if options.max_steps is not None else machine.budget
    budget = 1
    outcome = runs.start(
        machine,
        oracle,
        store=store,
        run_id=run_id,
        registry=registry,
        input=copy.deepcopy(input or {}),
        context=copy.deepcopy(context or {}),
        options=dataclasses.replace(options, max_steps=budget),
    )
    pending = list(replies or [])
    advances, made, suspensions = 1, outcome.calls["made"], []
    for _ in range(400):
        result = outcome.result
        if result.status != "suspended":
            break
        if result.error == "budget-exhausted" and budget < ceiling:
            suspensions.append((result.error, result.at))
            budget += 1
            outcome = runs.resume_journal(store, run_id, oracle, max_steps=budget)
        elif result.error == "escalated" and pending:
            suspensions.append((result.error, result.at))
            outcome = runs.resume_journal(store, run_id, oracle, reply=pending.pop(0), has_reply=True, max_steps=budget)
        else:
            break  # the uninterrupted run ends suspended here too
        advances += 1
        made += outcome.calls["made"]
    else:  # pragma: no cover - a run that never settles is a failure of its own
        pytest.fail("the stepped run did not settle within 400 resumes")
    return Stepped(outcome, dict(oracle.calls), advances, suspensions, made)


def _assert_equivalent(machine: Machine, script: dict[str, Any], options: RunOptions, **kwargs: Any) -> Stepped:
    expected, expected_calls = _uninterrupted(machine, script, options, **kwargs)
    stepped = _stepped(machine, script, options, **kwargs)
    if len(expected.trace) >= 2:
        assert stepped.suspensions, "the stepped run never suspended: it did not test resuming"
    got = stepped.outcome.result
    assert _view(got) == _view(expected)
    assert got.visits == expected.visits
    assert stepped.calls == expected_calls, "every answer must be requested exactly once in total"
    assert stepped.made == sum(count for kind, count in expected_calls.items() if kind != "reply")
    return stepped


# -- round-trip equivalence: conformance cases ---------------------------------------------------


@pytest.mark.parametrize("path", CASES, ids=[path.stem for path in CASES])
def test_conformance_case_resumed_at_every_loop_top_equals_uninterrupted(path: Path) -> None:
    (case,) = load_cases([path])
    options = dataclasses.replace(run_options(case.run, case.name), suspendable=True, secret=SECRET)
    _assert_equivalent(
        case.machine,
        dict(case.script),
        options,
        registry=dict(case.registry),
        input=dict(case.input),
        context=dict(case.context),
    )


def test_the_conformance_suite_is_there() -> None:
    assert len(CASES) >= 33


# -- round-trip equivalence: longer hand-written machines ------------------------------------------

REPAIR = """
machine: essay
entry: outline
budget: 30
result: final
context: { topic: tides }
states:
  outline:
    structure: a bullet list
    prompt: "outline about {{topic}}"
    output: outline
    gates:
      - { when: otherwise, then: ok, to: draft }
  draft:
    structure: an essay
    prompt: "draft from {{outline}}"
    output: draft
    gates:
      - { when: the draft cites a source, then: ok, to: polish }
      - { when: the draft is too short, repair: 3, to: draft }
      - { when: otherwise, repair: 1, to: outline }
  polish:
    structure: an essay
    prompt: "polish {{draft}}"
    output: final
    gates:
      - { when: otherwise, then: ok, to: END }
"""
REPAIR_SCRIPT = {
    "llm": {
        "produce": ["o1", "d1", "d2", "d3", "o2", "d4", "d5", "final essay"],
        "judge": [1, 1, "none", 1, 0],
        "tokens": [5, 7],
    }
}

CEILING = """
machine: poller
entry: check
budget: 40
states:
  check:
    structure: a status word
    prompt: "is the export ready?"
    output: status
    max_visits: 4
    gates:
      - { when: ready, hook: is_ready, then: ok, to: END }
      - { when: the export failed, then: ok, to: wait }
      - { when: otherwise, then: ok, to: wait }
  wait:
    tool: sleep_a_bit
    input: { seconds: 1 }
    output: waited
    gates:
      - { when: otherwise, then: ok, to: check }
"""
CEILING_SCRIPT = {
    "llm": {"produce": ["no", "no", "no", "no", "no"], "judge": ["none", 0, "none"], "tokens": [2, 1]},
    "hooks": {"is_ready": [False]},
    "tools": {"sleep_a_bit": ["slept"]},
}

FANOUT = """
machine: mapper
entry: split
budget: 30
states:
  split:
    structure: a JSON list of parts
    prompt: "split the ticket {{ticket}}"
    parse: list
    output: parts
    gates:
      - { when: otherwise, then: ok, to: each }
  each:
    call: summarize
    over: "{{parts}}"
    input: { text: "{{item}}", n: "{{index}}" }
    output: sums
    gates:
      - { when: otherwise, then: ok, to: join }
  join:
    structure: one paragraph
    prompt: "join {{sums}}"
    output: joined
    gates:
      - { when: every part is covered, then: ok, to: END }
      - { when: otherwise, repair: 1, to: each }
"""
SUMMARIZE = """
machine: summarize
entry: s1
budget: 5
result: summary
states:
  s1:
    structure: one line
    prompt: "summarize part {{n}}: {{text}}"
    output: summary
    gates:
      - { when: otherwise, then: ok, to: count }
  count:
    tool: wordcount
    input: { text: "{{summary}}" }
    output: words
    gates:
      - { when: otherwise, then: ok, to: END }
"""
FANOUT_SCRIPT = {
    "llm": {
        "produce": {
            "split the ticket": '["alpha", "beta", "gamma"]',
            "summarize part 0": "SA",
            "summarize part 1": "SB",
            "summarize part 2": "SC",
            "join": "SA SB SC",
        },
        "judge": ["none", 0],
        "tokens": [3, 3],
    },
    "tools": {"wordcount": {"SA": "1 word", "SB": "1 word", "SC": "1 word"}},
}

NESTED_TOP = """
machine: top
entry: pre
budget: 12
states:
  pre:
    structure: s
    prompt: "prepare {{job}}"
    output: prepared
    gates:
      - { when: otherwise, then: ok, to: a }
  a:
    call: mid
    input: { job: "{{prepared}}" }
    output: mid_out
    gates:
      - { when: otherwise, then: ok, to: post }
  post:
    structure: s
    prompt: "review {{mid_out}}"
    output: reviewed
    gates:
      - { when: needs another pass, repair: 1, to: a }
      - { when: otherwise, then: ok, to: END }
"""
NESTED_MID = """
machine: mid
entry: m1
budget: 6
result: low_out
states:
  m1:
    structure: s
    prompt: "mid plans {{job}}"
    output: plan
    gates:
      - { when: otherwise, then: ok, to: m2 }
  m2:
    call: low
    input: { plan: "{{plan}}" }
    output: low_out
    gates:
      - { when: otherwise, then: ok, to: END }
"""
NESTED_LOW = """
machine: low
entry: l1
budget: 6
result: polished
states:
  l1:
    call: leaf
    input: { plan: "{{plan}}" }
    output: leaf_out
    gates:
      - { when: otherwise, then: ok, to: l2 }
  l2:
    structure: s
    prompt: "low polishes {{leaf_out}}"
    output: polished
    gates:
      - { when: otherwise, then: ok, to: END }
"""
NESTED_LEAF = """
machine: leaf
entry: f1
budget: 6
states:
  f1:
    structure: s
    prompt: "leaf works on {{plan}}"
    output: work
    gates:
      - { when: the work is complete, then: ok, to: END }
      - { when: otherwise, repair: 2, to: f1 }
"""
NESTED_SCRIPT = {
    "llm": {
        "produce": ["p", "mplan1", "w1", "w2", "pol1", "rev1", "mplan2", "w3", "pol2", "rev2"],
        "judge": ["none", 0, 0, 0, "none", 0, 1],
        "tokens": [1, 2],
    }
}

HITL = """
machine: refund
entry: draft
budget: 20
result: sent
states:
  draft:
    structure: a reply
    prompt: "draft a reply for {{ticket}}"
    output: draft
    gates:
      - { when: the reply promises a refund, escalate: true, to: review, ask: "Approve the refund?",
          reply_to: approval.answer }
      - { when: otherwise, then: ok, to: send }
  review:
    structure: a reply
    prompt: "apply the decision {{approval.answer}} to {{draft}}"
    output: revised
    gates:
      - { when: otherwise, escalate: true, to: check, ask: "Send it now?", reply_to: approval.send }
  check:
    structure: a verdict
    prompt: "check {{revised}} against {{approval.send}}"
    output: verdict
    gates:
      - { when: the verdict is negative, repair: 1, to: review }
      - { when: otherwise, then: ok, to: send }
  send:
    tool: send_reply
    input: { body: "{{revised}}" }
    output: sent
    gates:
      - { when: otherwise, then: ok, to: END }
"""
HITL_SCRIPT = {
    "llm": {
        "produce": ["we refund you", "refund approved", "looks bad", "refund approved v2", "fine"],
        "judge": [0, 0, 1],
        "tokens": [4, 4],
    },
    "tools": {"send_reply": ["sent #1"]},
}
HITL_REPLIES = ["approve", "yes, send", "send v2"]

TOOLS = """
machine: ops
entry: fetch
budget: 30
result: notice
context: { order: A-17 }
states:
  fetch:
    tool: lookup_order
    input: { id: "{{order}}" }
    output: order_json
    gates:
      - { when: otherwise, then: ok, to: price }
  price:
    tool: calc
    input: { expr: "2*21" }
    output: total
    gates:
      - { when: price ok, hook: "eq:total:42", then: ok, to: stock }
      - { when: otherwise, fail: true }
  stock:
    tool: check_stock
    input: { id: "{{order}}", reserved: "{{reserved}}" }
    output: stock
    gates:
      - { when: none left, hook: "eq:stock:0", then: ok, to: ship }
      - { when: otherwise, then: ok, to: reserve }
  reserve:
    tool: reserve_unit
    input: { order: "{{order_json}}" }
    output: reserved
    accumulate: true
    gates:
      - { when: otherwise, then: ok, to: stock }
  ship:
    tool: ship_order
    input: { id: "{{order}}", total: "{{total}}" }
    output: shipment
    gates:
      - { when: shipped, hook: shipment_ok, then: ok, to: notify }
      - { when: otherwise, fail: true }
  notify:
    structure: a message
    prompt: "tell the customer about {{shipment}}"
    output: notice
    gates:
      - { when: otherwise, then: ok, to: END }
"""
TOOLS_SCRIPT = {
    "llm": {"produce": ["your order shipped"], "tokens": [6, 2]},
    "tools": {
        "lookup_order": ['{"id": "A-17", "qty": 3}'],
        "calc": {"2*21": "42"},
        "check_stock": ["3", "2", "1", "0"],
        "reserve_unit": ["r1", "r2", "r3"],
        "ship_order": ["track-99"],
    },
    "hooks": {"shipment_ok": [True]},
}


def _registry(*sources: str) -> dict[str, Machine]:
    machines = [load(source) for source in sources]
    return {machine.name: machine for machine in machines}


def _opts(**kwargs: Any) -> RunOptions:
    return RunOptions(suspendable=True, secret=SECRET, **kwargs)


def test_repair_loop_resumed_at_every_step_equals_uninterrupted() -> None:
    stepped = _assert_equivalent(load(REPAIR), REPAIR_SCRIPT, _opts())
    result = stepped.outcome.result
    assert result.status == "done" and result.result == "final essay"
    assert [step["state"] for step in result.trace] == [
        "outline",
        "draft",
        "draft",
        "draft",
        "outline",
        "draft",
        "draft",
        "polish",
    ]
    assert stepped.advances == len(result.trace)  # one suspension at every loop top but the first


def test_loop_ceiling_resumed_at_every_step_fires_where_uninterrupted_does() -> None:
    stepped = _assert_equivalent(load(CEILING), CEILING_SCRIPT, _opts())
    result = stepped.outcome.result
    assert (result.status, result.error, result.at) == ("halt", "loop-ceiling", "check")
    assert result.visits == {"check": 4, "wait": 4}


def test_fanout_of_call_branches_resumed_at_every_step_equals_uninterrupted() -> None:
    registry = _registry(FANOUT, SUMMARIZE)
    stepped = _assert_equivalent(
        registry["mapper"], FANOUT_SCRIPT, _opts(), registry=registry, input={"ticket": "three things"}
    )
    result = stepped.outcome.result
    assert result.status == "done" and result.context["sums"] == ["SA", "SB", "SC"]
    assert stepped.calls["produce"] == 9 and stepped.calls["tool"] == 6


def test_nested_calls_three_deep_resumed_at_every_step_equal_uninterrupted() -> None:
    registry = _registry(NESTED_TOP, NESTED_MID, NESTED_LOW, NESTED_LEAF)
    stepped = _assert_equivalent(registry["top"], NESTED_SCRIPT, _opts(), registry=registry, input={"job": "j"})
    result = stepped.outcome.result
    assert result.status == "done", result.error
    call_step = result.trace[1]
    low_step = call_step["sub_trace"][1]
    leaf_step = low_step["sub_trace"][0]
    assert leaf_step["sub_trace"][0]["state"] == "f1"  # three levels below the root


def test_hitl_escalations_answered_by_resume_equal_replies_given_up_front() -> None:
    stepped = _assert_equivalent(
        load(HITL), HITL_SCRIPT, _opts(hitl="asking"), replies=HITL_REPLIES, input={"ticket": "broken kettle"}
    )
    result = stepped.outcome.result
    assert result.status == "done" and result.result == "sent #1"
    assert result.context["approval"] == {"answer": "approve", "send": "send v2"}
    assert [reason for reason, _ in stepped.suspensions].count("escalated") == len(HITL_REPLIES)
    assert stepped.calls["reply"] == len(HITL_REPLIES)


def test_tool_heavy_machine_resumed_at_every_step_equals_uninterrupted() -> None:
    stepped = _assert_equivalent(load(TOOLS), TOOLS_SCRIPT, _opts())
    result = stepped.outcome.result
    assert result.status == "done" and result.result == "your order shipped"
    assert result.context["reserved"] == ["r1", "r2", "r3"]
    assert stepped.calls["tool"] == 10


def test_stepped_runs_in_sqlite_store_too(tmp_path: Path) -> None:
    expected, _ = _uninterrupted(load(TOOLS), TOOLS_SCRIPT, _opts())
    store = SQLiteStore(tmp_path / "runs.sqlite")
    stepped = _stepped(load(TOOLS), TOOLS_SCRIPT, _opts(), store=store)
    assert _view(stepped.outcome.result) == _view(expected)
    assert SQLiteStore(tmp_path / "runs.sqlite").read("stepped") == stepped.outcome.records


# -- resuming, re-running, editing ------------------------------------------------------------


def _fresh_oracle(script: dict[str, Any]) -> ScriptedOracle:
    return oracle_from_script(copy.deepcopy(script))


def test_resume_with_the_same_budget_suspends_again_in_the_same_place_without_calls() -> None:
    store = MemoryStore()
    oracle = _fresh_oracle(REPAIR_SCRIPT)
    first = runs.start(load(REPAIR), oracle, store=store, run_id="same", options=_opts(max_steps=3))
    assert (first.result.status, first.result.error, first.result.at) == ("suspended", "budget-exhausted", "draft")
    counts = dict(oracle.calls)
    for budget in (3, None):
        again = runs.resume_journal(store, "same", oracle, max_steps=budget)
        assert (again.result.status, again.result.error, again.result.at) == ("suspended", "budget-exhausted", "draft")
        assert again.calls["made"] == 0
        assert again.result.trace == first.result.trace
        assert again.result.usage == first.result.usage
        assert oracle.calls == counts


def test_rerunning_a_finished_run_replays_without_calls() -> None:
    store = MemoryStore()
    machine = load(TOOLS)
    first = runs.start(machine, _fresh_oracle(TOOLS_SCRIPT), store=store, run_id="again", options=_opts())
    assert first.result.status == "done"
    assert first.calls["made"] == 12  # 10 tool observations, 1 hook verdict and 1 produce
    replay_oracle = _fresh_oracle(TOOLS_SCRIPT)
    again = runs.start(load(TOOLS), replay_oracle, store=store, run_id="again", options=_opts())
    assert again.calls == {"made": 0, "replayed": 12}
    assert set(replay_oracle.calls.values()) == {0}
    assert _view(again.result) == _view(first.result)
    assert not any(record["t"] in ("rerun", "invalidated") for record in again.records)


EDIT_BASE = """
machine: edit
entry: a
budget: 10
result: c_out
states:
  a:
    structure: s
    prompt: "alpha step"
    output: a_out
    gates:
      - { when: otherwise, then: ok, to: b }
  b:
    structure: s
    prompt: "beta step using {{a_out}}"
    output: b_out
    gates:
      - { when: otherwise, escalate: true, to: c, ask: "Go on?" }
  c:
    structure: s
    prompt: "gamma step with {{human.reply}}"
    output: c_out
    gates:
      - { when: otherwise, then: ok, to: END }
"""
EDIT_SCRIPT = {
    "llm": {
        "produce": {"alpha step v2": "A2", "alpha step": "A1", "gamma step": "C", "\nA1\n": "B1", "\nA2\n": "B2"},
        "tokens": [1, 1],
    }
}  # b's input is fenced


def test_editing_one_prompt_reexecutes_only_changed_calls_and_asks_again_about_a_changed_output() -> None:
    store = MemoryStore()
    oracle = _fresh_oracle(EDIT_SCRIPT)
    first = runs.start(load(EDIT_BASE), oracle, store=store, run_id="ed", options=_opts(hitl="asking"))
    assert (first.result.status, first.result.error, first.result.at) == ("suspended", "escalated", "c")
    done = runs.resume_journal(store, "ed", oracle, reply="yes", has_reply=True)
    assert done.result.status == "done" and done.result.context["b_out"] == "B1"

    edited = load(EDIT_BASE.replace('prompt: "alpha step"', 'prompt: "alpha step v2"'))
    assert edited.sha256 != load(EDIT_BASE).sha256
    oracle2 = _fresh_oracle(EDIT_SCRIPT)
    rerun = runs.start(edited, oracle2, store=store, run_id="ed", options=_opts(hitl="asking"))
    # b's output, which the person approved, is now B2: the earlier reply does not answer it
    assert (rerun.result.status, rerun.result.at) == ("suspended", "c")
    [again] = rerun.result.asked_again
    assert (again["value"], again["before"], again["now"]) == ("yes", "B1", "B2")
    assert rerun.result.question_id("ed") != first.result.question_id("ed")
    # a and b changed their requests; then the run asked for a reply (no one has given one yet)
    assert oracle2.calls == {"produce": 2, "judge": 0, "hook": 0, "tool": 0, "reply": 1}
    assert rerun.calls == {"made": 2, "replayed": 0}
    invalidated = [record["pos"] for record in rerun.records if record["t"] == "invalidated"]
    assert invalidated == ["root/0:a#1/produce", "root/1:b#1/produce"]
    rerun_records = [record for record in rerun.records if record["t"] == "rerun"]
    assert len(rerun_records) == 1 and rerun_records[0]["machines"]["edit"]["sha256"] == edited.sha256

    finished = runs.resume_journal(store, "ed", oracle2, reply="yes", has_reply=True)
    assert finished.result.result == "C" and finished.result.context["human"] == {"reply": "yes"}
    assert finished.calls == {"made": 0, "replayed": 3}  # c's request ("gamma step with yes") did not change


def test_fresh_starts_the_run_over() -> None:
    store = MemoryStore()
    first = runs.start(load(REPAIR), _fresh_oracle(REPAIR_SCRIPT), store=store, run_id="fr", options=_opts())
    oracle = _fresh_oracle(REPAIR_SCRIPT)
    again = runs.start(load(REPAIR), oracle, store=store, run_id="fr", options=_opts(), fresh=True)
    assert again.calls["made"] == first.calls["made"] == 13
    assert again.calls["replayed"] == 0
    assert oracle.calls["produce"] == 8 and oracle.calls["judge"] == 5
    assert _view(again.result) == _view(first.result)
    assert sum(1 for record in again.records if record["t"] == "start") == 1
    assert len(again.records) == len(first.records)


def test_loop_ceiling_after_two_resumes_fires_at_the_same_step() -> None:
    machine = load(CEILING)
    expected, expected_calls = _uninterrupted(machine, CEILING_SCRIPT, _opts())
    store = MemoryStore()
    oracle = _fresh_oracle(CEILING_SCRIPT)
    outcome = runs.start(machine, oracle, store=store, run_id="ceil", options=_opts(max_steps=3))
    assert outcome.result.status == "suspended" and outcome.result.visits == {"check": 2, "wait": 1}
    outcome = runs.resume_journal(store, "ceil", oracle, max_steps=6)
    assert outcome.result.status == "suspended" and outcome.result.visits == {"check": 3, "wait": 3}
    outcome = runs.resume_journal(store, "ceil", oracle, max_steps=40)
    result = outcome.result
    assert (result.status, result.error, result.at) == ("halt", "loop-ceiling", "check")
    assert result.trace[-1]["step"] == expected.trace[-1]["step"] == 8
    assert result.visits == expected.visits == {"check": 4, "wait": 4}
    assert _view(result) == _view(expected)
    assert oracle.calls == expected_calls


def test_repair_budget_is_exact_across_resumes() -> None:
    machine = load(REPAIR)
    expected, _ = _uninterrupted(machine, REPAIR_SCRIPT, _opts())
    store = MemoryStore()
    oracle = _fresh_oracle(REPAIR_SCRIPT)
    runs.start(machine, oracle, store=store, run_id="rep", options=_opts(max_steps=4))
    runs.resume_journal(store, "rep", oracle, max_steps=6)
    result = runs.resume_journal(store, "rep", oracle, max_steps=30).result
    policies = [(step["state"], step["policy"], step["gate"]) for step in result.trace]
    assert policies == [(step["state"], step["policy"], step["gate"]) for step in expected.trace]
    # the "too short" repair gate fired three times in all (its budget), the next verdict moved on
    assert [p for p in policies if p[2] == "the draft is too short"] == [
        ("draft", "repair", "the draft is too short")
    ] * 3


PARENT = """
machine: parent
entry: prepare
budget: 10
states:
  prepare:
    structure: one line
    prompt: "prepare"
    output: plan
    gates: [{when: otherwise, then: ok, to: delegate}]
  delegate:
    call: child
    output: report
    gates: [{when: otherwise, then: ok, to: END}]
"""

CHILD = """
machine: child
entry: a
budget: 2
states:
  a:
    structure: one line
    prompt: "one"
    output: x
    gates: [{when: otherwise, then: ok, to: b}]
  b:
    structure: one line
    prompt: "two"
    output: y
    gates: [{when: otherwise, then: ok, to: c}]
  c:
    structure: one line
    prompt: "three"
    output: z
    gates: [{when: otherwise, then: ok, to: END}]
"""


def test_more_steps_at_resume_go_to_the_called_machine_that_ran_out() -> None:
    """A sub-machine out of its own budget: raising the root's would only suspend again in the same place."""
    parent, child = load(PARENT), load(CHILD)
    registry = {"child": child}
    script = {"llm": {"produce": ["planned", "x1", "y1", "z1"]}}
    store = MemoryStore()
    oracle = _fresh_oracle(script)
    first = runs.start(parent, oracle, store=store, run_id="nested", registry=registry, options=_opts()).result
    assert (first.status, first.error, first.at, first.machine) == ("suspended", "budget-exhausted", "c", "child")
    resumed = runs.resume_journal(store, "nested", oracle, max_steps=3, registry=registry)
    result = resumed.result
    assert (result.status, result.result, result.machine) == ("done", "z1", None)
    assert resumed.calls == {"made": 1, "replayed": 3}
    assert [step["state"] for step in result.trace[-1]["sub_trace"]] == ["a", "b", "c"]
    resume_records = [record for record in resumed.records if record["t"] == "resume"]
    assert [record.get("budgets") for record in resume_records] == [{"child": 3}]
    assert "max_steps" not in resume_records[0]  # the root kept its own budget


def test_a_root_out_of_steps_still_gets_them_at_resume() -> None:
    parent, child = load(PARENT), load(CHILD.replace("budget: 2", "budget: 5"))
    store = MemoryStore()
    oracle = _fresh_oracle({"llm": {"produce": ["planned", "x1", "y1", "z1"]}})
    first = runs.start(
        parent, oracle, store=store, run_id="root-out", registry={"child": child}, options=_opts(max_steps=1)
    ).result
    assert (first.status, first.at, first.machine) == ("suspended", "delegate", None)
    result = runs.resume_journal(store, "root-out", oracle, max_steps=2, registry={"child": child}).result
    assert (result.status, result.result) == ("done", "z1")


# -- on_error -------------------------------------------------------------------------------------

ON_ERROR = """
machine: er
entry: look
budget: 6
states:
  look:
    tool: {tool}
    input: {{ q: "{{{{query}}}}" }}
    output: hit
    on_error:
{matchers}
    gates:
      - {{ when: otherwise, then: ok, to: after }}
  after:
    structure: s
    prompt: "use {{{{hit}}}}"
    output: used
    gates:
      - {{ when: otherwise, then: ok, to: END }}
  handle:
    structure: s
    prompt: "handle the outage"
    output: handled
    gates:
      - {{ when: otherwise, then: ok, to: END }}
"""


def _on_error_machine(tool: str, *matchers: str) -> Machine:
    return load(ON_ERROR.format(tool=tool, matchers="\n".join(f"      - {m}" for m in matchers)))


def _host(calls: list[str]) -> HostOracle:
    registry = Registry()

    @registry.tool(effect="read")
    def flaky(q: str) -> str:
        calls.append(q)
        if len(calls) == 1:
            raise TimeoutError("upstream timeout")
        return f"found {q}"

    @registry.tool(effect="read")
    def down(q: str) -> str:
        calls.append(q)
        raise ConnectionError("service down")

    @registry.tool(effect="read")
    def broken(q: str) -> str:
        calls.append(q)
        raise ValueError("boom")

    return HostOracle(ScriptedOracle({"produce": {"use": "used it", "handle": "handled"}}), registry)


def test_on_error_retry_then_success_journals_two_calls_and_replays_none() -> None:
    store, calls = MemoryStore(), []
    machine = _on_error_machine("flaky", '{ match: "timeout", retry: 2 }')
    options = _opts(retry_backoff=0.001)
    first = runs.start(machine, _host(calls), store=store, run_id="retry", input={"query": "q1"}, options=options)
    assert first.result.status == "done", first.result.error
    assert first.result.context["hit"] == "found q1"
    assert calls == ["q1", "q1"]
    ledger = [record for record in first.records if record["t"] == "answer" and record.get("kind") == "tool"]
    assert [record["pos"] for record in ledger] == ["root/0:look#1/tool", "root/0:look#1/tool~1"]
    assert "timeout" in ledger[0]["error"] and ledger[1]["answer"] == {"value": "found q1"}
    again = runs.start(machine, _host(calls), store=store, run_id="retry", input={"query": "q1"}, options=options)
    assert calls == ["q1", "q1"]  # neither the failed attempt nor the retry is called again
    assert again.calls["made"] == 0
    assert _view(again.result) == _view(first.result)


def test_on_error_route_sends_the_run_to_a_state() -> None:
    calls: list[str] = []
    machine = _on_error_machine("down", '{ match: "down", route: handle }')
    outcome = runs.start(
        machine,
        _host(calls),
        store=MemoryStore(),
        run_id="route",
        input={"query": "q"},
        options=_opts(retry_backoff=0.001),
    )
    result = outcome.result
    assert result.status == "done" and result.result == "handled"
    assert [(step["state"], step["to"]) for step in result.trace] == [("look", "handle"), ("handle", "END")]
    assert result.trace[0]["gate_via"] == "on_error"
    assert calls == ["q"]


def test_on_error_fallback_deposits_the_value() -> None:
    calls: list[str] = []
    machine = _on_error_machine("down", '{ match: "timeout", retry: 1 }', '{ match: "down", fallback: cached }')
    outcome = runs.start(
        machine,
        _host(calls),
        store=MemoryStore(),
        run_id="fb",
        input={"query": "q"},
        options=_opts(retry_backoff=0.001),
    )
    assert outcome.result.status == "done"
    assert outcome.result.context["hit"] == "cached"
    assert [step["state"] for step in outcome.result.trace] == ["look", "after"]
    assert calls == ["q"]


def test_on_error_unmatched_error_halts_with_state_error() -> None:
    store, calls = MemoryStore(), []
    machine = _on_error_machine("broken", '{ match: "timeout", retry: 3 }')
    outcome = runs.start(
        machine, _host(calls), store=store, run_id="unmatched", input={"query": "q"}, options=_opts(retry_backoff=0.001)
    )
    result = outcome.result
    assert (result.status, result.error, result.at) == ("halt", "state-error: boom", "look")
    assert calls == ["q"]
    replayed = runs.start(
        machine, _host(calls), store=store, run_id="unmatched", input={"query": "q"}, options=_opts(retry_backoff=0.001)
    )
    assert _view(replayed.result) == _view(result)
    assert calls == ["q"] and replayed.calls["made"] == 0


def test_on_error_retries_exhausted_halt_and_replay_does_not_call_again() -> None:
    store, calls = MemoryStore(), []
    machine = _on_error_machine("down", '{ match: "down", retry: 2 }')
    options = _opts(retry_backoff=0.001)
    first = runs.start(machine, _host(calls), store=store, run_id="spent", input={"query": "q"}, options=options)
    assert (first.result.status, first.result.error) == ("halt", "state-error: service down")
    assert calls == ["q"] * 3
    again = runs.start(machine, _host(calls), store=store, run_id="spent", input={"query": "q"}, options=options)
    assert calls == ["q"] * 3 and again.calls["made"] == 0
    assert _view(again.result) == _view(first.result)


# -- the command line -------------------------------------------------------------------------


def _mkl(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mkl_notebook.cli", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        check=False,
        timeout=60,
    )


def _status(completed: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    return json.loads(completed.stdout.strip().splitlines()[-1])


def test_cli_rerun_of_a_finished_id_makes_no_calls(tmp_path: Path) -> None:
    (tmp_path / "ops.mkl").write_text(TOOLS, encoding="utf-8")
    (tmp_path / "ops.script.yaml").write_text(yaml.safe_dump(TOOLS_SCRIPT), encoding="utf-8")
    first = _mkl(tmp_path, "run", "ops.mkl", "--script", "ops.script.yaml", "--id", "R1")
    assert first.returncode == 0, first.stderr
    status = _status(first)
    assert status["calls"] == {"made": 12, "replayed": 0}
    again = _mkl(tmp_path, "run", "ops.mkl", "--script", "ops.script.yaml", "--id", "R1")
    assert again.returncode == 0, again.stderr
    second = _status(again)
    assert second["calls"] == {"made": 0, "replayed": 12}
    assert (second["result"], second["usage"], second["run"]) == (status["result"], status["usage"], "R1")
    fresh = _mkl(tmp_path, "run", "ops.mkl", "--script", "ops.script.yaml", "--id", "R1", "--fresh")
    assert fresh.returncode == 0, fresh.stderr
    assert _status(fresh)["calls"] == {"made": 12, "replayed": 0}


NESTED_MID_HITL = NESTED_MID.replace(
    "      - { when: otherwise, then: ok, to: m2 }",
    '      - { when: otherwise, escalate: true, to: m2, ask: "Plan ok?" }',
)


def test_escalation_inside_a_nested_call_answered_by_resume_equals_uninterrupted() -> None:
    assert NESTED_MID_HITL != NESTED_MID
    registry = _registry(NESTED_TOP, NESTED_MID_HITL, NESTED_LOW, NESTED_LEAF)
    stepped = _assert_equivalent(
        registry["top"],
        NESTED_SCRIPT,
        _opts(hitl="asking"),
        registry=registry,
        input={"job": "j"},
        replies=["plan approved", "second plan approved"],
    )
    result = stepped.outcome.result
    assert result.status == "done", result.error
    escalations = [at for reason, at in stepped.suspensions if reason == "escalated"]
    assert escalations == ["m2", "m2"]  # the innermost state that runs on resume
    assert stepped.calls["reply"] == 2


# -- replaying where the tools are not registered -------------------------------------------------


def test_a_finished_run_replays_without_its_tools_registered() -> None:
    """Another machine (a shared notebook, a headless `mkl run --id`) replays a finished run whose tools it
    lacks: the journal knows the tool ran (``has_tool`` is answered from it), so nothing is called again.
    The tool was registered with ``effect="read"``; the replaying host cannot know that class."""
    calls: list[str] = []
    registry = Registry()

    @registry.tool(effect="read")
    def lookup(q: str) -> str:
        calls.append(q)
        return f"found {q}"

    store = MemoryStore()
    machine = load(LOOKUP)
    first = runs.start(
        machine,
        HostOracle(ScriptedOracle({"produce": ["used it"]}), registry),
        store=store,
        run_id="tools",
        options=_opts(),
    )
    assert first.result.status == "done" and calls == ["x"]
    again = runs.start(
        machine,
        HostOracle(ScriptedOracle({"produce": ["used it"]}), Registry()),
        store=store,
        run_id="tools",
        options=_opts(),
    )
    assert (again.result.status, again.result.error) == ("done", None)
    assert again.calls == {"made": 0, "replayed": 2}
    assert _view(again.result) == _view(first.result)


def test_cli_rerun_without_the_tools_file_replays_the_finished_run(tmp_path: Path) -> None:
    (tmp_path / "m.mkl").write_text(LOOKUP, encoding="utf-8")
    (tmp_path / "t.py").write_text(
        "import mkl_notebook\n\n\n@mkl_notebook.tool(effect='read')\ndef lookup(q):\n    return 'found ' + q\n",
        encoding="utf-8",
    )
    (tmp_path / "s.json").write_text(json.dumps({"llm": {"produce": ["used it"]}}), encoding="utf-8")
    first = _mkl(tmp_path, "run", "m.mkl", "--id", "R", "--script", "s.json", "--tools", "t.py")
    assert first.returncode == 0, first.stderr
    again = _mkl(tmp_path, "run", "m.mkl", "--id", "R", "--script", "s.json")
    assert again.returncode == 0, again.stdout
    assert _status(again)["calls"] == {"made": 0, "replayed": 2}
    assert _status(again)["result"] == "used it"


# -- fingerprints are part of the journal format -----------------------------------------------

_FINGERPRINTED = [
    (
        ProduceRequest(
            "root/1:a#1/produce",
            "m",
            "a",
            "balanced",
            "one line",
            None,
            "hello 'q' \"x\" é \x00 \ud800",
            True,
            False,
            0.4,
        ),
        "034d06ea343bd3128091df26",
    ),
    (
        ProduceRequest(
            "p",
            "m",
            "a",
            "fast",
            "(unspecified)",
            "be brief",
            "u",
            False,
            True,
            0.8,
            True,
            (("assistant", "ASK: x"), ("user", "y")),
        ),
        "f848b70af3aafbce3456aaf4",
    ),
    (
        JudgeRequest("p", "m", "a", "reasoning", ("is good", "is bad"), "out", None, '{"a": 1}', "abcdef012345"),
        "dcce7a274a57ff3929710fff",
    ),
    (JudgeRequest("p", "m", "a", "balanced", ("c",), "out", "why", "{}", "n"), "392731374dd246a2106bda65"),
    (HookRequest("p", "m", "a", "check", "{}", "out"), "f1cb3d376e9544c24a62cf7a"),
    (ToolRequest("p", "m", "a", "search", '{"q": 1}', "read", True, 0, 0.0), "4c6cf2d410f1aa43af923932"),
    (ToolRequest("p", "m", "a", "send", "{}", "effect", False, 2, 1.5), "e53138f5a21abc76db5fc14e"),
]


@pytest.mark.parametrize(("request_", "expected"), _FINGERPRINTED, ids=lambda value: getattr(value, "kind", ""))
def test_request_fingerprints_stay_what_earlier_journals_recorded(request_: Any, expected: str) -> None:
    """A journal saved by an earlier version (a notebook someone shared) must still replay, not re-ask."""
    assert fingerprint(request_) == expected
    moved = request_._replace(position="root/99:elsewhere#3/produce")
    assert fingerprint(moved) == expected  # the position is where a call sits, not what it asks
    if isinstance(request_, ProduceRequest):
        assert fingerprint(request_._replace(user=request_.user + " ")) != expected
    if isinstance(request_, JudgeRequest):
        assert fingerprint(request_._replace(context_json="{}" + " ")) != expected


@settings(max_examples=300, deadline=None)
@given(user=st.text(st.characters(codec="utf-8")) | st.text(st.characters(max_codepoint=127)), fenced=st.booleans())
def test_a_produce_fingerprint_is_the_hash_of_the_requests_repr(user: str, fenced: bool) -> None:
    """The definition earlier journals were written with, for any prompt text (quotes, escapes, non-ASCII)."""
    request_ = ProduceRequest("root/1:a#1/produce", "m", "a", "balanced", "one line", None, user, fenced, False, 0.4)
    # Every field in declaration order but the position: (kind, machine, state, tier, structure, execution, user,
    # fenced, reason, temperature, ask_human, conversation).
    values = ("produce", "m", "a", "balanced", "one line", None, user, fenced, False, 0.4, False, ())
    expected = hashlib.blake2b(repr(values).encode("utf-8", "surrogatepass"), digest_size=12)
    assert fingerprint(request_) == expected.hexdigest()


# -- no model where the run is resumed ---------------------------------------------------------


def test_resuming_where_no_model_is_configured_keeps_the_run_and_the_reply() -> None:
    """The shared-notebook case: the approver has no model. Their reply must be kept and the run must wait
    for a model, not halt for good."""
    from mkl_notebook.providers.scripted import NoModelOracle

    from support import REFUND, REFUND_RESULT, REFUND_SCRIPT

    machine = load(REFUND)
    script = yaml.safe_load(REFUND_SCRIPT.read_text(encoding="utf-8"))
    store = MemoryStore()
    options = RunOptions(hitl="all")
    first = runs.start(
        machine,
        oracle_from_script(script),
        store=store,
        run_id="r",
        options=options,
        input={"ticket": "Parcel A-1001 arrived broken"},
    )
    assert first.status == "suspended" and first.result.ask

    approver = runs.resume_journal(store, "r", NoModelOracle("no model is configured"), reply="approve", has_reply=True)
    assert approver.status == "suspended"
    assert "no model is configured" in (approver.result.error or "")
    assert approver.calls["made"] == 0  # nothing was asked of anyone
    assert (approver.result.at, approver.result.usage) == ("send", first.result.usage)  # tokens so far

    finished = runs.resume_journal(store, "r", oracle_from_script(script))  # later, where a model exists
    assert finished.status == "done", finished.result.error
    assert finished.result.result == REFUND_RESULT
    assert [r["value"] for r in store.read("r") if r.get("t") == "reply"] == ["approve"]  # asked once, kept


def test_a_rerun_after_an_engine_change_computes_the_result_the_current_engine_gives(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A finished run is replayed, never served from a cache: a fixed rule shows in the next re-run."""
    machine = load("""
        machine: lookup
        entry: find
        budget: 3
        states:
          find:
            tool: kb
            input: { q: "{{q}}" }
            output: found
            gates: [{ when: otherwise, then: ok, to: END }]
    """)
    store = SQLiteStore(tmp_path / "runs.sqlite")
    oracle = ScriptedOracle(tools={"kb": ['{"hit": 1}']})
    first = runs.start(machine, oracle, store=store, run_id="r", input={"q": "x"})
    assert first.result.result == '{"hit": 1}'
    monkeypatch.setattr(tools_module, "_observation_text", lambda observation: f"<{observation}>")
    again = runs.start(
        machine,
        ScriptedOracle(tools={"kb": []}),
        store=SQLiteStore(tmp_path / "runs.sqlite"),
        run_id="r",
        input={"q": "x"},
    )
    assert again.calls == {"made": 0, "replayed": 1}
    assert again.result.result == '<{"hit": 1}>'  # the rule as it is now, over the journaled observation
