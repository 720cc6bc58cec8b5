"""What a run looks like in a notebook output: plain semantic HTML with a text/plain twin for each view.

Shared notebooks are untrusted, so the HTML uses only semantic tags (tables,
``<details>``, ``<mark>``, ``<strong>``, ``<code>``): no ``<style>``, no
``<script>``, no ``style=`` attributes, and every dynamic string is escaped.
Each ``*_html`` function has a ``*_text`` twin that states the same facts.
Pure Python: nothing here imports IPython, ipywidgets or Jupyter.
"""

from __future__ import annotations

import difflib
import heapq
import json
import math
import shlex
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from html import escape
from typing import Any, Protocol

from ..engine.result import RunResult, most_visited, seconds_of
from ..lang.interpolate import fmt
from ..lang.model import Machine
from .diagram import shorten

Step = Mapping[str, Any]
PREVIEW = 80
BRANCH_PREVIEW = 200
GATE_MAX = 40
RESULT_INLINE = 120
NONE = "—"
UNBOUNDED = "–"
BUDGET_HALTS = ("budget-exhausted", "cost-exhausted", "spend-exhausted")
LIVE_TAIL = 1500  # characters of an answer being written that the live line shows (its end)
# A list in a view (a trace's steps, a step's branches or sub-runs, the live line's branches) of at most
# WHOLE_ROWS entries is shown whole; a longer one shows its first FIRST_ROWS and last LAST_ROWS entries
# and says how many it leaves out, so that a notebook's saved output stays small whatever the run.
WHOLE_ROWS = 50
FIRST_ROWS = 20
LAST_ROWS = 20
VISITS_ROWS = 40  # a visits table of more than WHOLE_ROWS states shows the states entered most
RESULT_MAX = 10_000  # characters of a result a view shows
_FAILED_POLICIES = (
    "fail",
    "no-gate-matched",
    "judge-unparseable",
    "call-failed",
    "state-error",
    "untrusted-control-flow",
)
_RUNS_HEAD = ("run", "machine", "status", "error", "at", "spent")
_TRACE_HEAD = ("step", "state", "gate", "decided by", "policy", "to", "tokens", "output")
_WAITING_FOR = {
    "escalated": "a person's reply",
    "asked": "an answer to the model's question",
    "budget-exhausted": "more steps",
    "cost-exhausted": "more tokens",
    "spend-exhausted": "a higher cost limit",
}


class ScenarioOutcome(Protocol):
    name: str
    passed: bool
    why: str


def _e(value: Any) -> str:
    return escape(str(value), quote=True)


def _code(value: Any) -> str:
    return f"<code>{_e(value)}</code>"


def _plural(count: int, word: str, plural: str | None = None) -> str:
    return f"{count:,} {word if count == 1 else plural or word + 's'}"


def _lines_html(text: str) -> str:
    """Literal text with its line breaks kept."""
    return "<br>".join(_e(line) for line in str(text).splitlines() or [""])


def _indent(text: str, prefix: str) -> str:
    return "\n".join(prefix + line for line in str(text).splitlines() or [""])


# -- long lists: the first and last rows ---------------------------------------------------------


@dataclass(frozen=True)
class Cap:
    """How a view caps what grows with a run: ``full`` shows every row; otherwise long lists show their
    first and last rows, and say how to see the rest: ``trace``, ``visits`` and ``result`` are the ways
    to see every step, every state's entries and the whole result (``%mkl trace RUN --all`` …)."""

    full: bool = False
    trace: str = ""
    visits: str = ""
    result: str = ""


def cut(count: int, full: bool = False) -> tuple[range, range]:
    """The positions a view shows of a list of ``count`` entries, as (first, last): all of them in
    ``first`` (``full``, or at most ``WHOLE_ROWS``), else the first ``FIRST_ROWS`` and the last ``LAST_ROWS``."""
    if full or count <= WHOLE_ROWS:
        return range(count), range(0)
    return range(FIRST_ROWS), range(count - LAST_ROWS, count)


def _how(command: str, what: str) -> str:
    return f": {command} {what}" if command else ""


def _how_html(command: str, what: str) -> str:
    return f": {_code(command)} {_e(what)}" if command else ""


def notebook_cap(run_id: str) -> Cap:
    """The cap of a run's view in a notebook, with the magics that show what it leaves out."""
    quoted = shlex.quote(run_id)
    return Cap(
        trace=f"%mkl trace {quoted} --all",
        visits=f"%mkl visits {quoted} --all",
        result=f"mkl_notebook.get_run({run_id!r}).result",
    )


# -- trace -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Row:
    """One trace step reduced to the strings both twins show."""

    cells: tuple[str, ...]  # in _TRACE_HEAD order
    decision_flags: tuple[str, ...]
    output_flags: tuple[str, ...]
    branches: tuple[str, ...] | None
    nested: tuple[tuple[str, list[Step]], ...]
    failed: bool


def _tokens(cost: Any) -> int:
    if not isinstance(cost, Mapping):
        return 0
    return int(cost.get("input_tokens") or 0) + int(cost.get("output_tokens") or 0)


def money(usd: float) -> str:
    """US dollars as a person reads them: cents when they count, two significant digits below a cent."""
    if usd <= 0:
        return "$0"
    if usd >= 0.01:
        return f"${usd:,.2f}"
    return f"${usd:.{1 - math.floor(math.log10(usd))}f}"


def _trace_head(trace: Sequence[Step]) -> tuple[str, ...]:
    """The trace's column names; its tokens column says so when it shows model time and cost too."""
    if any("seconds" in step or "cost_usd" in step for step in trace):
        return (*_TRACE_HEAD[:6], "tokens · time · cost", *_TRACE_HEAD[7:])
    return _TRACE_HEAD


def _spend_cell(step: Step) -> str:
    """A step's tokens, and what its model calls took and cost where that is known."""
    parts = [f"{_tokens(step.get('cost')):,}"]
    if isinstance(step.get("seconds"), (int, float)):
        parts.append(f"{step['seconds']:.1f} s")
    if isinstance(step.get("cost_usd"), (int, float)):
        parts.append(money(step["cost_usd"]))
    return " · ".join(parts)


def _decided_by(step: Step) -> str:
    via = step.get("gate_via")
    if via == "hook" and step.get("hook"):
        return f"hook {step['hook']}"
    return str(via) if via else NONE


def _decision_flags(step: Step) -> tuple[str, ...]:
    flags = []
    if step.get("decision_tainted"):
        flags.append("tainted decision")
    if step.get("judge_none"):
        flags.append(f"judge none ×{step['judge_none']}")
    if step.get("judge_fallback"):
        raw = step.get("judge_raw")
        flags.append(f"judge fallback ({shorten(raw, 40)})" if raw else "judge fallback")
    return tuple(flags)


def _output_flags(step: Step) -> tuple[str, ...]:
    flags = []
    if step.get("untrusted_control_flow"):
        flags.append("untrusted control flow")
    if step.get("truncated"):
        flags.append("truncated")
    return tuple(flags)


