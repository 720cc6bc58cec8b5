"""The live line of a run that is still working, HTML and text: what it does now (in a state, writing its
answer, judging), its steps, tokens, cost and time so far, and below it the answer as it arrives or a line
per fan-out branch at work.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from .common import _code, _e, _indent, _plural, money

LIVE_TAIL = 1500  # characters of an answer being written that the live line shows (its end)


@dataclass(frozen=True)
class Live:
    """What a working run's live line shows besides where it is: the answer being written, a judge at
    work, one line per fan-out branch, and what the model calls cost so far (when that is known)."""

    writing: str | None = None  # the text of the answer arriving now, so far
    judging: bool = False
    branches: tuple[str, ...] = ()
    cost_usd: float | None = None


def _progress_facts(steps: int, usage: Mapping[str, int] | None, elapsed: float | None, live: Live) -> str:
    usage = usage or {}
    tokens = int(usage.get("input_tokens") or 0) + int(usage.get("output_tokens") or 0)
    time_taken = f" · {elapsed:.1f} s" if elapsed is not None else ""
    cost = f" · {money(live.cost_usd)}" if live.cost_usd is not None else ""
    return f"{_plural(steps, 'step')} · {_plural(tokens, 'token')}{cost}{time_taken}"


def _doing(state: str | None, live: Live, name: Callable[[str], str] = str) -> str:
    """What the run does now: starting, in a state, writing its answer, or judging; ``name`` shows the state."""
    if not state:
        return "starting"
    if live.judging:
        return f"judging {name(state)} …"
    if live.writing is not None:
        return f"writing {name(state)} …"
    return f"state {name(state)}"


def _tail(text: str) -> str:
    return text if len(text) <= LIVE_TAIL else "…" + text[-LIVE_TAIL:]


def progress_html(
    state: str | None,
    steps: int,
    usage: Mapping[str, int] | None,
    elapsed: float | None = None,
    live: Live | None = None,
) -> str:
    """The live line while a run works: what it does (in a state, writing its answer, judging), steps,
    tokens, cost and time so far; below it the answer as it arrives, or a line per fan-out branch."""
    live = live or Live()
    parts = [
        f"<p><em>running</em> — {_doing(state, live, _code)} · {_e(_progress_facts(steps, usage, elapsed, live))}</p>"
    ]
    if live.writing:
        parts.append(f"<blockquote><pre>{_e(_tail(live.writing))}</pre></blockquote>")
    if live.branches:
        parts.append("<ul>" + "".join(f"<li>{_e(line)}</li>" for line in live.branches) + "</ul>")
    return "".join(parts)


def progress_text(
    state: str | None,
    steps: int,
    usage: Mapping[str, int] | None,
    elapsed: float | None = None,
    live: Live | None = None,
) -> str:
    """The text twin of :func:`progress_html`."""
    live = live or Live()
    lines = [f"running — {_doing(state, live)} · {_progress_facts(steps, usage, elapsed, live)}"]
    if live.writing:
        lines.append(_indent(_tail(live.writing), "    "))
    lines += [f"  {line}" for line in live.branches]
    return "\n".join(lines)


def progress_bundle(
    state: str | None,
    steps: int,
    usage: Mapping[str, int] | None,
    elapsed: float | None = None,
    live: Live | None = None,
) -> dict[str, str]:
    """The live line of a run that is still working, as HTML and text."""
    return {
        "text/html": progress_html(state, steps, usage, elapsed, live),
        "text/plain": progress_text(state, steps, usage, elapsed, live),
    }
