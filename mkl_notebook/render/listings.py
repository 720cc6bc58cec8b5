"""Listings, HTML and text: the runs of a store or notebook, the questions waiting for a person under a
folder, a machine's scenarios passed and failed, and the standard library's machines.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, NamedTuple, Protocol

from ..lang.model import Machine
from .common import NONE, _code, _e, _plural, columns, money, table_cell, table_row


def _table_html(
    caption: str, head: Sequence[str], rows: Iterable[Sequence[str]], foot: str = "", numbers: Sequence[int] = ()
) -> str:
    """A listing as an HTML table: ``caption`` and ``foot`` are HTML, ``head`` the column names, ``rows``
    each row's cells as HTML; the columns at ``numbers`` hold numbers, the others words (left-aligned)."""
    names = table_row([_e(name) for name in head], numbers, tag="th")
    body = "".join(table_row(row, numbers) for row in rows)
    return f"<table><caption>{caption}</caption><thead>{names}</thead><tbody>{body}</tbody>{foot}</table>"


# -- runs ----------------------------------------------------------------------------------------

RunRow = tuple[str, str, str, str, str, str]  # run id, machine, status, error, at, what its model calls cost
_RUNS_HEAD = ("run", "machine", "status", "error", "at", "spent")
_NO_RUNS = "No runs."


class _RunsRow(NamedTuple):
    """One run of the runs table, as the strings both twins show (the text twin prints them as they are)."""

    run: str
    machine: str
    status: str
    error: str
    at: str
    spent: str

    def html(self) -> tuple[str, ...]:
        """The cells as the HTML twin shows them."""
        at = _code(self.at) if self.at else ""
        return (_code(self.run), _code(self.machine), _e(self.status), _e(self.error), at, _e(self.spent))


def _runs_rows(rows: Sequence[RunRow]) -> list[_RunsRow]:
    return [_RunsRow(*map(str, row)) for row in rows]


def spent_cell(cost: float | None) -> str:
    """What a run's model calls cost, for a listing: the amount, or a dash when a price is unknown."""
    return NONE if cost is None else money(cost)


def runs_table_html(rows: Sequence[RunRow]) -> str:
    """The runs of a store or notebook, one row each (``%mkl runs``)."""
    if not rows:
        return f"<p><em>{_e(_NO_RUNS)}</em></p>"
    return _table_html("Runs", _RUNS_HEAD, (row.html() for row in _runs_rows(rows)), numbers=(5,))


def runs_table_text(rows: Sequence[RunRow]) -> str:
    """The text twin of :func:`runs_table_html`."""
    if not rows:
        return _NO_RUNS
    return "\n".join(["Runs", *columns([_RUNS_HEAD, *_runs_rows(rows)])])


def runs_bundle(rows: Sequence[RunRow]) -> dict[str, str]:
    """The runs table as HTML and text."""
    return {"text/html": runs_table_html(rows), "text/plain": runs_table_text(rows)}


# -- scenarios -----------------------------------------------------------------------------------

_SCENARIO_HEAD = ("scenario", "outcome", "why")
_PASS, _FAIL = "PASS", "FAIL"


class ScenarioOutcome(Protocol):
    """What the scenario table needs of one scenario's outcome (``testing.Outcome`` has it)."""

    name: str
    passed: bool
    why: str


class _ScenarioRow(NamedTuple):
    """One scenario, as the strings both twins show: its name, PASS or FAIL, and why."""

    name: str
    outcome: str
    why: str

    def html(self) -> tuple[str, ...]:
        """The cells as the HTML twin shows them."""
        outcome = self.outcome if self.outcome == _PASS else f"<strong>{self.outcome}</strong>"
        return (_code(self.name), outcome, _e(self.why))

    def text(self) -> str:
        """A passed scenario's name; a failed one's, and why."""
        return f"{self.outcome} {self.name}" + ("" if self.outcome == _PASS else f": {self.why}")


def _scenario_rows(outcomes: Sequence[ScenarioOutcome]) -> list[_ScenarioRow]:
    return [_ScenarioRow(str(o.name), _PASS if o.passed else _FAIL, str(o.why)) for o in outcomes]


def _tally(rows: Sequence[_ScenarioRow]) -> str:
    passed = sum(1 for row in rows if row.outcome == _PASS)
    return f"{passed} passed, {len(rows) - passed} failed"


def scenario_table_html(outcomes: Sequence[ScenarioOutcome]) -> str:
    """Pass/fail per scenario, with an ``N passed, N failed`` summary row."""
    rows = _scenario_rows(outcomes)
    foot = f"<tfoot><tr>{table_cell(_e(_tally(rows)), tag='th', span=len(_SCENARIO_HEAD))}</tr></tfoot>"
    return _table_html("Scenarios", _SCENARIO_HEAD, (row.html() for row in rows), foot)


