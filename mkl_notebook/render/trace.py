"""A run's trace as a table, HTML and text: a row per step, fan-out branches and nested sub-runs under
their step, and a person's answers between the steps they came after.

Both twins are drawn from one row model (:class:`_Row`) so that they always state the same facts. A long
trace, a wide fan-out and many sub-runs show their first and last entries (:func:`.common.cut`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..engine.result import RunResult
from ..lang.interpolate import fmt
from .common import (
    DEFAULT_CAP,
    NONE,
    PREVIEW,
    Cap,
    Step,
    _e,
    _how,
    _how_html,
    _plural,
    answered_by,
    columns,
    cut,
    money,
    note_said,
    printable,
    shorten,
    table_cell,
    table_row,
)

BRANCH_PREVIEW = 200
GATE_MAX = 40
_FAILED_POLICIES = (
    "fail",
    "no-gate-matched",
    "judge-unparseable",
    "call-failed",
    "state-error",
    "untrusted-control-flow",
)
_TRACE_HEAD = ("step", "state", "gate", "decided by", "policy", "to", "tokens", "output")
_TRACE_NUMBERS = (0, 6)  # the columns of numbers: step and tokens (with time and cost)


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


# How a step's gate was chosen (the trace's ``gate_via``), as the "decided by" column says it.
_DECIDED_BY = {"llm": "the model", "otherwise": "otherwise", "on_error": "on_error route"}
# What the trace notes of a step, in the words its rows say them in brackets.
OUTSIDE_TEXT = "after reading outside text"
REPLAYED = "replayed from the journal"
CUT = "cut at the model's length limit"
RISKY_TOOL = "a tool with effects, reached by a model's decision on outside text"

# The legend under a trace: what each word or mark its rows may show means, said once, for those it shows.
_LEGEND = {
    "none": f"{NONE}: nothing",
    "note": "[…]: what to know about that step",
    "llm": "the model: a model judged which gate's condition holds",
    "otherwise": "otherwise: the gate taken when no other fires",
    "hook": "hook: a Python function of the host decided",
    "on_error": "on_error route: the state failed and its on_error gate took over",
    "outside": "outside text: from tools, people or inputs, and it may carry instructions (docs §6)",
    "replayed": "replayed: the answers came from the run's journal, no call was made again",
    "below": "↳ a person's answer or a sub-run, below the step it came after",
}


def _decided_by(step: Step) -> str:
    via = step.get("gate_via")
    if via == "hook" and step.get("hook"):
        return f"hook {step['hook']}"
    return _DECIDED_BY.get(str(via), str(via)) if via else NONE


def _decision_flags(step: Step) -> tuple[str, ...]:
    flags = []
    if step.get("decision_tainted"):
        flags.append(OUTSIDE_TEXT)
    if step.get("judge_none"):
        times = int(step["judge_none"])
        flags.append("the model said no condition holds" + (f" ({times} times)" if times > 1 else ""))
    if step.get("judge_fallback"):
        raw = step.get("judge_raw")
        unread = "the model's answer could not be read"
        flags.append(f"{unread}: {shorten(raw, 40)}" if raw else unread)
    return tuple(flags)


def _output_flags(step: Step) -> tuple[str, ...]:
    flags = []
    if step.get("untrusted_control_flow"):
        flags.append(RISKY_TOOL)
    if step.get("truncated"):
        flags.append(CUT)
    return tuple(flags)


def _marks(trace: Sequence[Step], replayed: int, answered: bool) -> set[str]:
    """The words and marks of :data:`_LEGEND` a trace's rows show (its sub-runs' rows too)."""
    marks = {"below"} if answered else set()
    for step in trace:
        via = step.get("gate_via")
        marks.add(str(via) if via in _LEGEND else "none")
        if step.get("decision_tainted") or step.get("untrusted_control_flow"):
            marks.add("outside")
        if _decision_flags(step) or _output_flags(step):
            marks.add("note")
        if isinstance(step.get("step"), int) and step["step"] <= replayed:
            marks |= {"replayed", "note"}
        if step.get("gate") is None or not step.get("policy") or not step.get("to"):
            marks.add("none")
        for _label, sub in _nested(step):
            marks |= {"below"} | _marks(sub, 0, False)
    return marks


def legend(trace: Sequence[Step], *, replayed: int = 0, answered: bool = False) -> str:
    """The one line under a trace that says what the words and marks its rows show mean ("" for none)."""
    marks = _marks(trace, replayed, answered)
    said = [meaning for mark, meaning in _LEGEND.items() if mark in marks]
    return f"Legend — {'; '.join(said)}." if said else ""


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
        (*_decision_flags(step), *((REPLAYED,) if from_journal else ())),
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


def _cells_html(row: _Row, cap: Cap = DEFAULT_CAP) -> list[str]:
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
            f"{trace_table_html(sub, caption=f'{label} trace', cap=cap, with_legend=False)}</details>"
        )

    blocks = "".join(block(index) for index in first)
    if last:
        left = _sub_runs_left_out(first, last)
        blocks += f"<p><em>{_e(left)}</em>{_how_html(cap.trace, 'shows them all')}</p>"
        blocks += "".join(block(index) for index in last)
    return f"<tr>{table_cell(blocks, span=len(_TRACE_HEAD))}</tr>"


# -- a person's answers, between the steps ------------------------------------------------------


def _answer_facts(answer: Mapping[str, Any]) -> tuple[str, str, str, str]:
    """(the reply, who / when / how, the question, the note beside the reply) of one answer, as plain text."""
    reply = shorten(fmt(answer.get("value")), PREVIEW)
    target = f" → {answer['reply_to']}" if answer.get("reply_to") else ""
    who = answered_by(answer)
    return f"{reply}{target}", who, shorten(str(answer.get("question") or ""), PREVIEW), note_said(answer.get("note"))


def _answers_by_step(answers: Sequence[Mapping[str, Any]]) -> dict[Any, list[Mapping[str, Any]]]:
    """The answers after each step (0: before the first), grouped once."""
    grouped: dict[Any, list[Mapping[str, Any]]] = {}
    for answer in answers:
        grouped.setdefault(answer.get("after"), []).append(answer)
    return grouped


ASKED_AGAIN = "asked again: this answer was to an earlier version of the output, which an edit changed"


def _answer_html(answer: Mapping[str, Any]) -> str:
    reply, who, question, note = _answer_facts(answer)
    noted = f" <em>{_e(note)}</em>" if note else ""
    asked = f" — asked: <em>{_e(question)}</em>" if question else ""
    again = f" — <mark>{_e(ASKED_AGAIN)}</mark>" if answer.get("asked_again") else ""
    said = f"↳ <strong>answered</strong> <code>{_e(reply)}</code>{noted}{f' {_e(who)}' if who else ''}{asked}{again}"
    return f"<tr>{table_cell(said, span=len(_TRACE_HEAD))}</tr>"


def _answer_text(answer: Mapping[str, Any], indent: str) -> str:
    reply, who, question, note = _answer_facts(answer)
    noted = f" {note}" if note else ""
    again = f" [{ASKED_AGAIN}]" if answer.get("asked_again") else ""
    line = f"answered {reply}{noted}{f' ({who})' if who else ''}{f' — asked: {question}' if question else ''}{again}"
    return f"{indent}  ↳ {printable(line)}"


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
    caption: str | None = "Trace",
    answers: Sequence[Mapping[str, Any]] = (),
    replayed: int = 0,
    cap: Cap = DEFAULT_CAP,
    with_legend: bool = True,
) -> str:
    """The steps of a run as a table; fan-out branches and nested sub-runs expand in ``<details>``.

    ``answers`` (a result's ``answers``) are rows of their own, after the step they followed; the
    first ``replayed`` steps are marked as answered from the journal. A long trace shows its first and
    last steps unless ``cap.full`` (see :func:`cut`). One line under the table says what its words and
    marks mean (:func:`legend`; a sub-run's table, ``with_legend=False``, leaves that to the run's). A
    ``caption`` of None leaves the caption to what holds the table (a run's view says it in its summary).
    """
    if not trace:
        return f"<p><em>{_e(caption or 'Trace')}: no steps recorded.</em></p>"
    head = table_row([_e(name) for name in _trace_head(trace)], _TRACE_NUMBERS, tag="th")
    after = _answers_by_step(answers)
    first, last = cut(len(trace), cap.full)

    def rows(positions: range) -> list[str]:
        body = []
        for index in positions:
            row = _row(trace[index], replayed)
            body.append(table_row(_cells_html(row, cap), _TRACE_NUMBERS))
            body.append(_nested_html(row, cap))
            body += [_answer_html(answer) for answer in after.get(index + 1, ())]
        return body

    body = [_answer_html(answer) for answer in after.get(0, ())] + rows(first)
    if last:
        left = _steps_left_out(trace, first, last, after)
        more = f"<em>{_e(left)}</em>{_how_html(cap.trace, 'shows every step')}"
        body.append(f"<tr>{table_cell(more, span=len(_TRACE_HEAD))}</tr>")
        body += rows(last)
    caption_html = f"<caption>{_e(caption)} — {_e(_plural(len(trace), 'step'))}</caption>" if caption else ""
    table = f"<table>{caption_html}<thead>{head}</thead><tbody>{''.join(body)}</tbody></table>"
    said = legend(trace, replayed=replayed, answered=bool(answers)) if with_legend else ""
    return table + (f"<p><small>{_e(said)}</small></p>" if said else "")


def _row_text(row: _Row) -> tuple[str, ...]:
    cells = list(row.cells)
    cells[3] += "".join(f" [{flag}]" for flag in row.decision_flags)
    cells[7] += "".join(f" [{flag}]" for flag in row.output_flags)
    return tuple(cells)


def trace_table_text(
    trace: Sequence[Step],
    *,
    caption: str = "Trace",
    indent: str = "",
    answers: Sequence[Mapping[str, Any]] = (),
    replayed: int = 0,
    cap: Cap = DEFAULT_CAP,
    with_legend: bool = True,
) -> str:
    """The text twin of :func:`trace_table_html`: fixed-width columns, sub-runs indented below their step,
    and the legend's line last."""
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
    said = legend(trace, replayed=replayed, answered=bool(answers)) if with_legend else ""
    return "\n".join([*out, *([indent + said] if said else [])])


def _nested_text(row: _Row, cap: Cap, indent: str) -> list[str]:
    first, last = cut(len(row.nested), cap.full)

    def block(index: int) -> str:
        label, sub = row.nested[index]
        return trace_table_text(sub, caption=f"↳ {label} trace", indent=indent + "    ", cap=cap, with_legend=False)

    out = [block(index) for index in first]
    if last:
        out.append(f"{indent}    {_sub_runs_left_out(first, last)}{_how(cap.trace, 'shows them all')}")
        out += [block(index) for index in last]
    return out
