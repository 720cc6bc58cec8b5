"""The audit trail as a table, HTML and text: one row per answer a person gave, marked where it does not stand.

The rows are :mod:`app.audit`'s (plain dicts); the text twin bounds every cell's width and shows it through
:func:`printable`, so nothing a file says can pass for another row or move the cursor. A marked answer (its
signature fails, none covers it, or its subject changed) says MARKED and why in both twins.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

from ..lang.interpolate import fmt
from .common import NONE, _code, _e, _plural, columns, printable, table_row, who_answered

CELL = 28  # characters of a text table's cell, at most (the key's: KEY_CELL; the mark is shown whole)
KEY_CELL = 44
MARK = "MARKED"
_HEAD = ("run", "question", "about", "value", "note", "by", "key", "asked", "answered", "decided in", "via", "mark")
_AUDIT_NUMBERS = (7, 8, 9)  # the columns of times and durations: asked, answered, decided in
_NO_ANSWERS = "No answers."

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
        _mark(row),
    ]


def summary_line(answers: Sequence[Row], pending: Sequence[Row], median: float | None) -> str:
    """ "3 answers (1 marked), 1 pending, median time to decide 42s"."""
    marked = sum(1 for row in answers if row.get("problem"))
    said = _plural(len(answers), "answer") + (f" ({marked} {MARK.lower()})" if marked else "")
    return f"{said}, {len(pending)} pending, median time to decide {duration(median)}"


def _pending_lines(pending: Sequence[Row]) -> list[str]:
    return [
        f"pending: {item.get('where')}: run {item.get('run')} asks {item.get('question')!r}, "
        f"waiting {duration(item.get('age_seconds'))} (since {_when(item.get('asked_at'))} UTC)"
        for item in pending
    ]


def audit_table_text(
    answers: Sequence[Row], pending: Sequence[Row], problems: Sequence[str], median: float | None
) -> str:
    """Every answer, one line each (cells at most :data:`CELL` characters; the mark whole), then each waiting
    question with its age, each file not read, and the summary line."""
    lines = [_NO_ANSWERS] if not answers else ["Answers (times in UTC)"]
    if answers:
        widths = [KEY_CELL if name == "key" else CELL for name in _HEAD]
        clipped = [
            [_clip(cell, width) for cell, width in zip(_cells(row)[:-1], widths, strict=False)] + [_mark(row)]
            for row in answers
        ]
        lines += columns([list(_HEAD), *clipped])
    lines += [printable(line) for line in _pending_lines(pending)]
    lines += [f"not read: {printable(problem)}" for problem in problems]
    lines.append(summary_line(answers, pending, median))
    return "\n".join(lines)


def audit_table_html(
    answers: Sequence[Row], pending: Sequence[Row], problems: Sequence[str], median: float | None
) -> str:
    """The HTML twin of :func:`audit_table_text`: the marked rows say so in a ``<mark>``."""
    summary = f"<p>{_e(summary_line(answers, pending, median))}</p>"
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
