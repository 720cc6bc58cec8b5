"""Listings, HTML and text: the runs of a store or notebook, the questions waiting for a person under a
folder, a machine's scenarios passed and failed, and the standard library's machines.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from ..lang.model import Machine
from .common import NONE, _code, _e, _plural, columns, money

_RUNS_HEAD = ("run", "machine", "status", "error", "at", "spent")


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
    """The text twin of :func:`runs_table_html`."""
    if not rows:
        return "No runs."
    return "\n".join(["Runs", *columns([_RUNS_HEAD, *(tuple(map(str, row)) for row in rows)])])


def runs_bundle(rows: Sequence[RunRow]) -> dict[str, str]:
    """The runs table as HTML and text."""
    return {"text/html": runs_table_html(rows), "text/plain": runs_table_text(rows)}


class ScenarioOutcome(Protocol):
    """What the scenario table needs of one scenario's outcome (``testing.Outcome`` has it)."""

    name: str
    passed: bool
    why: str


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
    """The text twin of :func:`scenario_table_html`: a line per scenario, then the tally."""
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
    """The text twin of :func:`questions_table_html`."""
    notes = [f"Not read: {problem}" for problem in problems]
    if not questions:
        return "\n".join(["No run waits for a person.", *notes])
    rows = [(str(q["where"]), str(q["run"]), asked_as_listed(q), str(q["command"])) for q in questions]
    return "\n".join(
        [f"Waiting for a person — {_plural(len(questions), 'question')}", *columns([_QUESTIONS_HEAD, *rows]), *notes]
    )


def questions_bundle(questions: Sequence[Mapping[str, Any]], problems: Sequence[str] = ()) -> dict[str, str]:
    """The waiting questions as HTML and text."""
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