def _branch_count(branches: Sequence[Any]) -> str:
    return _plural(len(branches), "branch", "branches")


def _output(step: Step) -> tuple[str, tuple[str, ...] | None]:
    if step.get("suspended_in"):
        return f"(suspended inside {step['suspended_in']})", None
    branches = step.get("branches")
    if isinstance(branches, list):
        return _branch_count(branches), tuple(shorten(b, BRANCH_PREVIEW) for b in branches)
    return (shorten(step["output"], PREVIEW) if "output" in step else NONE), None


def _nested(step: Step) -> tuple[tuple[str, list[Step]], ...]:
    """A call's sub-run trace, or for a call fan-out the traces of the branches that ran a sub-run."""
    sub = step.get("sub_trace")
    if not isinstance(sub, list):
        return ()
    if "branches" in step:
        return tuple((f"sub-run {number}", trace) for number, trace in enumerate(sub, 1) if isinstance(trace, list))
    return (("sub-run", sub),)


def _row(step: Step, replayed: int = 0) -> _Row:
    """One trace row; a step numbered up to ``replayed`` took its answers from the journal."""
    output, branches = _output(step)
    gate = step.get("gate")
    cells = (
        NONE if step.get("step") is None else str(step["step"]),
        str(step.get("state", NONE)),
        NONE if gate is None else shorten(gate, GATE_MAX),
        _decided_by(step),
        str(step.get("policy") or NONE),
        str(step.get("to") or NONE),
        _spend_cell(step),
        output,
    )
    from_journal = isinstance(step.get("step"), int) and step["step"] <= replayed
    return _Row(
        cells,
        (*_decision_flags(step), *(("replayed",) if from_journal else ())),
        _output_flags(step),
        branches,
        _nested(step),
        step.get("policy") in _FAILED_POLICIES,
    )


def _flags_html(flags: Iterable[str]) -> str:
    return "".join(f" <small>[{_e(flag)}]</small>" for flag in flags)


def _branches_left_out(first: range, last: range) -> str:
    return f"… {_plural(last.start - first.stop, 'branch', 'branches')} not shown"


def _branches_html(branches: Sequence[str], cap: Cap) -> str:
    first, last = cut(len(branches), cap.full)
    items = "".join(f"<li>{_e(branches[index])}</li>" for index in first)
    lists = f'<ol start="0">{items}</ol>'
    if last:
        left = _branches_left_out(first, last)
        tail = "".join(f"<li>{_e(branches[index])}</li>" for index in last)
        more = f"<p><em>{_e(left)}</em>{_how_html(cap.trace, 'shows them all')}</p>"
        lists += f'{more}<ol start="{last.start}">{tail}</ol>'
    return f"<details><summary>{_e(_branch_count(branches))}</summary>{lists}</details>"


def _branches_text(branches: Sequence[str], cap: Cap, indent: str) -> list[str]:
    first, last = cut(len(branches), cap.full)
    lines = [f"{indent}    [{index}] {branches[index]}" for index in first]
    if last:
        left = _branches_left_out(first, last)
        lines.append(f"{indent}    {left}{_how(cap.trace, 'shows them all')}")
        lines += [f"{indent}    [{index}] {branches[index]}" for index in last]
    return lines


def _cells_html(row: _Row, cap: Cap = Cap()) -> list[str]:
    step, state, gate, via, policy, to, tokens, output = (_e(cell) for cell in row.cells)
    output_html = _branches_html(row.branches, cap) if row.branches else output
    return [
        step,
        f"<code>{state}</code>",
        gate,
        via + _flags_html(row.decision_flags),
        f"<strong>{policy}</strong>" if row.failed else policy,
        f"<code>{to}</code>" if to != NONE else to,
        tokens,
        output_html + _flags_html(row.output_flags),
    ]


def _sub_runs_left_out(first: range, last: range) -> str:
    return f"… {_plural(last.start - first.stop, 'sub-run')} not shown"


def _nested_html(row: _Row, cap: Cap) -> str:
    if not row.nested:
        return ""
    first, last = cut(len(row.nested), cap.full)

    def block(index: int) -> str:
        label, sub = row.nested[index]
        return (
            f"<details><summary>{_e(label)} — {_e(_plural(len(sub), 'step'))}</summary>"
            f"{trace_table_html(sub, caption=f'{label} trace', cap=cap)}</details>"
        )

    blocks = "".join(block(index) for index in first)
    if last:
        left = _sub_runs_left_out(first, last)
        blocks += f"<p><em>{_e(left)}</em>{_how_html(cap.trace, 'shows them all')}</p>"
        blocks += "".join(block(index) for index in last)
    return f'<tr><td colspan="{len(_TRACE_HEAD)}">{blocks}</td></tr>'


# -- a person's answers, between the steps ------------------------------------------------------


def answer_time(at: Any) -> str:
    """When an answer was given, in UTC to the second ("" when the journal does not say)."""
    if not isinstance(at, (int, float)):
        return ""
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(at))


def answered_by(by: Any, at: Any, via: Any) -> str:
    """Who answered, when and through what, as far as the journal says: "by alice, 2026-… UTC, via cli"."""
    parts = (f"by {by}" if by else "", answer_time(at), f"via {via}" if via else "")
    return ", ".join(part for part in parts if part)


def _answer_facts(answer: Mapping[str, Any]) -> tuple[str, str, str]:
    """(the reply, who / when / how, the question) of one answer, as plain text."""
    reply = shorten(fmt(answer.get("value")), PREVIEW)
    target = f" → {answer['reply_to']}" if answer.get("reply_to") else ""
    who = answered_by(answer.get("by"), answer.get("at"), answer.get("via"))
    return f"{reply}{target}", who, shorten(str(answer.get("question") or ""), PREVIEW)


def _answers_by_step(answers: Sequence[Mapping[str, Any]]) -> dict[Any, list[Mapping[str, Any]]]:
    """The answers after each step (0: before the first), grouped once."""
    grouped: dict[Any, list[Mapping[str, Any]]] = {}
    for answer in answers:
        grouped.setdefault(answer.get("after"), []).append(answer)
    return grouped


ASKED_AGAIN = "asked again: this answer was to an earlier version of the output, which an edit changed"


def _answer_html(answer: Mapping[str, Any]) -> str:
    reply, who, question = _answer_facts(answer)
    asked = f" — asked: <em>{_e(question)}</em>" if question else ""
    again = f" — <mark>{_e(ASKED_AGAIN)}</mark>" if answer.get("asked_again") else ""
    return (
        f'<tr><td colspan="{len(_TRACE_HEAD)}">↳ <strong>answered</strong> <code>{_e(reply)}</code>'
        f"{f' {_e(who)}' if who else ''}{asked}{again}</td></tr>"
    )


def _answer_text(answer: Mapping[str, Any], indent: str) -> str:
    reply, who, question = _answer_facts(answer)
    again = f" [{ASKED_AGAIN}]" if answer.get("asked_again") else ""
    return (
        f"{indent}  ↳ answered {reply}{f' ({who})' if who else ''}{f' — asked: {question}' if question else ''}{again}"
    )


