"""The audit trail as a table, HTML and text: one row per answer a person gave, marked where it does not stand.

The rows are :mod:`app.audit`'s (plain dicts); the text twin bounds every cell's width and shows it through
:func:`printable`, so nothing a file says can pass for another row or move the cursor. A marked answer (its
signature fails, none covers it, or its subject changed) says MARKED and why in both twins. The text twin is
also given line by line as the rows arrive (:class:`TextTable`: ``mkl audit`` prints as it reads).
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

from ..lang.interpolate import fmt
from .common import NONE, _code, _e, _plural, printable, table_row, who_answered

CELL = 28  # characters of a text table's cell, at most (the key's: KEY_CELL; the mark is shown whole)
KEY_CELL = 44
MARK = "MARKED"
_HEAD = (
    "run",
    "question",
    "about",
    "value",
    "note",
    "by",
    "key",
    "asked",
    "answered",
    "decided in",
    "via",
    "accepted under",
    "mark",
)
_AUDIT_NUMBERS = (7, 8, 9)  # the columns of times and durations: asked, answered, decided in
_NO_ANSWERS = "No answers."
ALIGNED = 1000  # rows of a text table its columns are laid out by (a longer one's later cells may widen them)

Row = Mapping[str, Any]


def _clip(text: Any, limit: int = CELL) -> str:
    shown = printable("" if text is None else text)
    return shown if len(shown) <= limit else shown[: limit - 1] + "…"


def _when(at: Any) -> str:
    """A time as the table shows it: UTC to the second."""
    if not isinstance(at, (int, float)) or isinstance(at, bool):
        return NONE
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(at))


def duration(seconds: Any) -> str:
    """How long, as a person reads it: "0.4s", "42s", "3m 05s", "2h 07m", "3d 4h"."""
    if not isinstance(seconds, (int, float)) or isinstance(seconds, bool):
        return NONE
    if seconds < 10:
        return f"{seconds:.1f}s"
    whole = round(seconds)
    if whole < 60:
        return f"{whole}s"
    if whole < 3600:
        return f"{whole // 60}m {whole % 60:02d}s"
    if whole < 86400:
        return f"{whole // 3600}h {whole % 3600 // 60:02d}m"
    return f"{whole // 86400}d {whole % 86400 // 3600}h"


def _value(value: Any) -> str:
    return value if isinstance(value, str) else fmt(value)


def _about(row: Row) -> str:
    digest = row.get("about_sha256")
    return f"sha256:{digest[:8]} {row.get('about')}" if digest else NONE


def _by(row: Row) -> str:
    if row.get("decided_by") == "policy":
        return "policy"  # (the rule that decided is under accepted_under: no one's name)
    return who_answered(row.get("by"), row.get("established"), row.get("claimed")) or NONE


def _key(row: Row) -> str:
    if not row.get("key"):
        return "unsigned"
    named = row.get("trusted_as")
    trust = f"trusted as {named}" if named else "trusted" if row.get("key_trusted") else "not trusted"
    return f"{row['key'][:9]}… {row.get('signature')}, {trust}"


def _mark(row: Row) -> str:
    return f"{MARK}: {row['problem']}" if row.get("problem") else ""


def _cells(row: Row) -> list[str]:
    """An answer's row as the words both twins show (the text twin clips them)."""
    return [
        str(row.get("run")),
        str(row.get("question") or NONE),
        _about(row),
        _value(row.get("value")),
        str(row.get("note") or ""),
        _by(row),
        _key(row),
        _when(row.get("asked_at")),
        _when(row.get("answered_at")),
        duration(row.get("seconds_to_decide")),
        str(row.get("via") or NONE),
        str(row.get("accepted_under") or "anyone"),
        _mark(row),
    ]


def summary_line(answers: int, marked: int, pending: int, median: float | None) -> str:
    """ "3 answers (1 marked), 1 pending, median time to decide 42s"."""
    said = _plural(answers, "answer") + (f" ({marked} {MARK.lower()})" if marked else "")
    return f"{said}, {pending} pending, median time to decide {duration(median)}"


def _summary(answers: Sequence[Row], pending: Sequence[Row], median: float | None) -> str:
    return summary_line(len(answers), sum(1 for row in answers if row.get("problem")), len(pending), median)


def _pending_lines(pending: Sequence[Row]) -> list[str]:
    return [
        f"pending: {item.get('where')}: run {item.get('run')} asks {item.get('question')!r}, "
        f"waiting {duration(item.get('age_seconds'))} (since {_when(item.get('asked_at'))} UTC)"
        for item in pending
    ]


