"""Behaviour tests for the notebook's views (HTML + text twins) and state diagrams (mermaid + text twin).

Every result rendered here comes from actually running a machine against the
scripted oracle, except the in-doubt and model-question outcomes, which need a
durable store or a real model and are built as the engine would report them.
"""

from __future__ import annotations

import dataclasses
import re
import subprocess
import sys
import textwrap
from dataclasses import replace
from html.parser import HTMLParser
from typing import Any

import pytest

from mkl_notebook.app.status import run_output
from mkl_notebook.checkpoints.envelope import checkpoint_of, verify
from mkl_notebook.durable import runs
from mkl_notebook.durable.stores import MemoryStore
from mkl_notebook.engine.options import RunOptions
from mkl_notebook.engine.result import RunResult
from mkl_notebook.engine.runner import run_machine
from mkl_notebook.lang.loader import load
from mkl_notebook.lang.model import Machine
from mkl_notebook.providers.scripted import ScriptedOracle, oracle_from_file
from mkl_notebook.render import diagram, views
from mkl_notebook.render.audit_views import ALIGNED, TextTable, audit_bundle, audit_table_text
from mkl_notebook.render.batch_views import batch_bundle
from mkl_notebook.render.plan_views import plan_lines
from mkl_notebook.render.run_view import BUDGET_HALTS
from mkl_notebook.render.visits import visits_say_more
from mkl_notebook.testing import Outcome

from support import REFUND as REFUND_EXAMPLE
from support import REFUND_SCRIPT, chain_source

HOSTILE = "<script>alert(1)</script>"
RUN_MIME = "application/vnd.mkl.run+json"

# Tags JupyterLab's HTML sanitizer keeps (a subset of its allow-list); anything else would vanish or be unsafe.
ALLOWED_TAGS = {
    "blockquote",
    "br",
    "caption",
    "code",
    "details",
    "div",
    "em",
    "li",
    "mark",
    "ol",
    "p",
    "pre",
    "section",
    "small",
    "strong",
    "summary",
    "table",
    "tbody",
    "td",
    "tfoot",
    "th",
    "thead",
    "tr",
    "ul",
}
VOID_TAGS = {"br"}


# -- machines ---------------------------------------------------------------------------------

LOOPER = """
machine: looper
entry: draft
budget: 5
states:
  draft:
    structure: s
    prompt: write
    output: draft
    max_visits: 4
    gates:
      - { when: otherwise, then: ok, to: check }
  check:
    structure: s
    prompt: "check {{draft}}"
    output: verdict
    gates:
      - { when: good enough, then: ok, to: END }
      - { when: otherwise, then: ok, to: draft }
  unused:
    structure: s
    prompt: never
    output: x
    gates:
      - { when: otherwise, then: ok, to: END }
"""

FAN = """
machine: fan
entry: ideas
budget: 10
context: { topics: [alpha, beta] }
states:
  ideas:
    structure: s
    prompt: "idea {{index}}"
    sample: 3
    output: ideas
    gates:
      - { when: otherwise, then: ok, to: look }
  look:
    tool: search
    over: "{{topics}}"
    input: { q: "{{item}}" }
    output: found
    gates:
      - { when: otherwise, then: ok, to: END }
"""

PARENT = """
machine: parent
entry: prep
budget: 10
context: { items: [x, y] }
states:
  prep:
    call: middle
    output: mid
    gates:
      - { when: otherwise, then: ok, to: each }
  each:
    call: leaf
    over: "{{items}}"
    input: { what: "{{item}}" }
    output: leaves
    gates:
      - { when: otherwise, then: ok, to: END }
"""

MIDDLE = """
machine: middle
entry: m1
budget: 5
states:
  m1:
    call: leaf
    output: o
    gates:
      - { when: otherwise, then: ok, to: END }
"""

LEAF = """
machine: leaf
entry: l1
budget: 5
states:
  l1:
    structure: s
    prompt: "leaf {{what}}"
    output: o
    gates:
      - { when: otherwise, then: ok, to: END }
"""

REFUND = """
machine: refund
entry: draft
budget: 6
states:
  draft:
    structure: s
    prompt: write
    output: draft
    gates:
      - when: otherwise
        escalate: true
        to: review
        ask: "<script>alert(1)</script> Approve the refund?\\nSay yes or no."
        reply_to: approval.answer
  review:
    structure: s
    prompt: "apply {{approval.answer}}"
    output: final
    gates:
      - { when: otherwise, then: ok, to: END }
"""

STRICT = """
machine: strict
entry: a
budget: 3
states:
  a:
    structure: s
    prompt: p
    output: o
    gates:
      - { when: "is it bad: yes", fail: true }
      - { when: otherwise, then: ok, to: END }
"""

CALLER = """
machine: caller
entry: c
budget: 3
states:
  c:
    call: strict
    output: o
    gates:
      - { when: otherwise, then: ok, to: END }
"""

PARSER = """
machine: parser
entry: p
budget: 3
states:
  p:
    structure: s
    prompt: p
    parse: json
    output: o
    gates:
      - { when: otherwise, then: ok, to: END }
"""

FLAGS = """
machine: flags
entry: read
budget: 6
context: { ticket: "" }
states:
  read:
    structure: s
    prompt: "summarise {{ticket}}"
    output: summary
    gates:
      - { when: is urgent, then: ok, to: reply }
      - { when: otherwise, then: ok, to: END }
  reply:
    tool: send_reply
    input: { text: "{{summary}}" }
    output: sent
    gates:
      - { when: otherwise, then: ok, to: END }
"""

FALLBACK = """
machine: fallback
entry: a
budget: 3
states:
  a:
    structure: s
    prompt: p
    output: o
    gates:
      - { when: looks right, then: ok, to: b }
      - { when: otherwise, then: ok, to: END }
  b:
    structure: s
    prompt: p
    output: o
    gates:
      - { when: approved, hook: approved, then: ok, to: END }
"""

HOOKED = """
machine: hooked
entry: a
budget: 3
states:
  a:
    structure: s
    prompt: p
    output: o
    gates:
      - { when: approved, hook: approved, then: ok, to: END }
"""

WEIRD = r"""
machine: weird
entry: my-state
budget: 9
states:
  my-state:
    structure: s
    prompt: p
    output: o
    max_visits: 3
    gates:
      - { when: "score: \"high\"; # yes", then: ok, to: "a b" }
      - { when: "needs: more\nwork", repair: 2, to: my-state }
      - { when: "a --> b %%{init: {\"theme\": \"dark\"}}%%", then: ok, to: END }
  "a b":
    structure: s
    prompt: p
    output: o
    gates:
      - { when: "broken <b>", fail: true }
      - { when: otherwise, then: ok, to: END }
      - { when: "also done", then: ok, to: END }
  END:
    structure: s
    prompt: p
    output: o
    gates:
      - { when: otherwise, then: ok, to: "[*]" }
  "[*]":
    structure: s
    prompt: p
    output: o
    gates:
      - { when: otherwise, then: ok, to: state }
  state:
    structure: s
    prompt: p
    output: o
    gates:
      - { when: otherwise, then: ok, to: 'x"y' }
  'x"y':
    structure: s
    prompt: p
    output: o
    gates:
      - { when: otherwise, then: ok, to: "<b>bold</b>" }
  "<b>bold</b>":
    structure: s
    prompt: p
    output: o
    gates:
      - { when: otherwise, then: ok, to: ghost }
"""


def machine(text: str) -> Machine:
    return load(textwrap.dedent(text), strict=False)


def run(
    text: str,
    llm: dict[str, Any] | None = None,
    *,
    registry: tuple[str, ...] = (),
    tools: Any = None,
    hooks: Any = None,
    replies: list[Any] | None = None,
    input: dict[str, Any] | None = None,
    **options: Any,
) -> tuple[Machine, RunResult]:
    root = machine(text)
    machines = {m.name: m for m in map(machine, registry)}
    oracle = ScriptedOracle(llm or {}, tools, hooks, replies=replies)
    return root, run_machine(root, oracle, registry=machines, input=input, options=RunOptions(**options))


