"""The inbox, HTML and text: every question waiting in reach, oldest first, and the commands that answer each.

A row's texts come from files anyone may have written (the question, its subject, who asked, where): the HTML
escapes each, the text passes each through :func:`~.plain.printable` (one line per cell, no control character).
The subject is cut to one short line unless the view is ``full``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

from .common import NONE, _code, _e, _plural, answer_time, columns, shorten, table_row
from .listings import asked_as_listed

_HEAD = ("age", "run", "machine", "asks", "about", "asked by", "where", "may answer", "deadline")
_NO_QUESTIONS = "No question waits for a person in reach."
SUBJECT_SHOWN = 48  # characters of a subject the table shows, unless it shows it whole


def age_text(seconds: Any) -> str:
    """How long ago a question was asked, as a person reads it: "45s", "12m", "3h 5m", "2d 4h"."""
    if not isinstance(seconds, (int, float)):
        return NONE
    whole = int(seconds)
    for size, unit, smaller, small_unit in ((86400, "d", 3600, "h"), (3600, "h", 60, "m")):
        if whole >= size:
            rest = (whole % size) // smaller
            return f"{whole // size}{unit}" + (f" {rest}{small_unit}" if rest else "")
    return f"{whole // 60}m" if whole >= 60 else f"{whole}s"


def _who_may(row: Mapping[str, Any]) -> str:
    approvers = row.get("approvers") or []
    said = ", ".join(map(str, approvers)) if approvers else "anyone"
    return said if row.get("may_answer", True) else f"{said} (not you)"


def _where(row: Mapping[str, Any]) -> str:
    also = row.get("also_in") or []
    return str(row.get("where") or "") + (f" (also in {', '.join(map(str, also))})" if also else "")


def _asked_by(row: Mapping[str, Any]) -> str:
    by, known = row.get("asked_by"), row.get("asked_by_trusted_as")
    if not by:
        return NONE
    return str(by) if not known or known == by else f"{by} (key trusted as {known})"


class _Row(NamedTuple):
    """One question, as the strings both twins show."""

    age: str
    run: str
    machine: str
    asks: str
    about: str
    asked_by: str
    where: str
    may_answer: str
    deadline: str

    def html(self) -> tuple[str, ...]:
        """The cells as the HTML twin shows them."""
        return (
            _e(self.age),
            _code(self.run),
            _code(self.machine) if self.machine else "",
            _e(self.asks),
            _e(self.about),
            _e(self.asked_by),
            _code(self.where),
            _e(self.may_answer),
            _e(self.deadline),
        )


def _rows(rows: Sequence[Mapping[str, Any]], full: bool) -> list[_Row]:
    shown = []
    for row in rows:
        about = str(row.get("about") or "")
        deadline = row.get("deadline")
        shown.append(
            _Row(
                age_text(row.get("age_seconds")),
                str(row["run"]),
                str(row.get("machine") or ""),
                asked_as_listed(row),
                about if full else shorten(about, SUBJECT_SHOWN),
                _asked_by(row),
                _where(row),
                _who_may(row),
                answer_time(deadline) if deadline is not None else NONE,
            )
        )
    return shown


def _caption(rows: Sequence[Any]) -> str:
    return f"Inbox — {_plural(len(rows), 'question')} waiting, oldest first"


def _not_read(problems: Sequence[str]) -> list[str]:
    return [f"Not read: {problem}" for problem in problems]


def inbox_html(rows: Sequence[Mapping[str, Any]], problems: Sequence[str] = (), *, full: bool = False) -> str:
    """The inbox as an HTML table (``%mkl inbox``), each row's commands in its last column."""
    notes = "".join(f"<p><small>{_e(note)}</small></p>" for note in _not_read(problems))
    if not rows:
        return f"<p><em>{_e(_NO_QUESTIONS)}</em></p>{notes}"
    head = table_row([_e(name) for name in (*_HEAD, "answer with")], tag="th")
    body = "".join(
        table_row([*cells.html(), "<br>".join(_code(command) for command in _commands(row))])
        for cells, row in zip(_rows(rows, full), rows, strict=True)
    )
    table = f"<table><caption>{_e(_caption(rows))}</caption><thead>{head}</thead><tbody>{body}</tbody></table>"
    return table + notes


def _commands(row: Mapping[str, Any]) -> list[str]:
    return [str(command) for command in row.get("commands") or [row.get("command")] if command]


def inbox_text(rows: Sequence[Mapping[str, Any]], problems: Sequence[str] = (), *, full: bool = False) -> str:
    """The text twin of :func:`inbox_html`: the table, then the commands that answer each row (by its run)."""
    notes = _not_read(problems)
    if not rows:
        return "\n".join([_NO_QUESTIONS, *notes])
    lines = [_caption(rows), *columns([_HEAD, *_rows(rows, full)]), "", "Answer with:"]
    for row in rows:
        first, *others = _commands(row) or [NONE]
        lines += columns([[f"  {row['run']}:", first], *(["", other] for other in others)])
    return "\n".join([*lines, *notes])


def inbox_bundle(
    rows: Sequence[Mapping[str, Any]], problems: Sequence[str] = (), *, full: bool = False
) -> dict[str, str]:
    """The inbox as HTML and text."""
    return {"text/html": inbox_html(rows, problems, full=full), "text/plain": inbox_text(rows, problems, full=full)}