def traced_answers(result: RunResult) -> list[Mapping[str, Any]]:
    """The answers a trace shows: those the run used, then those asked again after an edit (after the last step)."""
    earlier = [
        {**again, "at": again.get("time"), "after": len(result.trace), "asked_again": True}
        for again in result.asked_again
    ]
    return [*result.answers, *earlier]


def _steps_left_out(trace: Sequence[Step], first: range, last: range, after: Mapping[Any, list[Any]]) -> str:
    """What a capped trace leaves out between its first and last rows: "… 19,960 steps not shown (steps 21
    to 19,980)", with the answers given between them."""
    start, stop = first.stop, last.start
    numbers = (trace[start].get("step"), trace[stop - 1].get("step"))
    span = f" (steps {numbers[0]:,} to {numbers[1]:,})" if all(isinstance(n, int) for n in numbers) else ""
    answered = sum(len(found) for number, found in after.items() if isinstance(number, int) and start < number <= stop)
    answers = f", nor {_plural(answered, 'answer')} given between them" if answered else ""
    return f"… {_plural(stop - start, 'step')} not shown{span}{answers}"


def trace_table_html(
    trace: Sequence[Step],
    *,
    caption: str = "Trace",
    answers: Sequence[Mapping[str, Any]] = (),
    replayed: int = 0,
    cap: Cap = Cap(),
) -> str:
    """The steps of a run as a table; fan-out branches and nested sub-runs expand in ``<details>``.

    ``answers`` (a result's ``answers``) are rows of their own, after the step they followed; the
    first ``replayed`` steps are marked as answered from the journal. A long trace shows its first and
    last steps unless ``cap.full`` (see :func:`cut`).
    """
    if not trace:
        return f"<p><em>{_e(caption)}: no steps recorded.</em></p>"
    head = "".join(f"<th>{_e(name)}</th>" for name in _trace_head(trace))
    after = _answers_by_step(answers)
    first, last = cut(len(trace), cap.full)

    def rows(positions: range) -> list[str]:
        body = []
        for index in positions:
            row = _row(trace[index], replayed)
            body.append("<tr>" + "".join(f"<td>{cell}</td>" for cell in _cells_html(row, cap)) + "</tr>")
            body.append(_nested_html(row, cap))
            body += [_answer_html(answer) for answer in after.get(index + 1, ())]
        return body

    body = [_answer_html(answer) for answer in after.get(0, ())] + rows(first)
    if last:
        left = _steps_left_out(trace, first, last, after)
        body.append(
            f'<tr><td colspan="{len(_TRACE_HEAD)}"><em>{_e(left)}</em>{_how_html(cap.trace, "shows every step")}'
            "</td></tr>"
        )
        body += rows(last)
    caption_html = f"<caption>{_e(caption)} — {_e(_plural(len(trace), 'step'))}</caption>"
    return f"<table>{caption_html}<thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def _row_text(row: _Row) -> tuple[str, ...]:
    cells = list(row.cells)
    cells[3] += "".join(f" [{flag}]" for flag in row.decision_flags)
    cells[7] += "".join(f" [{flag}]" for flag in row.output_flags)
    return tuple(cells)


def columns(rows: Sequence[Sequence[str]]) -> list[str]:
    """Fixed-width columns (the last one unpadded)."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]) - 1)]
    return [
        "  ".join([*(cell.ljust(width) for cell, width in zip(row, widths, strict=False)), row[-1]]).rstrip()
        for row in rows
    ]


def trace_table_text(
    trace: Sequence[Step],
    *,
    caption: str = "Trace",
    indent: str = "",
    answers: Sequence[Mapping[str, Any]] = (),
    replayed: int = 0,
    cap: Cap = Cap(),
) -> str:
    """The text twin of :func:`trace_table_html`: fixed-width columns, sub-runs indented below their step."""
    if not trace:
        return f"{indent}{caption}: no steps recorded."
    after = _answers_by_step(answers)
    first, last = cut(len(trace), cap.full)
    shown = [*first, *last]
    rows = [_row(trace[index], replayed) for index in shown]
    lines = columns([_trace_head(trace), *(_row_text(row) for row in rows)])
    out = [f"{indent}{caption} — {_plural(len(trace), 'step')}", indent + lines[0]]
    out += [_answer_text(answer, indent) for answer in after.get(0, ())]
    for index, row, line in zip(shown, rows, lines[1:], strict=True):
        if last and index == last.start:
            out.append(f"{indent}{_steps_left_out(trace, first, last, after)}{_how(cap.trace, 'shows every step')}")
        out.append(indent + line)
        out += _branches_text(row.branches or (), cap, indent)
        out += _nested_text(row, cap, indent)
        out += [_answer_text(answer, indent) for answer in after.get(index + 1, ())]
    return "\n".join(out)


def _nested_text(row: _Row, cap: Cap, indent: str) -> list[str]:
    first, last = cut(len(row.nested), cap.full)

    def block(index: int) -> str:
        label, sub = row.nested[index]
        return trace_table_text(sub, caption=f"↳ {label} trace", indent=indent + "    ", cap=cap)

    out = [block(index) for index in first]
    if last:
        out.append(f"{indent}    {_sub_runs_left_out(first, last)}{_how(cap.trace, 'shows them all')}")
        out += [block(index) for index in last]
    return out


# -- visits ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _VisitRow:
    state: str
    entries: str
    note: str
    hot: bool


def highlighted_state(
    visits: Mapping[str, int], diagnosis: Mapping[str, Any] | None = None, highlight_max: bool = False
) -> str | None:
    """The state to highlight: the diagnosis's, else (``highlight_max``) the first state entered most, twice or more."""
    if diagnosis and diagnosis.get("most_visited_state"):
        return str(diagnosis["most_visited_state"])
    busiest = most_visited(visits) if highlight_max else None
    return None if busiest is None else busiest[0]


def _listed_states(
    machine: Machine, visits: Mapping[str, int], hot: str | None, full: bool
) -> tuple[list[str], list[str]]:
    """The states a visits table lists (in document order, then states the machine lacks) and those it
    leaves out: of more than ``WHOLE_ROWS`` states, the ``VISITS_ROWS`` entered most (the highlighted
    one always, then the first in document order among equals)."""
    states = [*machine.states, *(sid for sid in visits if sid not in machine.states)]
    if full or len(states) <= WHOLE_ROWS:
        return states, []
    order = {sid: index for index, sid in enumerate(states)}
    most = heapq.nsmallest(VISITS_ROWS, states, key=lambda sid: (sid != hot, -visits.get(sid, 0), order[sid]))
    chosen = set(most)
    return [sid for sid in states if sid in chosen], [sid for sid in states if sid not in chosen]


