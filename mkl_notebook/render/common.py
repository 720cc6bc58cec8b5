"""What every view of a run shares: escaping, the caps on long lists, and the small phrases many views say.

Shared notebooks are untrusted, so the views' HTML uses only semantic tags (tables, ``<details>``,
``<mark>``, ``<strong>``, ``<code>``): no ``<style>``, no ``<script>``, and every dynamic string is escaped
(:func:`_e`). The one style the views write is the constant :data:`PROSE_LEFT` on the table cells that hold
words (:func:`table_row`), which JupyterLab's table stylesheet would right-align like numbers. Each ``*_html``
view has a ``*_text`` twin that states the same facts; text is shown on terminals, so its table cells and
indented blocks pass through :func:`printable`, and nothing a file says can move the cursor or recolour a line.
The underscored helpers here are the render package's own, shared by its view modules.
Pure Python: nothing here imports IPython, ipywidgets or Jupyter.
"""

from __future__ import annotations

import math
import shlex
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from html import escape
from typing import Any

from .plain import printable
from .rows import FIRST_ROWS, LAST_ROWS, WHOLE_ROWS

LABEL_MAX = 40  # characters of a one-line label (a gate's condition in a diagram, a cell of a table)


def shorten(text: str, limit: int = LABEL_MAX) -> str:
    """One line of at most ``limit`` characters, cut with ``…``."""
    line = " ".join(str(text).split())
    if len(line) <= limit:
        return line
    return line[: max(1, limit - 1)].rstrip() + "…"


Step = Mapping[str, Any]
PREVIEW = 80
NONE = "—"


def _e(value: Any) -> str:
    return escape(str(value), quote=True)


# JupyterLab right-aligns every cell of a table in an output, as for numbers; a cell of words (a state, a
# question, a model's output) reads left-aligned. A constant, never built from data; JupyterLab's sanitizer
# keeps ``text-align`` in an untrusted notebook too, and a viewer that drops it loses only the alignment.
PROSE_LEFT = ' style="text-align:left"'


def table_row(cells: Sequence[str], numbers: Sequence[int] = (), *, tag: str = "td") -> str:
    """A table row of ``cells`` (HTML): those at the positions ``numbers`` hold numbers and keep the page's
    right alignment, the others hold words and are left-aligned (:data:`PROSE_LEFT`)."""
    return "<tr>" + "".join(table_cell(cell, number=i in numbers, tag=tag) for i, cell in enumerate(cells)) + "</tr>"


def table_cell(content: str, *, number: bool = False, tag: str = "td", span: int = 0) -> str:
    """One table cell of ``content`` (HTML), left-aligned unless it holds a ``number``; ``span`` columns wide."""
    spans = f' colspan="{span}"' if span else ""
    return f"<{tag}{spans}{'' if number else PROSE_LEFT}>{content}</{tag}>"


def _code(value: Any) -> str:
    return f"<code>{_e(value)}</code>"


def _plural(count: int, word: str, plural: str | None = None) -> str:
    return f"{count:,} {word if count == 1 else plural or word + 's'}"


def _lines_html(text: str) -> str:
    """Literal text with its line breaks kept."""
    return "<br>".join(_e(line) for line in str(text).splitlines() or [""])


def _indent(text: str, prefix: str) -> str:
    return "\n".join(prefix + line for line in printable(text, lines=True).splitlines() or [""])


def columns(rows: Sequence[Sequence[str]]) -> list[str]:
    """Fixed-width columns (the last one unpadded), each cell on its one line (:func:`printable`)."""
    rows = [[printable(cell) for cell in row] for row in rows]
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]) - 1)]
    return [
        "  ".join([*(cell.ljust(width) for cell, width in zip(row, widths, strict=False)), row[-1]]).rstrip()
        for row in rows
    ]


def money(usd: float) -> str:
    """US dollars as a person reads them: cents when they count, two significant digits below a cent."""
    if usd <= 0:
        return "$0"
    if usd >= 0.01:
        return f"${usd:,.2f}"
    return f"${usd:.{1 - math.floor(math.log10(usd))}f}"


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


DEFAULT_CAP = Cap()  # what a view caps unless told: long lists, naming no command that shows them whole


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


# -- who answered, and where a run stands -------------------------------------------------------