def budget_halt() -> tuple[Machine, RunResult]:
    return run(LOOPER, {"judge": ["none"], "tokens": [1000, 240]})


def fan_out() -> tuple[Machine, RunResult]:
    return run(FAN, {"produce": ["one", "two", HOSTILE]}, tools={"search": ["r1", "r2"]})


def nested() -> tuple[Machine, RunResult]:
    return run(PARENT, {"produce": ["deep", "leaf-x", "leaf-y"], "tokens": [3, 4]}, registry=(MIDDLE, LEAF))


def suspended() -> tuple[Machine, RunResult]:
    return run(REFUND, {"produce": [HOSTILE]}, hitl="asking")


def resumed() -> tuple[Machine, RunResult]:
    return run(REFUND, {"produce": [HOSTILE, "applied"]}, replies=["yes"], hitl="asking")


def gate_fail() -> tuple[Machine, RunResult]:
    return run(STRICT, {"judge": [0]})


def call_failed() -> tuple[Machine, RunResult]:
    return run(CALLER, {"judge": [0]}, registry=(STRICT,))


def parse_error() -> tuple[Machine, RunResult]:
    return run(PARSER, {"produce": ["not json"]})


def flagged() -> tuple[Machine, RunResult]:
    return run(
        FLAGS, {"produce": ["urgent!"], "judge": [0]}, tools={"send_reply": ["sent"]}, input={"ticket": "help me"}
    )


def judge_fallback() -> tuple[Machine, RunResult]:
    return run(FALLBACK, {"judge": "unparseable"})


def hook_decided() -> tuple[Machine, RunResult]:
    return run(HOOKED, {}, hooks={"approved": [True]})


def budget_suspended() -> tuple[Machine, RunResult]:
    return run(LOOPER, {"judge": ["none"]}, suspendable=True, max_steps=3)


def in_doubt() -> tuple[Machine, RunResult]:
    root, result = flagged()
    return root, RunResult(
        status="in_doubt",
        error="in-doubt: send_reply at root/1:reply#1/tool",
        at="reply",
        usage=result.usage,
        trace=result.trace[:1],
        visits=dict(result.visits),
    )


def model_question() -> tuple[Machine, RunResult]:
    root, result = suspended()
    return root, replace(result, error="asked", ask=None, question=f"Which {HOSTILE} account?", reply_to="human.reply")


RUNS = {
    "budget-halt": budget_halt,
    "fan-out": fan_out,
    "nested": nested,
    "suspended": suspended,
    "resumed": resumed,
    "gate-fail": gate_fail,
    "call-failed": call_failed,
    "parse-error": parse_error,
    "flagged": flagged,
    "judge-fallback": judge_fallback,
    "hook": hook_decided,
    "budget-suspended": budget_suspended,
    "in-doubt": in_doubt,
    "model-question": model_question,
}


def every_html(root: Machine, result: RunResult) -> list[str]:
    return [
        views.run_bundle("run-1", root, result)["text/html"],
        views.progress_bundle(root.entry, 2, result.usage)["text/html"],
        views.result_summary_html(result),
        views.trace_table_html(result.trace),
        views.visits_table_html(root, result.visits, result.diagnosis, highlight_max=True),
        views.pending_card_html("run-1", root.name, result),
        views.progress_html(HOSTILE, 3, result.usage),
    ]


# -- an HTML checker --------------------------------------------------------------------------


class Html(HTMLParser):
    """Parses a fragment, checking that tags balance, and keeps its text and element paths."""

    def __init__(self, markup: str) -> None:
        super().__init__(convert_charrefs=True)
        self.stack: list[str] = []
        self.tags: list[str] = []
        self.attrs: list[tuple[str, str | None]] = []
        self.paths: list[tuple[str, ...]] = []
        self.text_parts: list[str] = []
        self.errors: list[str] = []
        self.feed(markup)
        self.close()
        if self.stack:
            self.errors.append(f"unclosed {self.stack}")

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        self.attrs += attrs
        if tag not in VOID_TAGS:
            self.stack.append(tag)
            self.paths.append(tuple(self.stack))

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        self.attrs += attrs

    def handle_endtag(self, tag: str) -> None:
        if not self.stack or self.stack[-1] != tag:
            self.errors.append(f"</{tag}> closes {self.stack[-1:] or 'nothing'}")
            return
        self.stack.pop()

    def handle_data(self, data: str) -> None:
        self.text_parts.append(data)

    @property
    def text(self) -> str:
        return " ".join(self.text_parts)


def parsed(markup: str) -> Html:
    page = Html(markup)
    assert not page.errors, page.errors
    return page


# -- untrusted-notebook safety ----------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(RUNS))
def test_html_is_plain_semantic_markup(name: str) -> None:
    root, result = RUNS[name]()
    extra = [
        views.scenario_table_html([Outcome(HOSTILE, False, HOSTILE)]),
        views.runs_table_html([("run-1", HOSTILE, result.status, result.error or "", result.at or "", HOSTILE)]),
    ]
    for markup in [*every_html(root, result), *extra]:
        lowered = markup.lower()
        assert "<style" not in lowered and "<script" not in lowered and "var(--" not in lowered
        page = parsed(markup)
        assert set(page.tags) <= ALLOWED_TAGS, set(page.tags) - ALLOWED_TAGS
        assert {key for key, _ in page.attrs} <= {"colspan", "start", "title", "open", "style"}
        assert {value for key, value in page.attrs if key == "style"} <= {"text-align:left"}  # the one style


class _Cells(HTMLParser):
    """A flat table's cells: each row's (text, whether it is left-aligned, how many columns it spans)."""

    def __init__(self, markup: str) -> None:
        super().__init__(convert_charrefs=True)
        self.rows: list[list[tuple[str, bool, int]]] = []
        self._cell: tuple[list[str], bool, int] | None = None
        self.feed(markup)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        if tag == "tr":
            self.rows.append([])
        elif tag in ("td", "th"):
            self._cell = ([], found.get("style") == "text-align:left", int(found.get("colspan") or 1))

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th") and self._cell is not None:
            self.rows[-1].append(("".join(self._cell[0]).strip(), self._cell[1], self._cell[2]))
            self._cell = None

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell[0].append(data)


def _prose_tables() -> dict[str, str]:
    """One of each table a notebook shows: a trace (with an answer row), visits, runs, a batch, the audit's
    answers, scenarios."""
    root, result = budget_halt()
    answer = {"after": 1, "value": "approve", "by": "alice", "question": "Send it?"}
    batch = [{"row": 0, "run": "b-0", "status": "done", "result": "Sent.", "tokens": 1240, "cost_usd": 0.01}]
    asked = {"run": "r", "question": "Send it?", "value": "approve", "by": "alice", "asked_at": 1.7e9}
    return {
        "trace": views.trace_table_html(result.trace, answers=[answer]),
        "visits": views.visits_table_html(root, result.visits, result.diagnosis),
        "runs": views.runs_table_html([("run-1", "refund", "suspended", "escalated", "send", "$0.01")]),
        "batch": batch_bundle(batch, {"done": 1})["text/html"],
        "audit": audit_bundle([{**asked, "answered_at": 1.7e9 + 30, "seconds_to_decide": 30}], [], [], 30)["text/html"],
        "scenarios": views.scenario_table_html([Outcome("approves", True, "")]),
    }


NUMBER_COLUMNS = {"step", "tokens", "entries / max_visits", "spent", "row", "cost", "asked", "answered", "decided in"}