def _visit_rows(machine: Machine, visits: Mapping[str, int], hot: str | None, states: Sequence[str]) -> list[_VisitRow]:
    rows = []
    for sid in states:
        state = machine.states.get(sid)
        ceiling = state.max_visits if state is not None else None
        entries = visits.get(sid, 0)
        notes = [
            note
            for note, on in (
                ("most visited", sid == hot),
                ("ceiling reached", ceiling is not None and entries >= ceiling),
            )
            if on
        ]
        rows.append(
            _VisitRow(sid, f"{entries} / {UNBOUNDED if ceiling is None else ceiling}", ", ".join(notes), sid == hot)
        )
    return rows


def _states_left_out(left: Sequence[str], visits: Mapping[str, int]) -> str:
    """What a capped visits table leaves out: "… 19,960 more states, entered 19,960 times in all"."""
    entries = sum(visits.get(sid, 0) for sid in left)
    if not entries:
        return f"… {_plural(len(left), 'more state')}, none of them entered"
    never = sum(1 for sid in left if not visits.get(sid, 0))
    unentered = f", {never:,} of them never" if never else ""
    return f"… {_plural(len(left), 'more state')}, entered {_plural(entries, 'time')} in all{unentered}"


def _visits_caption(machine: Machine, listed: Sequence[str], left: Sequence[str]) -> str:
    if not left:
        return f"Visits of {machine.name}"
    return f"Visits of {machine.name} — the {len(listed):,} states entered most, of {len(listed) + len(left):,}"


def visits_table_html(
    machine: Machine,
    visits: Mapping[str, int],
    diagnosis: Mapping[str, Any] | None = None,
    *,
    highlight_max: bool = False,
    cap: Cap = Cap(),
) -> str:
    """Entries per state against ``max_visits``; the most visited state is marked. Of a big machine it
    lists the states entered most unless ``cap.full``."""
    hot = highlighted_state(visits, diagnosis, highlight_max)
    listed, left = _listed_states(machine, visits, hot, cap.full)
    body = []
    for row in _visit_rows(machine, visits, hot, listed):
        state, entries, note = _code(row.state), _e(row.entries), _e(row.note)
        if row.hot:
            state, entries, note = (
                f"<mark><strong>{state}</strong></mark>",
                f"<strong>{entries}</strong>",
                f"<em>{note}</em>",
            )
        body.append(f"<tr><td>{state}</td><td>{entries}</td><td>{note}</td></tr>")
    if left:
        more = f"<em>{_e(_states_left_out(left, visits))}</em>{_how_html(cap.visits, 'lists every state')}"
        body.append(f'<tr><td colspan="3">{more}</td></tr>')
    head = "<tr><th>state</th><th>entries / max_visits</th><th>note</th></tr>"
    caption = _e(_visits_caption(machine, listed, left))
    return f"<table><caption>{caption}</caption><thead>{head}</thead><tbody>{''.join(body)}</tbody></table>"


def visits_table_text(
    machine: Machine,
    visits: Mapping[str, int],
    diagnosis: Mapping[str, Any] | None = None,
    *,
    highlight_max: bool = False,
    cap: Cap = Cap(),
) -> str:
    """The text twin of :func:`visits_table_html` (the most visited state starred)."""
    hot = highlighted_state(visits, diagnosis, highlight_max)
    listed, left = _listed_states(machine, visits, hot, cap.full)
    rows = _visit_rows(machine, visits, hot, listed)
    table = columns(
        [
            ("  state", "entries / max_visits", "note"),
            *((("* " if r.hot else "  ") + r.state, r.entries, r.note) for r in rows),
        ]
    )
    more = [f"  {_states_left_out(left, visits)}{_how(cap.visits, 'lists every state')}"] if left else []
    return "\n".join([_visits_caption(machine, listed, left), *table, *more])


# -- result ------------------------------------------------------------------------------------


def _steps(trace: Sequence[Step]) -> int:
    counted = [step["step"] for step in trace if isinstance(step.get("step"), int)]
    return max(counted, default=0)


def _calls_text(calls: Mapping[str, int] | None) -> str:
    """What this showing of the run cost: its new calls, and the answers the journal gave for free; or,
    given ``{"journaled": N}``, the answers the run's part shown took, which the same cell shows alike
    every time it runs (a saved notebook must not change when an unchanged cell runs again)."""
    if not calls:
        return ""
    if "journaled" in calls:
        journaled = int(calls["journaled"] or 0)
        return f" · {_plural(journaled, 'answer')} journaled" if journaled else ""
    made, replayed = int(calls.get("made") or 0), int(calls.get("replayed") or 0)
    if made == 0 and replayed:
        return f" · replayed {_plural(replayed, 'answer')} from the journal, no new calls"
    return f" · {_plural(made, 'new call')}" + (f", {replayed:,} answers replayed" if replayed else "")


def _usage_text(result: RunResult, calls: Mapping[str, int] | None = None) -> str:
    usage = result.usage or {}
    spent_in, spent_out = int(usage.get("input_tokens") or 0), int(usage.get("output_tokens") or 0)
    cost = result.cost_usd
    seconds = seconds_of(result.model_calls)
    return (
        f"{_plural(_steps(result.trace), 'step')} · {_plural(spent_in + spent_out, 'token')} "
        f"(in {spent_in:,}, out {spent_out:,})"
        + (f" · {money(cost)}" if cost is not None else "")
        + (f" · {seconds:.1f} s of model time" if seconds is not None else "")
        + _calls_text(calls)
    )


def _value_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, indent=2, default=str)


def _result_cut(value: Any, cap: Cap) -> tuple[str, str]:
    """A result's text as a view shows it (its first ``RESULT_MAX`` characters unless ``cap.full``), and
    what it leaves out ("" when nothing)."""
    text = _value_text(value)
    if cap.full or len(text) <= RESULT_MAX:
        return text, ""
    return text[:RESULT_MAX], f"… {len(text) - RESULT_MAX:,} more characters not shown"


def _result_html(value: Any, cap: Cap) -> str:
    text, left = _result_cut(value, cap)
    if len(text) <= RESULT_INLINE and "\n" not in text:
        return f"<p>Result: {_code(text)}</p>"
    more = f"<p><em>{_e(left)}</em>{_how_html(cap.result, 'holds all of it')}</p>" if left else ""
    return f"<details><summary>Result: {_e(shorten(text, PREVIEW))}</summary><pre>{_e(text)}</pre>{more}</details>"


def _result_text(value: Any, cap: Cap) -> list[str]:
    text, left = _result_cut(value, cap)
    return ["Result: " + text, *([left + _how(cap.result, "holds all of it")] if left else [])]


def _at_text(result: RunResult) -> str:
    return f" at {result.at}" if result.at else ""


def _at_html(result: RunResult) -> str:
    return f" at {_code(result.at)}" if result.at else ""


def _resumes_text(result: RunResult) -> str:
    called = f" in called machine {result.machine}" if result.machine else ""
    return f" (resumes at {result.at}{called})" if result.at else ""


def _resumes_html(result: RunResult) -> str:
    called = f" in called machine {_code(result.machine)}" if result.machine else ""
    return f" (resumes at {_code(result.at)}{called})" if result.at else ""


