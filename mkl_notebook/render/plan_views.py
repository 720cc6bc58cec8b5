"""A run's plan as a person reads it: what replays, where new calls begin, what may be asked again."""

from __future__ import annotations

from collections.abc import Mapping
from html import escape
from typing import Any

from ..lang.interpolate import fmt
from .common import answered_by, cut


def _count(items: list[Any], word: str) -> str:
    return f"{len(items)} {word}{'s' if len(items) != 1 else ''}"


def _listed(items: list[Any]) -> str:
    """Positions, comma-separated; of a long list the first and last (see :func:`.common.cut`)."""
    first, last = cut(len(items))
    if not last:
        return ", ".join(map(str, items))
    head, tail = (", ".join(str(items[index]) for index in part) for part in (first, last))
    return f"{head}, … {last.start - first.stop:,} more …, {tail}"


def plan_lines(plan: Mapping[str, Any]) -> list[str]:
    """The plan (``Plan.as_dict()``), a line per fact."""
    replays, first = plan.get("replays") or [], plan.get("first_call")
    lines = [f"Plan for run {plan.get('run')}:"]
    lines.append(f"  replays {_count(replays, 'call')} from the journal" + (f": {_listed(replays)}" if replays else ""))
    if first is None:
        lines.append("  calls nothing anew: the journal answers every call")
    else:
        lines.append(
            f"  then calls anew: {first['position']} ({first['kind']} at state {first['state']}), whose request "
            "changed or was never made"
        )
        rerun = plan.get("may_rerun") or []
        if rerun:
            lines.append(f"  may call again, as they depend on that answer: {_listed(rerun)}")
    kept = plan.get("answers_kept") or []
    if kept:
        lines.append(f"  keeps {_count(kept, 'answer')} a person gave: {_listed(kept)}")
    lines += _capped(
        [
            f"  asks again at {again['position']}: {fmt(again.get('value'))!r} (by {again.get('by') or 'someone'}) "
            "answered an earlier version of what it asks about"
            for again in plan.get("asked_again") or []
        ],
        "questions asked again",
    )
    lines += _capped(
        [
            f"  asks again at {maybe['position']} if what it asks about changes (it was answered "
            f"{fmt(maybe.get('value'))!r} by {maybe.get('by') or 'someone'})"
            for maybe in plan.get("may_ask_again") or []
        ],
        "questions that may be asked again",
    )
    return lines


def _capped(lines: list[str], what: str) -> list[str]:
    """``lines``, or of many the first and last with a line counting the others."""
    first, last = cut(len(lines))
    if not last:
        return lines
    return [*lines[: first.stop], f"  … {last.start - first.stop:,} more {what}", *lines[last.start :]]


def plan_bundle(plan: Mapping[str, Any]) -> dict[str, str]:
    lines = plan_lines(plan)
    return {
        "text/plain": "\n".join(lines),
        "text/html": f"<p>{escape(lines[0])}</p><ul>"
        + "".join(f"<li>{escape(line.strip())}</li>" for line in lines[1:])
        + "</ul>",
    }


def _planned_row(row: Mapping[str, Any]) -> list[str]:
    """One run of a plan over a folder or store (``app.plan_over``'s row), a line and its details."""
    anew = row.get("calls_anew") or []
    said = f"replays {_count([None] * int(row.get('replays') or 0), 'call')}"
    if row.get("error"):
        said = f"cannot be planned: {row['error']}"
    elif anew:
        first = anew[0]
        said += f", then calls anew at {first.get('state')} ({first.get('kind')}: {first.get('why')})"
        if len(anew) > 1:
            said += f" and may call again {_count(anew[1:], 'call')} after it, at " + ", ".join(
                dict.fromkeys(str(call.get("state")) for call in anew[1:])
            )
    else:
        said += ", calls nothing anew"
    lines = [f"  {row.get('run')}  {row.get('where')}  {row.get('status')}: {said}"]
    if row.get("also_in"):
        lines.append(f"      also in {', '.join(map(str, row['also_in']))} (the same history, or an older one)")
    if not row.get("trusted", True):
        lines.append(f"      NOT TRUSTED ({row.get('made_by')}): its answers are not counted")
    for again in row.get("asked_again") or []:
        how = "asks again" if again.get("certain") else "may ask again"
        if again.get("person") is False:
            how = "decides again by its rule" if again.get("certain") else "may decide again by its rule"
        lines.append(
            f"      {how} at {again.get('position')}: {fmt(again.get('value'))!r} {answered_by(again)} "
            f"({again.get('why')})"
        )
    return lines


def plan_over_lines(found: Mapping[str, Any]) -> list[str]:
    """A plan over every run of a machine (``PlanOver.as_dict()``): a line per run, then whether the edit puts
    answers a person gave at stake."""
    rows = found.get("rows") or []
    lines = [f"Plan for the runs of {found.get('machine')} with the machine as it is now ({_count(rows, 'run')}):"]
    lines += [line for row in rows for line in _planned_row(row)]
    if found.get("skipped"):
        lines.append(f"  ({_count([None] * int(found['skipped']), 'run')} of other machines skipped)")
    lines += [f"  not read: {problem}" for problem in found.get("problems") or []]
    at_stake = [row for row in rows if row.get("invalidates")]
    if at_stake:
        names = _listed([row.get("run") for row in at_stake])
        lines.append(f"Answers people gave are at stake in {_count(at_stake, 'run')}: {names}")
    else:
        lines.append("No answer a person gave (in a copy trusted here) would be asked again.")
    return lines


def plan_over_bundle(found: Mapping[str, Any]) -> dict[str, str]:
    """:func:`plan_over_lines` for a notebook: the text, and the same as HTML (a paragraph, a list of runs)."""
    lines = plan_over_lines(found)
    items = "".join(f"<li>{escape(line.strip())}</li>" for line in lines[1:-1])
    return {
        "text/plain": "\n".join(lines),
        "text/html": f"<p>{escape(lines[0])}</p><ul>{items}</ul><p><b>{escape(lines[-1])}</b></p>",
    }
