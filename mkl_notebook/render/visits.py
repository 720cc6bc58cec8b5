"""How often a run entered each state of its machine, against each state's ``max_visits``, HTML and text.

Both twins are drawn from one row model (:class:`_VisitRow`). The state to look at (the diagnosis's, or
the one entered most when a budget ran out) is marked; a big machine's table lists the states entered most.
A state never entered and without a ceiling gets no row of its own: one line names them all.
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..engine.result import most_visited
from ..lang.model import Machine
from .common import (
    DEFAULT_CAP,
    WHOLE_ROWS,
    Cap,
    _code,
    _e,
    _how,
    _how_html,
    _plural,
    columns,
    printable,
    table_cell,
    table_row,
)

UNBOUNDED = "–"
VISITS_ROWS = 40  # a visits table of more than WHOLE_ROWS states shows the states entered most


@dataclass(frozen=True)
class _VisitRow:
    """One state of a visits table, as the strings both twins show; ``hot``: the state highlighted."""

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


def visits_say_more(
    machine: Machine, visits: Mapping[str, int], diagnosis: Mapping[str, Any] | None = None, highlight_max: bool = False
) -> bool:
    """Whether a run's visits table says what its trace does not: a state entered more than once, a ceiling
    (``max_visits``) anywhere in the machine, a state to look at, or more states than a table lists whole.
    Otherwise each row reads "1 / –" for a state the trace names once, and the run's view leaves it out."""
    return (
        any(count > 1 for count in visits.values())
        or any(state.max_visits is not None for state in machine.states.values())
        or highlighted_state(visits, diagnosis, highlight_max) is not None
        or len(machine.states) > WHOLE_ROWS
    )


def _listed_states(
    machine: Machine, visits: Mapping[str, int], hot: str | None, full: bool
) -> tuple[list[str], list[str], list[str]]:
    """The states a visits table lists (in document order, then states the machine lacks), those it counts
    in one row, and those it names in one line. Of at most ``WHOLE_ROWS`` states, a row each for those
    entered, with a ceiling or highlighted, the others named; of more, the ``VISITS_ROWS`` entered most
    (the highlighted one always, then the first in document order among equals), the others counted."""
    states = [*machine.states, *(sid for sid in visits if sid not in machine.states)]
    if full:
        return states, [], []
    if len(states) <= WHOLE_ROWS:
        shown = [sid for sid in states if visits.get(sid, 0) or sid == hot or _ceiling(machine, sid) is not None]
        return shown, [], [sid for sid in states if sid not in set(shown)]
    order = {sid: index for index, sid in enumerate(states)}
    most = heapq.nsmallest(VISITS_ROWS, states, key=lambda sid: (sid != hot, -visits.get(sid, 0), order[sid]))
    chosen = set(most)
    return [sid for sid in states if sid in chosen], [sid for sid in states if sid not in chosen], []


def _ceiling(machine: Machine, sid: str) -> int | None:
    state = machine.states.get(sid)
    return state.max_visits if state is not None else None


def _visit_rows(machine: Machine, visits: Mapping[str, int], hot: str | None, states: Sequence[str]) -> list[_VisitRow]:
    rows = []
    for sid in states:
        ceiling = _ceiling(machine, sid)
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


NOT_ENTERED = "not entered:"


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
    cap: Cap = DEFAULT_CAP,
) -> str:
    """Entries per state against ``max_visits``; the most visited state is marked. Of a big machine it
    lists the states entered most unless ``cap.full``."""
    hot = highlighted_state(visits, diagnosis, highlight_max)
    listed, left, unentered = _listed_states(machine, visits, hot, cap.full)
    body = []
    for row in _visit_rows(machine, visits, hot, listed):
        state, entries, note = _code(row.state), _e(row.entries), _e(row.note)
        if row.hot:
            state, entries, note = (
                f"<mark><strong>{state}</strong></mark>",
                f"<strong>{entries}</strong>",
                f"<em>{note}</em>",
            )
        body.append(table_row((state, entries, note), numbers=(1,)))
    if left:
        more = f"<em>{_e(_states_left_out(left, visits))}</em>{_how_html(cap.visits, 'lists every state')}"
        body.append(f"<tr>{table_cell(more, span=3)}</tr>")
    if unentered:
        names = ", ".join(_code(sid) for sid in unentered)
        body.append(f"<tr>{table_cell(f'<em>{_e(NOT_ENTERED)}</em> {names}', span=3)}</tr>")
    head = table_row(("state", "entries / max_visits", "note"), numbers=(1,), tag="th")
    caption = _e(_visits_caption(machine, listed, left))
    return f"<table><caption>{caption}</caption><thead>{head}</thead><tbody>{''.join(body)}</tbody></table>"


def visits_table_text(
    machine: Machine,
    visits: Mapping[str, int],
    diagnosis: Mapping[str, Any] | None = None,
    *,
    highlight_max: bool = False,
    cap: Cap = DEFAULT_CAP,
) -> str:
    """The text twin of :func:`visits_table_html` (the most visited state starred)."""
    hot = highlighted_state(visits, diagnosis, highlight_max)
    listed, left, unentered = _listed_states(machine, visits, hot, cap.full)
    rows = _visit_rows(machine, visits, hot, listed)
    table = columns(
        [
            ("  state", "entries / max_visits", "note"),
            *((("* " if r.hot else "  ") + r.state, r.entries, r.note) for r in rows),
        ]
    )
    more = [f"  {_states_left_out(left, visits)}{_how(cap.visits, 'lists every state')}"] if left else []
    if unentered:
        more.append(f"  {NOT_ENTERED} " + ", ".join(printable(sid) for sid in unentered))
    return "\n".join([_visits_caption(machine, listed, left), *table, *more])