@pytest.mark.parametrize("name", sorted(_prose_tables()))
def test_prose_columns_are_left_aligned_and_numbers_stay_right(name: str) -> None:
    """JupyterLab right-aligns every table cell of an output: the cells of words say left, the numbers do not."""
    rows = _Cells(_prose_tables()[name]).rows
    head = [text for text, _, _ in rows[0]]
    assert any(column in NUMBER_COLUMNS for column in head) or name == "scenarios"
    for row in rows:
        if len(row) == 1 and row[0][2] > 1:  # a row across the table (an answer, a tally): words
            assert row[0][1], row
            continue
        assert len(row) == len(head), row
        for column, (text, left, _) in zip(head, row, strict=True):
            assert left == (column not in NUMBER_COLUMNS), (name, column, text)


@pytest.mark.parametrize("name", sorted(RUNS))
def test_the_run_bundle_carries_html_and_text_but_no_diagram(name: str) -> None:
    root, result = RUNS[name]()
    assert set(views.run_bundle("run-1", root, result)) == {"text/html", "text/plain"}


def test_a_runs_display_output_carries_its_checkpoint_beside_its_views() -> None:
    machine = load(REFUND_EXAMPLE)
    store = MemoryStore()
    outcome = runs.start(
        machine, oracle_from_file(REFUND_SCRIPT), store=store, run_id="r1", options=RunOptions(hitl="asking")
    )
    bundle = run_output("r1", machine, outcome)
    assert set(bundle) == {"text/html", "text/plain", RUN_MIME}
    assert bundle[RUN_MIME] == checkpoint_of(outcome)
    assert verify(bundle[RUN_MIME])[0]["run_id"] == "r1"
    assert "· 3 answers journaled" in bundle["text/plain"]
    assert "[replayed from the journal]" not in bundle["text/plain"] and "replayed:" not in bundle["text/plain"]
    replayed = runs.replay(store, "r1", oracle_from_file(REFUND_SCRIPT))
    assert replayed.calls == {"made": 0, "replayed": 3}
    again = run_output("r1", machine, replayed)
    assert again == bundle  # a saved notebook does not change when the unchanged cell runs again
    # The terminal, whose output is not saved, says what each showing cost.
    assert "· 3 new calls" in views.run_bundle("r1", machine, outcome.result, outcome.calls)["text/plain"]
    assert "no new calls" in views.run_bundle("r1", machine, replayed.result, replayed.calls)["text/plain"]


def test_hostile_model_output_is_escaped_in_every_view() -> None:
    root, result = fan_out()
    markup = views.run_bundle("run-1", root, result)["text/html"]
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in markup
    assert HOSTILE in parsed(markup).text  # shown literally, as text
    assert HOSTILE in views.run_text("run-1", root, result)


def test_hostile_ask_and_state_names_are_escaped() -> None:
    _, result = suspended()
    card = views.pending_card_html("run-1", HOSTILE, result)
    summary = views.result_summary_html(result)
    for markup in (card, summary):
        assert "<script" not in markup
        assert f"{HOSTILE} Approve the refund?" in parsed(markup).text
    assert "&lt;script&gt;alert(1)&lt;/script&gt; Approve the refund?<br>Say yes or no." in summary
    weird = machine(WEIRD)
    visits = views.visits_table_html(weird, {"<b>bold</b>": 2})
    assert "<b>" not in visits and "&lt;b&gt;bold&lt;/b&gt;" in visits


# -- text twins -------------------------------------------------------------------------------