def answer_time(at: Any) -> str:
    """When an answer was given, in UTC to the second ("" when the journal does not say)."""
    if not isinstance(at, (int, float)):
        return ""
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(at))


def who_answered(by: Any, established: Any = None, claimed: Any = None) -> str:
    """Who answered and how that is known: "alice (JupyterHub)", "alice (OS account; claims bob)", "bob
    (claimed)"; "" when the journal names no one."""
    from ..engine.oracle import ESTABLISHED_BY  # (this module is light: the command line's parser reads it)

    how = ESTABLISHED_BY.get(established) if isinstance(established, str) else None
    if not by:
        return ""
    if how is None:
        return f"{by} (claimed)"
    besides = f"; claims {claimed}" if claimed and claimed != by else ""
    return f"{by} ({how}{besides})"


def signed_with(answer: Mapping[str, Any]) -> str:
    """The key whose signature covers an answer, as views say it: "key d2ec 2e63 9a1b 77c0", or that its
    signature fails; "" when the caller found none covering it (``key`` and ``signature`` are the app's)."""
    key = answer.get("key")
    if not isinstance(key, str) or not key:
        return ""
    if answer.get("signature") == "fails":
        return f"key {key}, whose signature FAILS"
    named = answer.get("trusted_as")  # (a listing's: the name its reader trusts the key under)
    return f"key {key}" + (f" (trusted as {named})" if isinstance(named, str) and named else "")


def answered_by(answer: Mapping[str, Any]) -> str:
    """Who answered (and how that is known), when, through what and under which key, as far as the journal
    says: "by alice (JupyterHub) · 2026-12-03 14:02:11 UTC · via form · key 3f2a 91c0 5d7e 02b4"."""
    who = who_answered(answer.get("by"), answer.get("established"), answer.get("claimed"))
    via = answer.get("via")
    if via == "policy":  # a deadline's decision by the run's rule: no one's name, and the rule said instead
        who, via = f"policy ({answer['rule']})" if answer.get("rule") else "policy", None
    parts = (
        f"by {who}" if who else "",
        answer_time(answer.get("at", answer.get("time"))),
        f"via {via}" if via else "",
        signed_with(answer),
    )
    return " · ".join(part for part in parts if part)


NOTE_PREVIEW = 200  # characters of a person's note a line of a trace or a listing shows


def note_said(note: Any, limit: int | None = NOTE_PREVIEW) -> str:
    """The note a person wrote beside an answer, to follow it in a line: ``with the note 'add an apology'``
    ("" when there is none). ``limit`` shortens it to one line of that many characters (None: whole). Plain
    text: a view escapes it as it escapes any text from people."""
    if not isinstance(note, str) or not note:
        return ""
    return f"with the note {(shorten(note, limit) if limit else note)!r}"


ANSWERS_SAID = 3  # the latest answers a sentence names; it counts those before (a run's trace lists every one)


def answers_sentence(answers: Sequence[Mapping[str, Any]]) -> str:
    """The answers a cell's form gave, one sentence: "Answered 'approve' with the note '…' (by alice, …,
    via form)."; of a long run's, the latest :data:`ANSWERS_SAID`, after a count of the others, so that the
    sentence above a form stays a line or two however many questions the cell answered."""
    from ..lang.interpolate import fmt

    said = []
    for answer in answers[-ANSWERS_SAID:]:
        facts = answered_by(answer)
        note = note_said(answer.get("note"))
        said.append(f"{fmt(answer.get('value'))!r}" + (f" {note}" if note else "") + (f" ({facts})" if facts else ""))
    earlier = len(answers) - len(said)
    if earlier:
        before = f"Answered {_plural(earlier, 'question')} before (the run's trace lists each answer)"
        return f"{before}, then {', then '.join(said)}."
    return f"Answered {', then '.join(said)}." if said else ""


def status_phrase(status: str, error: str | None, at: str | None) -> str:
    """Where a run stands, to end a sentence: "done", "waiting (escalated) at confirm", "halted (…) at s"."""
    now = {"done": "done", "halt": "halted", "suspended": "waiting", "in_doubt": "in doubt"}.get(status, status)
    detail = f" ({error})" if error and status != "done" else ""
    where = f" at {at}" if at and status != "done" else ""
    return f"{now}{detail}{where}"