def _diagnosis_text(result: RunResult) -> str | None:
    diagnosis = result.diagnosis or {}
    if not diagnosis.get("most_visited_state"):
        return None
    entries = _plural(int(diagnosis.get("visits") or 0), "entry", "entries")
    return f"Most visited state: {diagnosis['most_visited_state']} ({entries})"


def _waiting_for(result: RunResult) -> str:
    return _WAITING_FOR.get(result.error or "", result.error or "a reply")


_IN_DOUBT = (
    "a tool with side effects was started but its outcome was never recorded, so it may or may not "
    "have happened; resolve it (completed with a value, retry, or abort) before the run goes on"
)


def _questions(result: RunResult) -> list[tuple[str, str]]:
    """(label, literal text) of what the run asks: the author's ``ask`` and a model's question."""
    asked = [("The machine's author asks:", result.ask), ("The model asks (model output):", result.question)]
    return [(label, text) for label, text in asked if text]


DIFF_LINES = 12  # of a changed output, the lines an asked-again question shows


def changed(before: str, now: str) -> list[str]:
    """What changed between two texts, as a short diff: ``-`` lines went, ``+`` lines came."""
    lines = [
        line
        for line in difflib.unified_diff(before.splitlines(), now.splitlines(), lineterm="", n=1)
        if not line.startswith(("---", "+++", "@@"))
    ]
    return lines[:DIFF_LINES] + ([f"… {len(lines) - DIFF_LINES} more changed lines"] if len(lines) > DIFF_LINES else [])


def asked_again(result: RunResult) -> list[tuple[str, list[str]]]:
    """For each answer that no longer answers its question (what it was about changed): a sentence saying
    who gave which answer when, and the diff of what it was about."""
    said = []
    for again in result.asked_again:
        facts = answered_by(again.get("by"), again.get("time"), again.get("via"))
        sentence = (
            f"Asked again: {fmt(again.get('value'))!r}{f' ({facts})' if facts else ''} answered this question "
            "about an earlier version of what it asks about, which has changed since:"
        )
        said.append((sentence, changed(str(again.get("before") or ""), str(again.get("now") or ""))))
    return said


def _asked_again_html(result: RunResult) -> str:
    return "".join(
        f"<p><mark>{_e(sentence)}</mark></p><pre>{_e(chr(10).join(diff))}</pre>"
        for sentence, diff in asked_again(result)
    )


def _questions_html(result: RunResult) -> str:
    return "".join(
        f"<p>{_e(label)}</p><blockquote>{_lines_html(text)}</blockquote>" for label, text in _questions(result)
    )


def _questions_text(result: RunResult) -> list[str]:
    return [f"{label}\n{_indent(text, '    ')}" for label, text in _questions(result)]


def result_summary_html(result: RunResult, calls: Mapping[str, int] | None = None, cap: Cap = Cap()) -> str:
    """The outcome of a run: its result, halt reason, pending question or doubt; always steps and tokens.
    A long result shows its beginning unless ``cap.full``."""
    status = result.status
    parts: list[str] = []
    if status == "done":
        parts += ["<p><strong>Done.</strong></p>", _result_html(result.result, cap)]
    elif status == "halt":
        parts.append(f"<p><strong>Halted:</strong> {_code(result.error or 'halt')}{_at_html(result)}</p>")
        diagnosis = _diagnosis_text(result)
        parts += [f"<p><mark>{_e(diagnosis)}</mark></p>"] if diagnosis else []
    elif status == "suspended":
        waiting = f"waiting for {_e(_waiting_for(result))}{_resumes_html(result)}"
        parts.append(f"<p><strong>Suspended ({_e(result.error)}):</strong> {waiting}.</p>")
        parts.append(_asked_again_html(result))
        parts.append(_questions_html(result))
        parts += [f"<p>The reply goes to {_code(result.reply_to)}.</p>"] if result.reply_to else []
    else:
        parts.append(f"<p><strong>In doubt</strong>{_at_html(result)}: {_e(_IN_DOUBT)}.</p>")
        parts += [f"<p>{_code(result.error)}</p>"] if result.error else []
    parts.append(f"<p><small>{_e(_usage_text(result, calls))}</small></p>")
    return "".join(parts)


def result_summary_text(result: RunResult, calls: Mapping[str, int] | None = None, cap: Cap = Cap()) -> str:
    """The text twin of :func:`result_summary_html`."""
    status = result.status
    lines: list[str] = []
    if status == "done":
        lines += ["Done.", *_result_text(result.result, cap)]
    elif status == "halt":
        lines.append(f"Halted: {result.error or 'halt'}{_at_text(result)}")
        diagnosis = _diagnosis_text(result)
        lines += [diagnosis] if diagnosis else []
    elif status == "suspended":
        lines.append(f"Suspended ({result.error}): waiting for {_waiting_for(result)}{_resumes_text(result)}.")
        for sentence, diff in asked_again(result):
            lines += [sentence, *(f"    {line}" for line in diff)]
        lines += _questions_text(result)
        lines += [f"The reply goes to {result.reply_to}."] if result.reply_to else []
    else:
        lines.append(f"In doubt{_at_text(result)}: {_IN_DOUBT}.")
        lines += [result.error] if result.error else []
    lines.append(_usage_text(result, calls))
    return "\n".join(lines)


# -- live progress -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Live:
    """What a working run's live line shows besides where it is: the answer being written, a judge at
    work, one line per fan-out branch, and what the model calls cost so far (when that is known)."""

    writing: str | None = None  # the text of the answer arriving now, so far
    judging: bool = False
    branches: tuple[str, ...] = ()
    cost_usd: float | None = None


def _progress_facts(steps: int, usage: Mapping[str, int] | None, elapsed: float | None, live: Live) -> str:
    usage = usage or {}
    tokens = int(usage.get("input_tokens") or 0) + int(usage.get("output_tokens") or 0)
    time_taken = f" · {elapsed:.1f} s" if elapsed is not None else ""
    cost = f" · {money(live.cost_usd)}" if live.cost_usd is not None else ""
    return f"{_plural(steps, 'step')} · {_plural(tokens, 'token')}{cost}{time_taken}"


def _doing(state: str | None, live: Live, name: Callable[[str], str] = str) -> str:
    """What the run does now: starting, in a state, writing its answer, or judging; ``name`` shows the state."""
    if not state:
        return "starting"
    if live.judging:
        return f"judging {name(state)} …"
    if live.writing is not None:
        return f"writing {name(state)} …"
    return f"state {name(state)}"


def _tail(text: str) -> str:
    return text if len(text) <= LIVE_TAIL else "…" + text[-LIVE_TAIL:]


def progress_html(
    state: str | None,
    steps: int,
    usage: Mapping[str, int] | None,
    elapsed: float | None = None,
    live: Live | None = None,
) -> str:
    """The live line while a run works: what it does (in a state, writing its answer, judging), steps,
    tokens, cost and time so far; below it the answer as it arrives, or a line per fan-out branch."""
    live = live or Live()
    parts = [
        f"<p><em>running</em> — {_doing(state, live, _code)} · {_e(_progress_facts(steps, usage, elapsed, live))}</p>"
    ]
    if live.writing:
        parts.append(f"<blockquote><pre>{_e(_tail(live.writing))}</pre></blockquote>")
    if live.branches:
        parts.append("<ul>" + "".join(f"<li>{_e(line)}</li>" for line in live.branches) + "</ul>")
    return "".join(parts)