def scenario_table_text(outcomes: Sequence[ScenarioOutcome]) -> str:
    """The text twin of :func:`scenario_table_html`: a line per scenario, then the tally."""
    rows = _scenario_rows(outcomes)
    return "\n".join([*(row.text() for row in rows), _tally(rows)])


# -- where approvals wait ---------------------------------------------------------------------

_QUESTIONS_HEAD = ("where", "run", "asks", "answer with")
_NO_QUESTIONS = "No run waits for a person."


class _QuestionsRow(NamedTuple):
    """One waiting question, as the strings both twins show (the text twin prints them as they are)."""

    where: str
    run: str
    asks: str
    command: str

    def html(self) -> tuple[str, ...]:
        """The cells as the HTML twin shows them."""
        where, run = (_code(text) if text else "" for text in (self.where, self.run))
        return (where, run, _e(self.asks), _code(self.command))


def _questions_rows(questions: Sequence[Mapping[str, Any]]) -> list[_QuestionsRow]:
    """A row for each question, and one below it for each other command that answers it (approve, reject)."""
    rows = []
    for q in questions:
        first, *others = q.get("commands") or [q["command"]]
        rows.append(_QuestionsRow(str(q["where"]), str(q["run"]), asked_as_listed(q), str(first)))
        rows += [_QuestionsRow("", "", "", str(other)) for other in others]
    return rows


def _questions_caption(questions: Sequence[Any]) -> str:
    return f"Waiting for a person — {_plural(len(questions), 'question')}"


def _not_read(problems: Sequence[str]) -> list[str]:
    return [f"Not read: {problem}" for problem in problems]


def asked_as_listed(listed: Mapping[str, Any], *, said_below: bool = False) -> str:
    """A listed run's question, behind a mark when its checkpoint is not one this person trusts: the
    text may not be what the machine's author wrote. ``said_below``: the listing says whose it is next."""
    ask = str(listed.get("ask") or "")
    if listed.get("trusted") is False:
        return f"[NOT TRUSTED] {ask}" if said_below else f"[NOT TRUSTED: {listed.get('made_by')}] {ask}"
    return ask


def questions_table_html(questions: Sequence[Mapping[str, Any]], problems: Sequence[str] = ()) -> str:
    """Every waiting question found under a folder (``%mkl pending --all``), with the command that answers it."""
    notes = "".join(f"<p><small>{_e(note)}</small></p>" for note in _not_read(problems))
    if not questions:
        return f"<p><em>{_e(_NO_QUESTIONS)}</em></p>{notes}"
    rows = (row.html() for row in _questions_rows(questions))
    return _table_html(_e(_questions_caption(questions)), _QUESTIONS_HEAD, rows) + notes


def questions_table_text(questions: Sequence[Mapping[str, Any]], problems: Sequence[str] = ()) -> str:
    """The text twin of :func:`questions_table_html`."""
    notes = _not_read(problems)
    if not questions:
        return "\n".join([_NO_QUESTIONS, *notes])
    table = columns([_QUESTIONS_HEAD, *_questions_rows(questions)])
    return "\n".join([_questions_caption(questions), *table, *notes])


def questions_bundle(questions: Sequence[Mapping[str, Any]], problems: Sequence[str] = ()) -> dict[str, str]:
    """The waiting questions as HTML and text."""
    return {
        "text/html": questions_table_html(questions, problems),
        "text/plain": questions_table_text(questions, problems),
    }


# -- the standard library -------------------------------------------------------------------------

_LIBRARY_HEAD = ("machine", "reads", "returns", "states")


class _LibraryRow(NamedTuple):
    """One machine of the standard library, as the strings both twins show (the text twin prints them
    as they are)."""

    machine: str
    reads: str
    returns: str
    states: str

    def html(self) -> tuple[str, ...]:
        """The cells as the HTML twin shows them."""
        return (_code(self.machine), _e(self.reads), _code(self.returns), _e(self.states))


def _library_rows(library: Mapping[str, Machine], shadowed: Sequence[str]) -> list[_LibraryRow]:
    rows = []
    for name, machine in library.items():
        mark = " (shadowed by the notebook's)" if name in shadowed else ""
        reads = ", ".join(machine.context) or "–"
        rows.append(_LibraryRow(name + mark, reads, machine.result or "the last output", " → ".join(machine.states)))
    return rows


def library_html(library: Mapping[str, Machine], shadowed: Sequence[str] = ()) -> str:
    """The standard library's machines (``%mkl stdlib``): what each reads from its input and returns."""
    caption = "The standard library — <code>call: NAME</code> from any machine; <code>%mkl stdlib NAME</code> shows one"
    return _table_html(caption, _LIBRARY_HEAD, (row.html() for row in _library_rows(library, shadowed)))


def library_text(library: Mapping[str, Machine], shadowed: Sequence[str] = ()) -> str:
    """The text twin of :func:`library_html`."""
    rows = [_LIBRARY_HEAD, *_library_rows(library, shadowed)]
    return "\n".join(["The standard library (call: NAME from any machine; %mkl stdlib NAME shows one)", *columns(rows)])
