"""A run's plan as a person reads it: what replays, where new calls begin, what may be asked again."""

from __future__ import annotations

from collections.abc import Mapping
from html import escape
from typing import Any

from ..lang.interpolate import fmt
from .common import cut


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