def progress_text(
    state: str | None,
    steps: int,
    usage: Mapping[str, int] | None,
    elapsed: float | None = None,
    live: Live | None = None,
) -> str:
    live = live or Live()
    lines = [f"running — {_doing(state, live)} · {_progress_facts(steps, usage, elapsed, live)}"]
    if live.writing:
        lines.append(_indent(_tail(live.writing), "    "))
    lines += [f"  {line}" for line in live.branches]
    return "\n".join(lines)


# -- the pending card (a notebook opened without a kernel) ------------------------------------


def continue_commands(result: RunResult, base: str, question: str | None = None) -> list[str]:
    """The commands that continue a waiting or in-doubt run, after ``base`` (``mkl resume … RUN``).

    A reply names the ``question`` it answers (the run's :meth:`RunResult.question_id`).
    """
    if result.status == "in_doubt":
        return [f"{base} --resolve completed=VALUE", f"{base} --resolve retry", f"{base} --resolve abort"]
    if result.status != "suspended":
        return []
    if result.error == "budget-exhausted":
        whose = f"the called machine '{result.machine}'" if result.machine else "the run"
        return [f"{base} --max-steps N  (N is the new step budget of {whose})"]
    if result.error == "cost-exhausted":
        return [f"{base} --max-tokens N"]
    if result.error == "spend-exhausted":
        return [f"{base} --max-cost USD  (a new limit for the whole run, in US dollars)"]
    if question:
        base = f"{base} --question {question}"
    if result.error == "asked" or not result.reply_to:  # a model's question takes a plain reply
        return [f"{base} --reply …"]
    return [f"{base} --set {result.reply_to}=…"]


UNKNOWN_NOTEBOOK = "NOTEBOOK.ipynb"  # in commands, when the kernel was not told which file it runs


def _notebook_commands(run_id: str, result: RunResult, notebook: str | None = None) -> list[str]:
    name = shlex.quote(notebook) if notebook else UNKNOWN_NOTEBOOK
    return continue_commands(result, f"mkl resume {name} --run {shlex.quote(run_id)}", result.question_id(run_id))


def _pending_lines(run_id: str, machine_name: str, result: RunResult) -> tuple[str, str, str | None]:
    """(title, what is pending, detail) of the card, as plain text."""
    if result.status == "in_doubt":
        return "In doubt", f"run {run_id} of {machine_name}{_at_text(result)}: {_IN_DOUBT}.", result.error
    waiting = f"is waiting for {_waiting_for(result)}{_resumes_text(result)}."
    return f"Pending ({result.error})", f"run {run_id} of {machine_name} {waiting}", None


_QUESTION_ABOVE = "The question and its form are above."


def pending_card_html(
    run_id: str, machine_name: str, result: RunResult, *, notebook: str | None = None, question_above: bool = False
) -> str:
    """A static card for a suspended or in-doubt run in a notebook opened without a kernel.

    It says what is pending (the ask, the reply's destination, the state) and how to continue
    (``notebook`` is the file's name for the commands). With ``question_above`` the question is
    left to the form shown above it, so that it is printed once.
    """
    title, what, detail = _pending_lines(run_id, machine_name, result)
    if question_above and result.waits_for_person:
        return f"<section><p><strong>{_e(title)}:</strong> {_e(what)} {_e(_QUESTION_ABOVE)}</p></section>"
    commands = "".join(f"<li>{_code(command)}</li>" for command in _notebook_commands(run_id, result, notebook))
    reply = f"<p>The reply goes to {_code(result.reply_to)}.</p>" if result.reply_to else ""
    return (
        f"<section><p><strong>{_e(title)}:</strong> {_e(what)}</p>"
        f"{f'<p>{_code(detail)}</p>' if detail else ''}{_questions_html(result)}{reply}"
        "<p>To continue, open this notebook with a kernel and run <code>%mkl pending</code>, "
        f"or from a terminal:</p><ul>{commands}</ul></section>"
    )


def pending_card_text(
    run_id: str, machine_name: str, result: RunResult, *, notebook: str | None = None, question_above: bool = False
) -> str:
    """The text twin of :func:`pending_card_html`."""
    title, what, detail = _pending_lines(run_id, machine_name, result)
    if question_above and result.waits_for_person:
        return f"{title}: {what} {_QUESTION_ABOVE}"
    lines = [f"{title}: {what}", *([detail] if detail else []), *_questions_text(result)]
    lines += [f"The reply goes to {result.reply_to}."] if result.reply_to else []
    lines.append("To continue, open this notebook with a kernel and run %mkl pending, or from a terminal:")
    lines += [f"  {command}" for command in _notebook_commands(run_id, result, notebook)]
    return "\n".join(lines)


# -- a question in a cell: the form's place, with or without a kernel ------------------------


def waiting_html(run_id: str, result: RunResult, notebook: str | None = None) -> str:
    """What stands in a form's place when no kernel draws it: the question, and the command that answers it."""
    commands = "".join(f"<li>{_code(command)}</li>" for command in _notebook_commands(run_id, result, notebook))
    reply = f" The reply goes to {_code(result.reply_to)}." if result.reply_to else ""
    return (
        f"<section>{_questions_html(result)}<p>Run {_code(run_id)} waits for this reply at "
        f"{_code(result.at)}.{reply} Answer it in this notebook with its kernel (the form appears here), "
        f"or from a terminal:</p><ul>{commands}</ul></section>"
    )


def waiting_text(run_id: str, result: RunResult, notebook: str | None = None) -> str:
    """The text twin of :func:`waiting_html`."""
    lines = [*_questions_text(result), f"Run {run_id} waits for this reply at {result.at}."]
    lines += [f"The reply goes to {result.reply_to}."] if result.reply_to else []
    lines.append("Answer it in this notebook with its kernel (the form appears here), or from a terminal:")
    lines += [f"  {command}" for command in _notebook_commands(run_id, result, notebook)]
    return "\n".join(lines)


def untrusted_bundle(run_id: str, source: str, mark: str, found: str, ask: str | None) -> dict[str, str]:
    """What stands where a run would show when the notebook's copy of it is not trusted: whose it is, how
    the file shows it (its question behind that mark), and how to take it up."""
    commands = [f"%mkl run … --trust-file  (or %mkl resume {run_id} --trust-file)", f"mkl trust {source}"]
    asked = f" The file says it asks: “{ask}”." if ask else ""
    text = "\n".join(
        [
            f"NOT TRUSTED: run {run_id} in {source} is {mark}.",
            "What it shows may not be what its machine's author wrote, and nothing of it runs here until you "
            f"choose to take it up. As the file shows it, the run is {found}.{asked}",
            "Take it up once with the button, or:",
            *(f"  {command}" for command in commands),
        ]
    )
    listed = "".join(f"<li>{_code(command)}</li>" for command in commands)
    asked_html = f" The file says it asks: “{_e(ask)}”." if ask else ""
    page = (
        f"<section><p><strong>Not trusted:</strong> run {_code(run_id)} in {_code(source)} is "
        f"<em>{_e(mark)}</em>.</p><p>What it shows may not be what its machine's author wrote, and nothing "
        f"of it runs here until you choose to take it up. As the file shows it, the run is {_e(found)}."
        f"{asked_html}</p><p>Take it up once with the button, or:</p><ul>{listed}</ul></section>"
    )
    return {"text/plain": text, "text/html": page}