class TextTable:
    """The text twin's lines as the answers arrive (an audit read as it goes prints each row as it comes).

    The first ``aligned`` rows are held and the columns laid out by them (and the header), so that a table of no
    more rows is laid out as a whole; each row after them is given at once, a cell wider than its column widening
    that column from there on. Cells are at most :data:`CELL` characters (the key's :data:`KEY_CELL`), the mark
    whole.
    """

    def __init__(self, aligned: int = ALIGNED) -> None:
        self.aligned = max(1, aligned)
        self._held: list[list[str]] | None = []  # None: laid out, the rows go out as they come
        self._widths: list[int] = []

    def add(self, row: Row) -> list[str]:
        """The lines that can be printed now that ``row`` came (none while rows are held)."""
        widths = [KEY_CELL if name == "key" else CELL for name in _HEAD]
        cells = [_clip(cell, width) for cell, width in zip(_cells(row)[:-1], widths, strict=False)]
        cells.append(printable(_mark(row)))
        if self._held is None:
            return [self._line(cells)]
        self._held.append(cells)
        return self._laid_out() if len(self._held) >= self.aligned else []

    def _laid_out(self) -> list[str]:
        held, self._held = self._held or [], None
        rows = [list(_HEAD), *held]
        self._widths = [max(len(cells[i]) for cells in rows) for i in range(len(_HEAD) - 1)]
        return ["Answers (times in UTC)", *(self._line(cells) for cells in rows)]

    def _line(self, cells: list[str]) -> str:
        self._widths = [max(width, len(cell)) for width, cell in zip(self._widths, cells, strict=False)]
        padded = [cell.ljust(width) for cell, width in zip(cells, self._widths, strict=False)]
        return "  ".join([*padded, cells[-1]]).rstrip()

    def end(self, pending: Sequence[Row], problems: Sequence[str], summary: str) -> list[str]:
        """The lines left once every answer came: the rows still held (or "No answers."), each waiting question
        with its age, each file (or run) not read, and the ``summary`` line."""
        lines = []
        if self._held is not None:
            lines = self._laid_out() if self._held else [_NO_ANSWERS]
        lines += [printable(line) for line in _pending_lines(pending)]
        lines += [f"not read: {printable(problem)}" for problem in problems]
        lines.append(summary)
        return lines


def audit_table_text(
    answers: Sequence[Row], pending: Sequence[Row], problems: Sequence[str], median: float | None
) -> str:
    """Every answer, one line each (cells at most :data:`CELL` characters; the mark whole), then each waiting
    question with its age, each file not read, and the summary line: the columns laid out by every row."""
    table = TextTable(aligned=len(answers))
    lines = [line for row in answers for line in table.add(row)]
    return "\n".join(lines + table.end(pending, problems, _summary(answers, pending, median)))


def audit_table_html(
    answers: Sequence[Row], pending: Sequence[Row], problems: Sequence[str], median: float | None
) -> str:
    """The HTML twin of :func:`audit_table_text`: the marked rows say so in a ``<mark>``."""
    summary = f"<p>{_e(_summary(answers, pending, median))}</p>"
    waiting = "".join(f"<p><small>{_e(line)}</small></p>" for line in _pending_lines(pending))
    unread = "".join(f"<p><small>Not read: {_e(problem)}</small></p>" for problem in problems)
    if not answers:
        return f"<p><em>{_e(_NO_ANSWERS)}</em></p>{waiting}{unread}{summary}"
    head = table_row([_e(name) for name in _HEAD], _AUDIT_NUMBERS, tag="th")
    body = []
    for row in answers:
        cells = [_e(cell) for cell in _cells(row)]
        cells[0] = _code(row.get("run"))
        if row.get("problem"):
            cells[-1] = f"<mark><strong>{_e(MARK)}</strong>: {_e(row['problem'])}</mark>"
        body.append(table_row(cells, _AUDIT_NUMBERS))
    table = (
        f"<table><caption>Answers (times in UTC)</caption><thead>{head}</thead><tbody>{''.join(body)}</tbody></table>"
    )
    return table + waiting + unread + summary


def audit_bundle(
    answers: Sequence[Row], pending: Sequence[Row], problems: Sequence[str], median: float | None
) -> dict[str, str]:
    """The audit trail as HTML and text (``%mkl audit``)."""
    return {
        "text/html": audit_table_html(answers, pending, problems, median),
        "text/plain": audit_table_text(answers, pending, problems, median),
    }
