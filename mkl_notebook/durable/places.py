"""Where a run's requests came from, so that a notebook replays cell by cell.

Each advance of a run ends with one suspend or finish record; the records up to and
including it are that advance's *segment*. An advance asked for from a notebook cell
tags its ending with the cell's id and a digest of the request (a form in that cell
tags it with the cell alone). When the cell executes the same request again, the
journal already holds its answer: the run is shown as that cell left it, and nothing
is asked or recorded. Answers given through the cell's forms, and advances no cell
asked for (a terminal, a script), belong to the cell whose segment they follow.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, NamedTuple

from . import records as rec
from .chain import canonical
from .reading import replies


class Place(NamedTuple):
    """A notebook cell a request comes from.

    ``after`` is the journal position this cell's execution has reached: an earlier
    request is never taken for a later one. ``form`` marks a reply given in the
    cell's form, which replays with the cell's own request rather than by itself.
    """

    cell: str
    after: int = 0
    form: bool = False


class Segment(NamedTuple):
    """One advance of a run: journal records ``start`` up to (not including) ``end``."""

    start: int
    end: int
    cell: str | None
    request: str | None  # the digest of a cell's request; None for a form's reply or an untagged advance


def request_digest(kind: str, request: Mapping[str, Any]) -> str:
    """A stable digest of what a cell asked for (a run's setup, a resume's reply and budgets)."""
    return hashlib.sha256(canonical({"kind": kind, **request}).encode("utf-8")).hexdigest()[:24]


def tag(place: Place | None, request: str | None) -> rec.PlaceTag | None:
    """The tag an advance's ending record carries for ``place`` (None when no cell asked for it)."""
    if place is None:
        return None
    if place.form:
        return {"cell": place.cell}
    return {"cell": place.cell, "request": request or ""}


def segments(records: Sequence[Mapping[str, Any]]) -> list[Segment]:
    """The journal cut into advances, each ending at a suspend or finish record."""
    found: list[Segment] = []
    start = 0
    for position, record in enumerate(records):
        if rec.is_sign(record) and found and start == position:
            found[-1] = found[-1]._replace(end=position + 1)  # the signature of the advance that just ended
            start = position + 1
        elif rec.is_ending(record):
            tagged = record.get("place")
            place: Mapping[str, Any] = tagged if isinstance(tagged, dict) else {}
            cell = place.get("cell") if isinstance(place.get("cell"), str) else None
            request = place.get("request") if isinstance(place.get("request"), str) else None
            found.append(Segment(start, position + 1, cell, request or None))
            start = position + 1
    return found


def _owned_end(found: Sequence[Segment], first: int) -> int:
    """Where the part of the journal that segment ``first`` begins ends: through the forms of its cell and
    the advances no cell asked for, up to the next request from any cell."""
    cell = found[first].cell
    end = found[first].end
    for segment in found[first + 1 :]:
        if segment.cell is not None and (segment.cell != cell or segment.request is not None):
            break
        end = segment.end
    return end


def replayed_cut(records: Sequence[Mapping[str, Any]], place: Place | None, request: str) -> int | None:
    """How many records show the run as ``place``'s cell left it, when that cell already made ``request``.

    None when it did not (a new request, or an edited one): then the request is carried out.
    """
    if place is None or place.form:
        return None
    found = segments(records)
    matches = [
        index
        for index, segment in enumerate(found)
        if segment.cell == place.cell and segment.request == request and segment.start >= place.after
    ]
    if not matches:
        return None
    return _owned_end(found, matches[-1])


def entry(records: Sequence[Mapping[str, Any]], cells: Iterable[str]) -> int | None:
    """How many records show the run as a cell finds it, given ``cells``: that cell and the ones below it.

    That is where the first advance any of them asked for began; None when none of them did.
    """
    wanted = set(cells)
    for segment in segments(records):
        if segment.cell in wanted and segment.request is not None:
            return segment.start
    return None


def form_answers(records: Sequence[Mapping[str, Any]], cell: str, upto: int) -> list[Mapping[str, Any]]:
    """The replies given through ``cell``'s forms in the first ``upto`` records."""
    answers: list[Mapping[str, Any]] = []
    for segment in segments(records[:upto]):
        if segment.cell == cell and segment.request is None:
            answers += replies(records[segment.start : segment.end])
    return answers


def form_cut(records: Sequence[Mapping[str, Any]], cell: str) -> int | None:
    """How many records show the run as ``cell``'s forms last left it; None when they never answered it."""
    found = segments(records)
    answered = [index for index, segment in enumerate(found) if segment.cell == cell and segment.request is None]
    return _owned_end(found, answered[-1]) if answered else None