def answers_sentence(answers: Sequence[Mapping[str, Any]]) -> str:
    """The answers a cell's form gave, one sentence: "Answered 'approve' (by alice, …, via form)."."""
    said = []
    for answer in answers:
        facts = answered_by(answer.get("by"), answer.get("at", answer.get("time")), answer.get("via"))
        said.append(f"{fmt(answer.get('value'))!r}" + (f" ({facts})" if facts else ""))
    return f"Answered {', then '.join(said)}." if said else ""


def answered_bundle(answers: Sequence[Mapping[str, Any]], note: str = "") -> dict[str, str]:
    """A form's place once its question is answered or no longer asked: what happened, in a sentence."""
    text = " ".join(part for part in (answers_sentence(answers), note) if part)
    return {"text/plain": text, "text/html": f"<p><em>{_e(text)}</em></p>" if text else ""}


@dataclass(frozen=True)
class Later:
    """What became of a run after the part a cell shows: how it stands now, and the answers given since."""

    status: str
    error: str | None
    at: str | None
    answers: tuple[Mapping[str, Any], ...] = ()

    def sentence(self) -> str:
        given = answers_sentence(self.answers)
        return (
            f"The run went on after this cell{': ' + given[:1].lower() + given[1:-1] if given else ''}; "
            f"it is now {status_phrase(self.status, self.error, self.at)}."
        )


def status_phrase(status: str, error: str | None, at: str | None) -> str:
    """Where a run stands, to end a sentence: "done", "waiting (escalated) at confirm", "halted (…) at s"."""
    now = {"done": "done", "halt": "halted", "suspended": "waiting", "in_doubt": "in doubt"}.get(status, status)
    detail = f" ({error})" if error and status != "done" else ""
    where = f" at {at}" if at and status != "done" else ""
    return f"{now}{detail}{where}"


# -- the run's display output ------------------------------------------------------------------


def _highlight_max(result: RunResult) -> bool:
    return result.error in BUDGET_HALTS


UNDEFINED_MACHINE = "(machine not defined)"


@dataclass(frozen=True)
class Shown:
    """How a run's view is drawn: the notebook's file name for commands, whether a form above carries the
    question, and what became of the run since the part shown (when it went on)."""

    notebook: str | None = None
    question_above: bool = False
    later: Later | None = None
    replayed: int = 0  # how many leading steps took their answers from the journal
    note: str | None = None  # said first: e.g. that the notebook's saved copy of the run was not taken up


def _waited_here(result: RunResult) -> str:
    return f"This cell left the run waiting for {_waiting_for(result)}{_resumes_text(result)}."


def run_html(
    run_id: str,
    machine: Machine | None,
    result: RunResult,
    calls: Mapping[str, int] | None = None,
    shown: Shown = Shown(),
) -> str:
    """The finished (or parked) view of a run: outcome or pending card, then trace and visits (given the
    machine), folded when a person's answer is awaited so that the question leads.

    ``calls`` (made, replayed) says what showing it cost: a replayed run says so. Long traces, big
    machines' visits and long results are capped (:func:`cut`), with the magics that show them whole.
    """
    name = machine.name if machine is not None else UNDEFINED_MACHINE
    cap = notebook_cap(run_id)
    usage = f"<p><small>{_e(_usage_text(result, calls))}</small></p>"
    if shown.later is not None and result.status == "suspended":
        head = f"<p><strong>{_e(_waited_here(result))}</strong></p>{_questions_html(result)}{usage}"
    elif result.status in ("suspended", "in_doubt"):
        card = pending_card_html(run_id, name, result, notebook=shown.notebook, question_above=shown.question_above)
        head = card + _asked_again_html(result) + usage
    else:
        head = result_summary_html(result, calls, cap)
    if shown.later is not None:
        head += f"<p><mark>{_e(shown.later.sentence())}</mark></p>"
    if shown.note:
        head = f"<p><mark>{_e(shown.note)}</mark></p>{head}"
    trace = trace_table_html(
        result.trace_with_open_call(),
        caption=f"Trace of {run_id}",
        answers=traced_answers(result),
        replayed=shown.replayed,
        cap=cap,
    )
    visits = (
        ""
        if machine is None
        else visits_table_html(machine, result.visits, result.diagnosis, highlight_max=_highlight_max(result), cap=cap)
    )
    folded = " open" if not result.waits_for_person else ""
    details = (
        f"<details{folded}><summary>Trace and visits — {_e(_plural(_steps(result.trace), 'step'))}</summary>"
        f"{trace}{visits}</details>"
    )
    return f"<div>{head}{details}</div>"


def run_text(
    run_id: str,
    machine: Machine | None,
    result: RunResult,
    calls: Mapping[str, int] | None = None,
    shown: Shown = Shown(),
) -> str:
    """The text twin of :func:`run_html`."""
    name = machine.name if machine is not None else UNDEFINED_MACHINE
    cap = notebook_cap(run_id)
    if shown.later is not None and result.status == "suspended":
        head = "\n".join([_waited_here(result), *_questions_text(result), _usage_text(result, calls)])
    elif result.status in ("suspended", "in_doubt"):
        card = pending_card_text(run_id, name, result, notebook=shown.notebook, question_above=shown.question_above)
        again = [line for sentence, diff in asked_again(result) for line in (sentence, *(f"    {d}" for d in diff))]
        head = "\n".join([card, *again, _usage_text(result, calls)])
    else:
        head = result_summary_text(result, calls, cap)
    if shown.later is not None:
        head += f"\n{shown.later.sentence()}"
    if shown.note:
        head = f"{shown.note}\n{head}"
    trace = trace_table_text(
        result.trace_with_open_call(),
        caption=f"Trace of {run_id}",
        answers=traced_answers(result),
        replayed=shown.replayed,
        cap=cap,
    )
    parts = [head, trace]
    if machine is not None:
        visits = visits_table_text(
            machine, result.visits, result.diagnosis, highlight_max=_highlight_max(result), cap=cap
        )
        parts.append(visits)
    return "\n\n".join(parts)


def run_bundle(
    run_id: str,
    machine: Machine | None,
    result: RunResult,
    calls: Mapping[str, int] | None = None,
    shown: Shown = Shown(),
) -> dict[str, str]:
    """The finished (or parked) view of a run as HTML and text (the diagram is a separate output)."""
    return {
        "text/html": run_html(run_id, machine, result, calls, shown),
        "text/plain": run_text(run_id, machine, result, calls, shown),
    }