def _steps(trace: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every step, nested sub-runs included."""
    found = []
    for step in trace:
        found.append(step)
        sub = step.get("sub_trace") or []
        for trace in sub if "branches" in step else [sub]:  # a call fan-out holds one trace per branch
            found += _steps(trace or [])
    return found


def _facts(root: Machine, result: RunResult) -> list[str]:
    facts = [result.error, result.at, result.reply_to, f"{sum(result.usage.values()):,} tokens"]
    facts += (result.ask or "").splitlines() + (result.question or "").splitlines()
    for step in _steps(result.trace):
        cost = step.get("cost") or {}
        decided = {"llm": "the model", "on_error": "on_error route"}.get(step.get("gate_via"), step.get("gate_via"))
        facts += [step["state"], step.get("policy"), step.get("to"), f"{sum(cost.values()):,}", decided]
    if not visits_say_more(root, result.visits, result.diagnosis, result.error in BUDGET_HALTS):
        return [str(fact) for fact in facts if fact]  # the view leaves the visits out: the trace says them
    for sid, state in root.states.items():
        bound = "–" if state.max_visits is None else state.max_visits
        entered = result.visits.get(sid, 0)
        facts.append(f"{entered} / {bound}" if entered or state.max_visits else sid)  # else named as not entered
    return [str(fact) for fact in facts if fact]


def test_a_run_view_shows_its_visits_when_they_say_more_than_its_trace() -> None:
    """A visits table of rows that each read "1 / –" repeats the trace; one with a state entered again, a
    ceiling anywhere in the machine, or a state to look at does not, and the view shows it."""
    root, result = resumed()
    assert set(result.visits.values()) == {1} and not any(s.max_visits for s in root.states.values())
    plain, page = (views.run_bundle("run-1", root, result)[mime] for mime in ("text/plain", "text/html"))
    assert "Visits of" not in plain and "Visits of" not in page
    assert "<summary>Trace of run-1 — 2 steps</summary>" in page
    looped = dataclasses.replace(result, visits={**result.visits, "draft": 2})
    plain, page = (views.run_bundle("run-1", root, looped)[mime] for mime in ("text/plain", "text/html"))
    assert "  draft   2 / –" in plain.splitlines() and "<summary>Trace and visits of run-1 — 2 steps</summary>" in page
    assert "<td>2 / –</td>" in page
    ceiling, budget_result = budget_halt()
    once = dataclasses.replace(budget_result, visits={"draft": 1}, error="gate-fail", diagnosis=None)
    assert "  draft  1 / 4" in views.run_bundle("run-1", ceiling, once)["text/plain"].splitlines()


@pytest.mark.parametrize("name", sorted(RUNS))
def test_html_and_text_twins_state_the_same_facts(name: str) -> None:
    root, result = RUNS[name]()
    bundle = views.run_bundle("run-1", root, result)
    html_text, plain = parsed(bundle["text/html"]).text, bundle["text/plain"]
    for fact in _facts(root, result):
        assert fact in html_text, fact
        assert fact in plain, fact


@pytest.mark.parametrize("name", sorted(RUNS))
def test_each_view_has_a_text_twin(name: str) -> None:
    root, result = RUNS[name]()
    pairs = [
        (views.result_summary_html(result), views.result_summary_text(result)),
        (views.trace_table_html(result.trace), views.trace_table_text(result.trace)),
        (
            views.visits_table_html(root, result.visits, result.diagnosis),
            views.visits_table_text(root, result.visits, result.diagnosis),
        ),
        (views.pending_card_html("run-1", root.name, result), views.pending_card_text("run-1", root.name, result)),
        (views.progress_html("draft", 3, result.usage), views.progress_text("draft", 3, result.usage)),
    ]
    for markup, plain in pairs:
        words, plain_words = (set(re.findall(r"\w+(?:[.-]\w+)*", text)) for text in (parsed(markup).text, plain))
        assert words <= plain_words, words - plain_words


# -- trace tables -----------------------------------------------------------------------------


def test_trace_table_columns_and_values() -> None:
    _, result = budget_halt()
    page = parsed(views.trace_table_html(result.trace))
    for column in ("step", "state", "gate", "decided by", "policy", "to", "tokens", "output"):
        assert column in page.text
    assert "1,240" in page.text  # tokens in + out of one step
    lines = views.trace_table_text(result.trace).splitlines()
    assert lines[0] == "Trace — 5 steps"
    header, first = lines[1], lines[2]
    assert header.split() == ["step", "state", "gate", "decided", "by", "policy", "to", "tokens", "output"]
    assert header.index("tokens") == first.index("1,240")  # fixed-width columns line up
    assert first.split()[:7] == ["1", "draft", "otherwise", "otherwise", "ok", "check", "1,240"]


def test_output_preview_is_shortened() -> None:
    _, result = run(LEAF, {"produce": ["word " * 100]})
    page = parsed(views.trace_table_html(result.trace))
    assert "word word" in page.text and "…" in page.text
    assert "word " * 30 not in page.text


def test_fan_out_branches_expand_in_details() -> None:
    _, result = fan_out()
    page = parsed(views.trace_table_html(result.trace))
    assert "3 branches" in page.text and "2 branches" in page.text
    assert ("table", "tbody", "tr", "td", "details", "ol", "li") in page.paths
    plain = views.trace_table_text(result.trace)
    assert "[0] one" in plain and "[1] two" in plain and f"[2] {HOSTILE}" in plain and "[1] r2" in plain


def test_nested_sub_traces_render_inside_details() -> None:
    _, result = nested()
    page = parsed(views.trace_table_html(result.trace))
    nested_table = ("table", "tbody", "tr", "td", "details", "table")
    assert nested_table in page.paths
    assert (*nested_table, "tbody", "tr", "td", "details", "table") in page.paths  # middle -> leaf, two deep
    assert "sub-run — 1 step" in page.text
    assert "sub-run 1 — 1 step" in page.text and "sub-run 2 — 1 step" in page.text  # one per branch that ran
    assert "leaf-x" in page.text and "leaf-y" in page.text
    plain = views.trace_table_text(result.trace)
    assert "    ↳ sub-run trace — 1 step" in plain
    assert "        ↳ sub-run trace — 1 step" in plain  # indented once more for the leaf under middle
    assert "    ↳ sub-run 2 trace — 1 step" in plain


def test_failed_call_shows_the_child_trace() -> None:
    _, result = call_failed()
    page = parsed(views.trace_table_html(result.trace))
    assert "call-failed" in page.text and "sub-run — 1 step" in page.text and "is it bad: yes" in page.text


def test_flags_are_said_in_plain_words() -> None:
    _, result = flagged()
    markup = views.trace_table_html(result.trace)
    tool = "a tool with effects, reached by a model's decision on outside text"
    assert "<small>[after reading outside text]</small>" in markup
    assert f"<small>[{tool}]</small>" in markup.replace("&#x27;", "'")
    plain = views.trace_table_text(result.trace)
    assert "the model [after reading outside text]" in plain and f"[{tool}]" in plain
    _, result = judge_fallback()
    assert "otherwise [the model's answer could not be read: scripted]" in views.trace_table_text(result.trace)
    step = {**result.trace[0], "truncated": True, "judge_none": 2}
    markup = views.trace_table_html([step])
    assert "[cut at the model's length limit]" in parsed(markup).text
    assert "[the model said no condition holds (2 times)]" in parsed(markup).text
    for internal in ("tainted", "judge none", "judge fallback", "untrusted control flow", "llm", "×"):
        assert internal not in plain and internal not in parsed(markup).text, internal


def test_one_legend_line_under_the_trace_says_what_its_words_and_marks_mean() -> None:
    _, result = flagged()
    plain = views.trace_table_text(result.trace).splitlines()
    page = parsed(views.trace_table_html(result.trace)).text
    said = plain[-1]
    assert said.startswith("Legend — ") and sum(line.startswith("Legend") for line in plain) == 1
    assert "the model: a model judged which gate's condition holds" in said
    assert "otherwise: the gate taken when no other fires" in said and "outside text: from tools" in said
    assert "[…]: what to know about that step" in said
    assert "hook:" not in said and "replayed:" not in said  # only what the table shows
    assert page.endswith(said)  # the HTML says the same line, once, under its table
    _, result = nested()  # sub-runs' tables leave the legend to the run's
    assert views.trace_table_text(result.trace).count("Legend") == 1
    assert parsed(views.trace_table_html(result.trace)).text.count("Legend") == 1
    _, result = hook_decided()
    assert "hook: a Python function of the host decided" in views.trace_table_text(result.trace).splitlines()[-1]


def test_decided_by_names_the_hook() -> None:
    _, result = hook_decided()
    assert "hook approved" in parsed(views.trace_table_html(result.trace)).text
    assert "hook approved" in views.trace_table_text(result.trace)


def test_empty_trace() -> None:
    assert parsed(views.trace_table_html([])).text == "Trace: no steps recorded."
    assert views.trace_table_text([]) == "Trace: no steps recorded."


# -- visits tables ----------------------------------------------------------------------------


def test_budget_halt_highlights_the_most_visited_state() -> None:
    root, result = budget_halt()
    assert result.error == "budget-exhausted" and result.diagnosis == {"most_visited_state": "draft", "visits": 3}
    markup = views.run_bundle("run-1", root, result)["text/html"]
    assert (
        '<tr><td style="text-align:left"><mark><strong><code>draft</code></strong></mark></td>'
        '<td><strong>3 / 4</strong></td><td style="text-align:left"><em>most visited</em></td></tr>' in markup
    )
    assert markup.count("<mark>") == 2  # the row, and the diagnosis line of the summary
    plain = views.run_text("run-1", root, result)
    assert re.search(r"^\* draft +3 / 4 +most visited$", plain, re.M)
    assert re.search(r"^  check +2 / – *$", plain, re.M) and re.search(r"^  not entered: unused$", plain, re.M)
    assert "Most visited state: draft (3 entries)" in plain


def test_visits_table_shows_entries_against_max_visits() -> None:
    root, result = fan_out()
    page = parsed(views.visits_table_html(root, result.visits))
    assert "entries / max_visits" in page.text and "ideas 1 / –" in page.text and "<mark>" not in str(page.tags)
    looper = machine(LOOPER)
    assert "ceiling reached" in views.visits_table_text(looper, {"draft": 4})
    assert "4 / 4" in parsed(views.visits_table_html(looper, {"draft": 4})).text


def test_states_never_entered_and_without_a_ceiling_are_named_in_one_line() -> None:
    looper = machine(LOOPER)
    plain = views.visits_table_text(looper, {"check": 2})
    assert plain.splitlines()[2:] == ["  draft  0 / 4", "  check  2 / –", "  not entered: unused"]
    markup = views.visits_table_html(looper, {"check": 2})
    rows = [
        " ".join(parsed(f"<tr>{row}").text.split())
        for row in markup.split("<tbody>")[1].split("</tbody>")[0].split("<tr>")[1:]
    ]
    assert rows == ["draft 0 / 4", "check 2 / –", "not entered: unused"]
    assert "<code>unused</code></td></tr></tbody>" in markup
    assert len(views.visits_table_text(looper, {"check": 2}, cap=views.Cap(full=True)).splitlines()) == 2 + 3
    everything = views.visits_table_text(looper, {"draft": 1, "check": 1, "unused": 1})
    assert "not entered" not in everything and "  unused  1 / –" in everything


def test_budget_suspension_highlights_the_maximum_without_a_diagnosis() -> None:
    root, result = budget_suspended()
    assert result.status == "suspended" and result.error == "budget-exhausted" and result.diagnosis is None
    markup = views.run_bundle("run-1", root, result)["text/html"]
    assert "<mark><strong><code>draft</code></strong></mark>" in markup
    assert views.highlighted_state({"a": 1, "b": 1}, None, highlight_max=True) is None  # no state entered twice
    assert views.highlighted_state({"a": 2, "b": 2}, None, highlight_max=True) == "a"  # first maximum in entry order
    assert views.highlighted_state({"a": 2, "b": 3}, None) is None


# -- summaries, progress and the pending card -------------------------------------------------


def test_done_summary_renders_the_result_as_json() -> None:
    _, result = fan_out()
    markup = views.result_summary_html(result)
    assert "<details><summary>Result:" in markup  # a list: multi-line JSON, folded
    assert "&quot;r1&quot;" in markup
    assert "Done." in views.result_summary_text(result) and '"r2"' in views.result_summary_text(result)
    _, result = hook_decided()
    assert "<p>Result: <code>ok</code></p>" in views.result_summary_html(result)
    assert "1 step · 0 tokens (in 0, out 0)" in views.result_summary_text(result)


def test_halt_summary_names_the_error_and_state() -> None:
    _, result = gate_fail()
    assert "Halted: gate-fail at a" in views.result_summary_text(result)
    assert "<strong>Halted:</strong> <code>gate-fail</code> at <code>a</code>" in views.result_summary_html(result)
    _, result = parse_error()
    assert "state-error: parse-json" in parsed(views.result_summary_html(result)).text


def test_suspended_summary_shows_the_authored_ask_and_reply_to() -> None:
    _, result = suspended()
    plain = views.result_summary_text(result)
    assert "Suspended (escalated): waiting for a person's reply (resumes at review)." in plain
    assert f"The machine's author asks:\n    {HOSTILE} Approve the refund?\n    Say yes or no." in plain
    assert "The reply goes to approval.answer." in plain
    assert "The model asks" not in plain


def test_model_question_is_labelled_as_model_output() -> None:
    root, result = model_question()
    page = parsed(views.result_summary_html(result))
    assert f"The model asks (model output): Which {HOSTILE} account?" in page.text
    assert "author asks" not in page.text
    assert "The model asks (model output):" in views.pending_card_text("run-1", root.name, result)


def test_in_doubt_summary_explains_what_to_do() -> None:
    root, result = in_doubt()
    plain = views.result_summary_text(result)
    assert plain.startswith("In doubt at reply: a tool with side effects was started")
    assert "retry, or abort" in plain
    card = views.pending_card_text("run-7", root.name, result)
    assert "mkl resume NOTEBOOK.ipynb --run run-7 --resolve retry" in card


SHORT_LEAF = """
machine: leaf
entry: l1
budget: 1
states:
  l1:
    structure: s
    prompt: "first"
    output: o
    gates:
      - { when: otherwise, then: ok, to: l2 }
  l2:
    structure: s
    prompt: "second"
    output: o
    gates:
      - { when: otherwise, then: ok, to: END }
"""


def test_a_suspension_inside_a_called_machine_names_that_machine() -> None:
    root, result = run(MIDDLE, {"produce": ["a", "b"]}, registry=(SHORT_LEAF,), suspendable=True)
    assert (result.status, result.error, result.at, result.machine) == ("suspended", "budget-exhausted", "l2", "leaf")
    assert "waiting for more steps (resumes at l2 in called machine leaf)." in views.result_summary_text(result)
    markup = views.result_summary_html(result)
    assert "(resumes at <code>l2</code> in called machine <code>leaf</code>)" in markup
    assert "--run run-3 --max-steps N" in views.pending_card_text("run-3", root.name, result)
    shown = views.run_text("run-3", root, result)  # the open call shows what ran inside it so far
    assert "m1     —     —           —       —   0       (suspended inside leaf)" in shown
    assert "↳ sub-run trace — 1 step" in shown and "l1     otherwise" in shown
    assert "<summary>sub-run — 1 step</summary>" in views.run_html("run-3", root, result)


def test_calls_left_open_nest_like_the_calls() -> None:
    _, result = run(PARENT, {"produce": ["a", "b"]}, registry=(MIDDLE, SHORT_LEAF), suspendable=True)
    assert (result.at, result.machine, result.trace) == ("l2", "leaf", [])
    outer = result.pending_step
    assert (outer["state"], outer["suspended_in"]) == ("prep", "middle")
    (inner,) = outer["sub_trace"]
    assert (inner["state"], inner["suspended_in"]) == ("m1", "leaf")
    assert [(step["step"], step["state"], step["output"]) for step in inner["sub_trace"]] == [(1, "l1", "a")]


def test_progress_line() -> None:
    usage = {"input_tokens": 1000, "output_tokens": 240}
    assert views.progress_text("draft", 3, usage) == "running — state draft · 3 steps · 1,240 tokens"
    assert parsed(views.progress_html("draft", 3, usage)).text.split() == [
        "running",
        "—",
        "state",
        "draft",
        "·",
        "3",
        "steps",
        "·",
        "1,240",
        "tokens",
    ]
    assert views.progress_text(None, 1, None) == "running — starting · 1 step · 0 tokens"
    live = views.progress_bundle("each", 2, usage)
    assert live["text/plain"] == "running — state each · 2 steps · 1,240 tokens"


def test_pending_card_says_how_to_continue() -> None:
    root, result = suspended()
    card = views.pending_card_text("run-42", root.name, result)
    assert card.splitlines()[0] == (
        "Pending (escalated): run run-42 of refund is waiting for a person's reply (resumes at review)."
    )
    assert "%mkl pending" in card
    assert (
        f"mkl resume NOTEBOOK.ipynb --run run-42 --question {result.question_id('run-42')} --reply approve\n"
        f"  mkl resume NOTEBOOK.ipynb --run run-42 --question {result.question_id('run-42')} --reply reject" in card
    )
    bundle = views.run_bundle("run-42", root, result)
    assert "<code>%mkl pending</code>" in bundle["text/html"] and "%mkl pending" in bundle["text/plain"]
    root, result = budget_suspended()
    assert "--run run-1 --max-steps N" in views.pending_card_text("run-1", root.name, result)


def test_in_doubt_card_names_the_doubt_and_the_ways_out() -> None:
    root, result = in_doubt()
    card = views.pending_card_text("run-7", root.name, result)
    assert card.splitlines()[:2] == [
        "In doubt: run run-7 of flags at reply: a tool with side effects was started but its outcome was never "
        "recorded, so it may or may not have happened; resolve it (completed with a value, retry, or abort) before "
        "the run goes on.",
        "in-doubt: send_reply at root/1:reply#1/tool",
    ]
    assert (
        "<code>mkl resume NOTEBOOK.ipynb --run run-7 --resolve "
        "&#x27;completed=&lt;what the tool returned&gt;&#x27;</code>"
        in views.pending_card_html("run-7", root.name, result)
    )


def test_bundle_without_a_machine_or_a_result() -> None:
    _, result = suspended()
    bundle = views.run_bundle("run-1", None, result)
    assert "(its machine is not defined here)" in bundle["text/plain"] and "Visits" not in bundle["text/plain"]
    assert "Visits" not in parsed(bundle["text/html"]).text and "Trace of run-1" in parsed(bundle["text/html"]).text
    live = views.progress_bundle("draft", 1, None)
    assert live["text/plain"] == views.progress_text("draft", 1, None) == "running — state draft · 1 step · 0 tokens"
    assert live["text/html"] == views.progress_html("draft", 1, None)
    idle = views.progress_bundle(None, 0, None)
    assert idle["text/plain"] == "running — starting · 0 steps · 0 tokens"


def test_runs_table() -> None:
    rows = [
        ("run-1", "refund", "suspended", "escalated", "review", views.spent_cell(0.0123)),
        ("run-2", "looper", "done", "", "", views.spent_cell(None)),
    ]
    bundle = views.runs_bundle(rows)
    page = parsed(bundle["text/html"])
    assert "run-1 refund suspended escalated review $0.01" in " ".join(page.text.split())
    assert bundle["text/plain"].splitlines() == [
        "Runs",
        "run    machine  status     error      at      spent",
        "run-1  refund   suspended  escalated  review  $0.01",
        "run-2  looper   done                          —",
    ]


@pytest.mark.parametrize(
    ("usd", "shown"),
    [
        (0.0, "$0"),
        (1234.5, "$1,234.50"),
        (0.01, "$0.01"),
        (0.00027, "$0.00027"),
        (0.000271828, "$0.00027"),
        (0.0049, "$0.0049"),
        (4.5e-06, "$0.0000045"),
    ],
)
def test_money_reads_as_a_person_reads_it(usd: float, shown: str) -> None:
    assert views.money(usd) == shown
    assert views.runs_table_text([]) == "No runs." and parsed(views.runs_table_html([])).text == "No runs."


def test_finished_runs_have_no_pending_card() -> None:
    root, result = resumed()
    assert result.status == "done"
    bundle = views.run_bundle("run-1", root, result)
    assert "%mkl pending" not in bundle["text/html"] and "%mkl pending" not in bundle["text/plain"]


# -- scenarios --------------------------------------------------------------------------------


def test_scenario_table() -> None:
    outcomes = [Outcome("happy path", True), Outcome("refund <b>", False, "status: expected 'done', got 'halt'")]
    page = parsed(views.scenario_table_html(outcomes))
    assert "happy path PASS" in page.text and "FAIL" in page.text and "refund <b>" in page.text
    assert ("table", "tfoot", "tr", "th") in page.paths and "1 passed, 1 failed" in page.text
    assert views.scenario_table_text(outcomes).splitlines() == [
        "PASS happy path",
        "FAIL refund <b>: status: expected 'done', got 'halt'",
        "1 passed, 1 failed",
    ]
    assert views.scenario_table_text([]) == "0 passed, 0 failed"


# -- diagrams ---------------------------------------------------------------------------------

DECLARATION = re.compile(r'^    state "([^"\n]*)" as (s\d+|failed|more)$')
TRANSITION = re.compile(r"^    (\[\*\]|s\d+|more) --> (\[\*\]|s\d+|failed|more)(?: : (.+))?$")
CLASS_DEF = re.compile(r"^    classDef (\w+) ([\w#:,. -]+)$")
CLASS_USE = re.compile(r"^    class ([\w,]+) (\w+)$")
UNSAFE = set(':;#"{}<>`\n')


def _nodes(source: str) -> dict[str, str]:
    """Node id -> label."""
    return {m.group(2): m.group(1) for m in map(DECLARATION.match, source.splitlines()) if m}


def _node_of(source: str, label: str) -> str:
    return next(node for node, text in _nodes(source).items() if text == label or text.startswith(label + " "))


def _assert_valid(source: str) -> None:
    lines = source.splitlines()
    assert lines[0] == "stateDiagram-v2"
    declared = set(_nodes(source)) | {"[*]"}
    for line in lines[1:]:
        match = DECLARATION.match(line) or TRANSITION.match(line) or CLASS_DEF.match(line) or CLASS_USE.match(line)
        assert match, line
        if line.startswith("    state "):
            assert not set(match.group(1)) & UNSAFE, line
        elif match.re is TRANSITION:
            assert {match.group(1), match.group(2)} <= declared, line
            assert match.group(3) is None or not set(match.group(3)) & UNSAFE, line
        elif match.re is CLASS_USE:
            assert set(match.group(1).split(",")) <= declared, line


def test_mermaid_has_one_node_per_state_and_an_entry_arrow() -> None:
    root = machine(LOOPER)
    source = diagram.machine_mermaid(root)
    _assert_valid(source)
    nodes = _nodes(source)
    assert sorted(nodes.values()) == sorted(root.states)
    assert f"    [*] --> {_node_of(source, 'draft')}" in source.splitlines()
    assert "classDef" not in source  # nothing to mark without a run


def test_mermaid_edges_follow_the_gates() -> None:
    source = diagram.machine_mermaid(
        machine(
            REFUND
            + """
  audit:
    structure: s
    prompt: p
    output: o
    gates:
      - { when: looks fine, then: ok, to: review }
      - { when: close enough, repair: 2, to: review }
      - { when: hopeless, fail: true }
"""
        )
    )
    _assert_valid(source)
    draft, review, audit = (_node_of(source, name) for name in ("draft", "review", "audit"))
    lines = source.splitlines()
    assert f"    {draft} --> {review} : otherwise · escalate" in lines
    assert f"    {review} --> [*] : otherwise" in lines
    assert f"    {audit} --> {review} : looks fine / close enough · repair ×2" in lines  # merged, one edge
    assert f"    {audit} --> failed : hopeless · fail" in lines
    assert "    class failed failed" in lines


def test_mermaid_after_a_run_shows_visits_path_and_current_state() -> None:
    root, result = budget_halt()
    path = diagram.path_from_trace(result.trace)
    assert path == [("draft", "check"), ("check", "draft")] * 2 + [("draft", "check")]
    source = diagram.machine_mermaid(root, visits=result.visits, path=path, current="draft", current_kind="halted")
    _assert_valid(source)
    draft, check, unused = (_node_of(source, name) for name in ("draft", "check", "unused"))
    nodes = _nodes(source)
    assert nodes[draft] == "draft ×3 · halted" and nodes[check] == "check ×2" and nodes[unused] == "unused"
    lines = source.splitlines()
    assert f"    {draft} --> {check} : otherwise ✔×3" in lines
    assert f"    {check} --> {draft} : otherwise ✔×2" in lines
    assert f"    {check} --> [*] : good enough" in lines  # not taken: unmarked
    assert f"    class {draft} halted" in lines and f"    class {unused} dim" in lines
    assert f"    class {check} visited" in lines
    assert any(line.startswith("    classDef halted fill:") for line in lines)
    text = diagram.machine_text(root, result.visits, path=path, current="draft", current_kind="halted")
    assert text.splitlines() == [  # what the run's drawing adds to its machine's: the path taken
        "machine looper: the path taken (entry draft, budget 5)",
        "  * draft ×3 · halted  -> check [otherwise ✔×3]",
        "  check ×2  -> draft [otherwise ✔×2]",
        "  not entered: unused",
    ]


def test_mermaid_current_state_of_a_pending_run() -> None:
    root, result = suspended()
    source = diagram.machine_mermaid(
        root,
        visits=result.visits,
        path=diagram.path_from_trace(result.trace),
        current=result.at,
        current_kind="pending",
    )
    review = _node_of(source, "review")
    assert _nodes(source)[review] == "review · pending"  # not entered yet, but it is where the run waits
    assert f"    class {review} pending" in source.splitlines()
    assert "dim" not in source


def test_mermaid_stays_valid_for_awkward_ids_and_gate_text() -> None:
    root = machine(WEIRD)
    source = diagram.machine_mermaid(
        root,
        visits={"my-state": 2, "a b": 1},
        current="a b",
        current_kind="running",
        path=[("my-state", "my-state"), ("my-state", "a b")],
    )
    _assert_valid(source)
    labels = set(_nodes(source).values())
    assert {
        "my-state ×2",
        "a b ×1 · running",
        "END",
        "[*]",
        "state",
        "x'y",
        "‹b›bold‹/b›",
        "ghost (missing)",
        "failed",
    } == labels
    my_state, a_b, end_state = (_node_of(source, name) for name in ("my-state", "a b", "END"))
    lines = source.splitlines()
    assert f"    [*] --> {my_state}" in lines
    assert f"    {my_state} --> {a_b} : score∶ 'high', ＃ yes ✔" in lines
    assert f"    {my_state} --> {my_state} : needs∶ more work · repair ×2 ✔" in lines
    assert f"    {a_b} --> [*] : otherwise / also done" in lines
    assert f"    {end_state} --> {_node_of(source, '[*]')} : otherwise" in lines  # a state named END is a state
    assert f"    class {_node_of(source, 'ghost')} missing" in lines
    for line in lines:
        if " : " in line:
            assert len(line.split(" : ", 1)[1]) <= diagram.LABEL_MAX + 3


def test_mermaid_labels_are_truncated() -> None:
    source = diagram.machine_mermaid(machine(LEAF.replace("when: otherwise", "when: " + "very long condition " * 9)))
    label = next(line.split(" : ", 1)[1] for line in source.splitlines() if " : " in line)
    assert label.endswith("…") and len(label) == diagram.LABEL_MAX


def test_mermaid_is_deterministic() -> None:
    root, result = nested()
    kw = {
        "visits": result.visits,
        "path": diagram.path_from_trace(result.trace),
        "current": "each",
        "current_kind": "running",
    }
    first = diagram.machine_mermaid(root, **kw)
    assert diagram.machine_mermaid(machine(PARENT), **kw) == first
    assert diagram.diagram_bundle(root, **kw) == diagram.diagram_bundle(machine(PARENT), **kw)


def test_machine_text_lists_one_line_per_state() -> None:
    root = machine(STRICT)
    assert diagram.machine_text(root).splitlines() == [
        "machine strict: entry a, budget 3",
        "  a (generative)  -> (fail) [is it bad: yes · fail] | -> END [otherwise]",
    ]


def test_diagram_bundle() -> None:
    root, result = fan_out()
    bundle = diagram.diagram_bundle(root, visits=result.visits)
    # no mermaid: JupyterLab's mermaid renderer writes its own drawing into the output (a notebook marked
    # modified on open, and a saved one several times bigger); every frontend shows the SVG
    assert set(bundle) == {"image/svg+xml", "text/plain"}
    assert bundle["image/svg+xml"].startswith("<svg xmlns=")
    assert "ideas (generative) ×1" in bundle["text/plain"] and "look (tool) ×1" in bundle["text/plain"]


def test_path_skips_steps_without_a_target() -> None:
    _, result = gate_fail()
    assert diagram.path_from_trace(result.trace) == []
    _, result = hook_decided()
    assert diagram.path_from_trace(result.trace) == [("a", "END")]


# -- long traces and big machines ---------------------------------------------------------------

LONG = 2_000  # steps: far more than a view shows whole


def long_loop(steps: int = LONG) -> tuple[Machine, RunResult]:
    """A run that drafts again and again: step N's output is "draft N"."""
    text = f"""
machine: loop
entry: again
budget: {steps + 5}
states:
  again:
    structure: s
    prompt: again
    output: draft
    max_visits: {steps}
    gates:
      - {{ when: otherwise, then: ok, to: again }}
"""
    return run(text, {"produce": [f"draft {number}" for number in range(1, steps + 1)]})


def chain(states: int) -> Machine:
    """A machine of ``states`` states one after another, s0 to s{states - 1}, then END."""
    return load(chain_source(states), strict=False)


def _step_numbers(text: str) -> list[int]:
    """The step numbers of a text trace's rows (its first column)."""
    return [int(line.split()[0]) for line in text.splitlines()[2:] if line.split() and line.split()[0].isdigit()]


def test_a_long_trace_shows_its_first_and_last_steps_and_the_command_that_shows_them_all() -> None:
    _, result = long_loop()
    cap = views.notebook_cap("long")
    plain = views.trace_table_text(result.trace, caption="Trace of long", cap=cap)
    assert plain.splitlines()[0] == "Trace of long — 2,000 steps"
    assert _step_numbers(plain) == [*range(1, 21), *range(1981, 2001)]
    left_out = "… 1,960 steps not shown (steps 21 to 1,980): %mkl trace long --all shows every step"
    assert plain.splitlines()[22] == left_out  # between step 20 and step 1,981
    page = parsed(views.trace_table_html(result.trace, caption="Trace of long", cap=cap))
    assert "Trace of long — 2,000 steps" in page.text and "… 1,960 steps not shown (steps 21 to 1,980)" in page.text
    assert "%mkl trace long --all" in page.text
    html = views.trace_table_html(result.trace, cap=cap)
    assert ">draft 20</td>" in html and ">draft 1981</td>" in html and ">draft 21</td>" not in html
    whole = replace(cap, full=True)
    assert _step_numbers(views.trace_table_text(result.trace, cap=whole)) == list(range(1, LONG + 1))
    assert "not shown" not in views.trace_table_html(result.trace, cap=whole)
    at_most = views.trace_table_text(result.trace[: views.WHOLE_ROWS])
    assert _step_numbers(at_most) == list(range(1, views.WHOLE_ROWS + 1)) and "not shown" not in at_most


def test_a_long_trace_counts_the_answers_it_leaves_out() -> None:
    _, result = long_loop()
    answers = [{"after": 0, "value": "go"}, {"after": 700, "value": "more"}, {"after": LONG, "value": "stop"}]
    plain = views.trace_table_text(result.trace, answers=answers)
    assert "↳ answered go" in plain and "↳ answered stop" in plain and "↳ answered more" not in plain
    assert "… 1,960 steps not shown (steps 21 to 1,980), nor 1 answer given between them" in plain
    page = parsed(views.trace_table_html(result.trace, answers=answers))
    assert "go" in page.text and "stop" in page.text and "more" not in page.text
    assert "nor 1 answer given between them" in page.text


def test_a_run_view_caps_its_trace_and_says_the_step_count() -> None:
    root, result = long_loop()
    bundle = views.run_bundle("long", root, result)
    assert len(bundle["text/html"]) + len(bundle["text/plain"]) < 20_000
    assert "Trace of long — 2,000 steps" in bundle["text/plain"] and "%mkl trace long --all" in bundle["text/plain"]
    page = parsed(bundle["text/html"])
    assert "Trace and visits of long — 2,000 steps" in page.text and "%mkl trace long --all" in page.text


def test_wide_fan_outs_show_their_first_and_last_branches_and_sub_runs() -> None:
    items = [f"item {number}" for number in range(120)]
    wide = f"""
machine: wide
entry: each
budget: 5
context: {{ items: {items} }}
states:
  each:
    structure: s
    prompt: "{{{{item}}}}"
    over: "{{{{items}}}}"
    output: lines
    gates:
      - {{ when: otherwise, then: ok, to: END }}
"""
    _, result = run(wide, {"produce": [f"line {number}" for number in range(120)]})
    cap = views.notebook_cap("wide")
    plain = views.trace_table_text(result.trace, cap=cap)
    assert "[19] line 19" in plain and "[100] line 100" in plain and "[119] line 119" in plain
    assert "[20] line 20" not in plain and "[99] line 99" not in plain
    assert "    … 80 branches not shown: %mkl trace wide --all shows them all" in plain
    html = views.trace_table_html(result.trace, cap=cap)
    page = parsed(html)
    assert "120 branches" in page.text and "… 80 branches not shown" in page.text and '<ol start="100">' in html
    assert "[99] line 99" in views.trace_table_text(result.trace, cap=replace(cap, full=True))

    calls = wide.replace('prompt: "{{item}}"', 'call: leaf\n    input: { what: "{{item}}" }').replace(
        "    structure: s\n", ""
    )
    _, result = run(calls, {"produce": [f"leaf {number}" for number in range(120)]}, registry=(LEAF,))
    plain = views.trace_table_text(result.trace, cap=cap)
    assert "↳ sub-run 20 trace" in plain and "↳ sub-run 101 trace" in plain and "↳ sub-run 21 trace" not in plain
    assert "    … 80 sub-runs not shown: %mkl trace wide --all shows them all" in plain
    page = parsed(views.trace_table_html(result.trace, cap=cap))
    assert (
        "sub-run 120 — 1 step" in page.text and "sub-run 21 —" not in page.text and "80 sub-runs not shown" in page.text
    )


def test_a_big_machine_is_drawn_around_its_entry_and_where_the_run_stopped() -> None:
    root = chain(5_000)
    oracle = ScriptedOracle({"produce": []})
    result = run_machine(root, oracle, options=RunOptions(max_steps=2_500, suspendable=True))
    assert (result.status, result.error, result.at) == ("suspended", "budget-exhausted", "s2500")
    path = diagram.path_from_trace(result.trace)
    kw: dict[str, Any] = {"visits": result.visits, "path": path, "current": "s2500", "current_kind": "pending"}
    source = diagram.machine_mermaid(root, **kw)
    _assert_valid(source)
    assert len(source) < 50_000  # mermaid's maxTextSize
    nodes = _nodes(source)
    drawn = {label.split(" ")[0] for node, label in nodes.items() if node != "more"}
    assert len(drawn) == diagram.DRAWN_STATES
    assert {"s0", "s2500", "s2501", "s2499"} <= drawn and "s1" not in drawn  # the entry, where it stopped, around it
    assert nodes["more"] == "… 4,940 more states, not drawn"
    lines = source.splitlines()
    assert "    [*] --> s0" in lines and "    s0 --> more : otherwise ✔" in lines  # s1 is left out
    assert "    s2499 --> s2500 : otherwise ✔" in lines and "    s2500 --> s2501 : otherwise" in lines
    assert "    s2501 --> more : otherwise" in lines and "    class more more" in lines
    assert sum(1 for line in lines if TRANSITION.match(line)) <= diagram.DRAWN_EDGES + len(drawn) + 1
    text = diagram.machine_text(root, **kw)
    entered = [line.split()[0] for line in text.splitlines()[1:] if " ×" in line and not line.startswith("  *")]
    [not_entered] = [line for line in text.splitlines() if line.startswith("  not entered: ")]
    assert {*entered, "s2500", *not_entered.removeprefix("  not entered: ").split(", ")} == drawn
    assert "  * s2500 · pending" in text.splitlines()
    assert text.splitlines()[-1].startswith("  … and 4,940 more states, not shown")
    unrun = diagram.machine_mermaid(root)  # the definition's diagram: the entry and what follows it
    assert {label for node, label in _nodes(unrun).items() if node != "more"} == {f"s{i}" for i in range(60)}
    assert diagram.diagram_bundle(root)["text/plain"].count("\n") == 1 + diagram.DRAWN_STATES


def test_a_machine_drawn_whole_up_to_the_limits() -> None:
    root = chain(diagram.DRAWN_STATES)
    source = diagram.machine_mermaid(root)
    _assert_valid(source)
    assert len(_nodes(source)) == diagram.DRAWN_STATES and "more" not in source
    assert len(diagram.machine_text(root).splitlines()) == 1 + diagram.DRAWN_STATES


def test_a_big_machines_visits_list_the_states_entered_most() -> None:
    root = chain(5_000)
    result = run_machine(root, ScriptedOracle({"produce": []}), options=RunOptions(max_steps=2_500))
    visits = {**result.visits, "s4000": 7}
    cap = views.notebook_cap("big")
    plain = views.visits_table_text(root, visits, cap=cap)
    lines = plain.splitlines()
    assert lines[0] == "Visits of chain — the 40 states entered most, of 5,000"
    rows = [line.split()[0] for line in lines[2:-1]]
    assert rows == [*(f"s{i}" for i in range(39)), "s4000"]  # document order; ties by document order
    entered = sum(visits.values()) - 7 - 39
    expected = f"  … 4,960 more states, entered {entered:,} times in all, 2,499 of them never"
    assert lines[-1] == expected + ": %mkl visits big --all lists every state"
    page = parsed(views.visits_table_html(root, visits, cap=cap))
    assert "the 40 states entered most, of 5,000" in page.text and "%mkl visits big --all" in page.text
    hot = views.visits_table_text(root, visits, {"most_visited_state": "s4999"}, cap=cap)
    assert "* s4999" in hot and "  s38 " not in hot  # the highlighted state is always listed
    whole = views.visits_table_text(root, visits, cap=replace(cap, full=True))
    assert len(whole.splitlines()) == 2 + 5_000


def test_a_long_result_shows_its_beginning() -> None:
    _, result = run(LEAF, {"produce": ["x" * 30_000]})
    result = replace(result, result="x" * 30_000)
    cap = views.notebook_cap("r")
    text = views.result_summary_text(result, cap=cap)
    assert "x" * views.RESULT_MAX in text and "x" * (views.RESULT_MAX + 1) not in text
    assert "… 20,000 more characters not shown: mkl_notebook.get_run('r').result holds all of it" in text
    page = parsed(views.result_summary_html(result, cap=cap))
    assert "20,000 more characters not shown" in page.text
    assert "x" * 30_000 in views.result_summary_text(result, cap=replace(cap, full=True))


def test_a_long_plan_lists_the_first_and_last_calls_it_replays() -> None:
    root, _ = long_loop(200)
    store = MemoryStore()
    runs.start(root, ScriptedOracle({"produce": []}), store=store, run_id="p")
    found = runs.plan_run(store, "p").as_dict()
    replays = found["replays"]
    assert len(replays) == 200
    lines = plan_lines(found)
    listed = f"{', '.join(replays[:20])}, … 160 more …, {', '.join(replays[-20:])}"
    assert lines[1] == f"  replays 200 calls from the journal: {listed}"
    short = {**found, "replays": replays[:50]}
    assert plan_lines(short)[1] == f"  replays 50 calls from the journal: {', '.join(replays[:50])}"


def test_views_import_no_jupyter() -> None:
    code = (
        "import sys, mkl_notebook.render.views, mkl_notebook.render.diagram; "
        "bad = [m for m in sys.modules if m.split('.')[0] in ('IPython', 'ipywidgets', 'jupyter_client', "
        "'ipykernel', 'nbformat')]; assert not bad, bad"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_what_a_run_cost_is_said_in_words_that_agree_with_their_numbers() -> None:
    from mkl_notebook.render.summary import _calls_text

    assert _calls_text({"made": 2, "replayed": 1}) == " · 2 new calls, 1 answer replayed"
    assert _calls_text({"made": 1, "replayed": 3}) == " · 1 new call, 3 answers replayed"


def test_a_long_audit_table_is_laid_out_by_its_first_rows_and_printed_a_row_at_a_time_after_them() -> None:
    """`mkl audit` prints as it reads: the first rows set the columns (as the whole table of that many would),
    each row after them is printed as it comes, and a wider cell then widens its column from there on."""
    answer = {"question": "Send it?", "value": "approve", "by": "alice", "asked_at": 1.7e9, "answered_at": 1.7e9 + 30}
    rows = [{**answer, "run": f"r{n}", "seconds_to_decide": 30} for n in range(ALIGNED + 2)]
    table = TextTable()
    printed = [table.add(row) for row in rows]
    assert printed[: ALIGNED - 1] == [[]] * (ALIGNED - 1)  # held until the columns are laid out
    first = audit_table_text(rows[:ALIGNED], [], [], 30).splitlines()
    assert printed[ALIGNED - 1] == first[:-1]  # the title, the header and the rows held, as a table of them
    wider, after = printed[ALIGNED][0], printed[ALIGNED + 1][0]
    assert wider.startswith(f"r{ALIGNED}  Send it?") and after.startswith(f"r{ALIGNED + 1}  Send it?")
    assert first[2].startswith("r0    Send it?")  # (r0 to r999: the run column four wide)
    assert table.end([], [], "1,002 answers") == ["1,002 answers"]


def test_the_sentence_above_a_long_runs_form_names_the_latest_answers_and_counts_the_rest() -> None:
    from mkl_notebook.render.views import answered_bundle

    answers = [
        {"value": "approve", "note": f"note {index}", "by": "alice", "how": "OS account", "via": "form"}
        for index in range(1, 6)
    ]
    said = answered_bundle(answers)
    # Five answers a cell's forms gave: the place above its form names the last three, after a count of the two
    # before (a run of a hundred gates would otherwise push its question a hundred lines down the page), and the
    # HTML says what the text says.
    assert said["text/plain"].startswith("Answered 2 questions before (the run's trace lists each answer), then ")
    assert [f"note {index}" in said["text/plain"] for index in range(1, 6)] == [False, False, True, True, True]
    assert said["text/plain"].count("'approve'") == 3 and "note 5" in said["text/html"]
    one = answered_bundle(answers[:1])["text/plain"]
    assert one.startswith("Answered 'approve' with the note 'note 1' (by alice") and "before" not in one