def progress_bundle(
    state: str | None,
    steps: int,
    usage: Mapping[str, int] | None,
    elapsed: float | None = None,
    live: Live | None = None,
) -> dict[str, str]:
    """The live line of a run that is still working, as HTML and text."""
    return {
        "text/html": progress_html(state, steps, usage, elapsed, live),
        "text/plain": progress_text(state, steps, usage, elapsed, live),
    }


RunRow = tuple[str, str, str, str, str, str]  # run id, machine, status, error, at, what its model calls cost


def spent_cell(cost: float | None) -> str:
    """What a run's model calls cost, for a listing: the amount, or a dash when a price is unknown."""
    return NONE if cost is None else money(cost)


def runs_table_html(rows: Sequence[RunRow]) -> str:
    """The runs of a store or notebook, one row each (``%mkl runs``)."""
    if not rows:
        return "<p><em>No runs.</em></p>"
    body = "".join(
        f"<tr><td>{_code(run_id)}</td><td>{_code(name)}</td><td>{_e(status)}</td><td>{_e(error)}</td>"
        f"<td>{_code(at) if at else ''}</td><td>{_e(cost)}</td></tr>"
        for run_id, name, status, error, at, cost in rows
    )
    head = "".join(f"<th>{name}</th>" for name in _RUNS_HEAD)
    return f"<table><caption>Runs</caption><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def runs_table_text(rows: Sequence[RunRow]) -> str:
    if not rows:
        return "No runs."
    return "\n".join(["Runs", *columns([_RUNS_HEAD, *(tuple(map(str, row)) for row in rows)])])


def runs_bundle(rows: Sequence[RunRow]) -> dict[str, str]:
    return {"text/html": runs_table_html(rows), "text/plain": runs_table_text(rows)}


# -- scenarios ---------------------------------------------------------------------------------


def _tally(outcomes: Sequence[ScenarioOutcome]) -> str:
    passed = sum(1 for outcome in outcomes if outcome.passed)
    return f"{passed} passed, {len(outcomes) - passed} failed"


def scenario_table_html(outcomes: Sequence[ScenarioOutcome]) -> str:
    """Pass/fail per scenario, with an ``N passed, N failed`` summary row."""
    body = "".join(
        f"<tr><td>{_code(o.name)}</td><td>{'PASS' if o.passed else '<strong>FAIL</strong>'}</td>"
        f"<td>{_e(o.why)}</td></tr>"
        for o in outcomes
    )
    return (
        "<table><caption>Scenarios</caption><thead><tr><th>scenario</th><th>outcome</th><th>why</th></tr>"
        f'</thead><tbody>{body}</tbody><tfoot><tr><th colspan="3">{_e(_tally(outcomes))}</th></tr></tfoot>'
        "</table>"
    )


def scenario_table_text(outcomes: Sequence[ScenarioOutcome]) -> str:
    lines = [f"PASS {o.name}" if o.passed else f"FAIL {o.name}: {o.why}" for o in outcomes]
    return "\n".join([*lines, _tally(outcomes)])


# -- where approvals wait ---------------------------------------------------------------------

_QUESTIONS_HEAD = ("where", "run", "asks", "answer with")


def asked_as_listed(listed: Mapping[str, Any], *, said_below: bool = False) -> str:
    """A listed run's question, behind a mark when its checkpoint is not one this person trusts: the
    text may not be what the machine's author wrote. ``said_below``: the listing says whose it is next."""
    ask = str(listed.get("ask") or "")
    if listed.get("trusted") is False:
        return f"[NOT TRUSTED] {ask}" if said_below else f"[NOT TRUSTED: {listed.get('made_by')}] {ask}"
    return ask


def questions_table_html(questions: Sequence[Mapping[str, Any]], problems: Sequence[str] = ()) -> str:
    """Every waiting question found under a folder (``%mkl pending --all``), with the command that answers it."""
    notes = "".join(f"<p><small>Not read: {_e(problem)}</small></p>" for problem in problems)
    if not questions:
        return f"<p><em>No run waits for a person.</em></p>{notes}"
    head = "".join(f"<th>{name}</th>" for name in _QUESTIONS_HEAD)
    body = "".join(
        f"<tr><td>{_code(q['where'])}</td><td>{_code(q['run'])}</td><td>{_e(asked_as_listed(q))}</td>"
        f"<td>{_code(q['command'])}</td></tr>"
        for q in questions
    )
    caption = f"<caption>Waiting for a person — {_e(_plural(len(questions), 'question'))}</caption>"
    return f"<table>{caption}<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>{notes}"


def questions_table_text(questions: Sequence[Mapping[str, Any]], problems: Sequence[str] = ()) -> str:
    notes = [f"Not read: {problem}" for problem in problems]
    if not questions:
        return "\n".join(["No run waits for a person.", *notes])
    rows = [(str(q["where"]), str(q["run"]), asked_as_listed(q), str(q["command"])) for q in questions]
    return "\n".join(
        [f"Waiting for a person — {_plural(len(questions), 'question')}", *columns([_QUESTIONS_HEAD, *rows]), *notes]
    )


def questions_bundle(questions: Sequence[Mapping[str, Any]], problems: Sequence[str] = ()) -> dict[str, str]:
    return {
        "text/html": questions_table_html(questions, problems),
        "text/plain": questions_table_text(questions, problems),
    }


# -- the standard library -------------------------------------------------------------------------

_LIBRARY_HEAD = ("machine", "reads", "returns", "states")


def _library_rows(library: Mapping[str, Machine], shadowed: Sequence[str]) -> list[tuple[str, str, str, str]]:
    rows = []
    for name, machine in library.items():
        mark = " (shadowed by the notebook's)" if name in shadowed else ""
        reads = ", ".join(machine.context) or "–"
        rows.append((name + mark, reads, machine.result or "the last output", " → ".join(machine.states)))
    return rows


def library_html(library: Mapping[str, Machine], shadowed: Sequence[str] = ()) -> str:
    """The standard library's machines (``%mkl stdlib``): what each reads from its input and returns."""
    body = "".join(
        f"<tr><td>{_code(name)}</td><td>{_e(reads)}</td><td>{_code(result)}</td><td>{_e(states)}</td></tr>"
        for name, reads, result, states in _library_rows(library, shadowed)
    )
    head = "".join(f"<th>{name}</th>" for name in _LIBRARY_HEAD)
    caption = "The standard library — <code>call: NAME</code> from any machine; <code>%mkl stdlib NAME</code> shows one"
    return f"<table><caption>{caption}</caption><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def library_text(library: Mapping[str, Machine], shadowed: Sequence[str] = ()) -> str:
    """The text twin of :func:`library_html`."""
    rows = [_LIBRARY_HEAD, *_library_rows(library, shadowed)]
    return "\n".join(["The standard library (call: NAME from any machine; %mkl stdlib NAME shows one)", *columns(rows)])
