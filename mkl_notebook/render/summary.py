"""The outcome of a run, HTML and text: its result (the beginning of a long one), why it halted and which
state it kept entering, the question it waits on or the doubt it is in; always its steps, tokens, cost and
model time, and what showing it cost (new calls, answers from the journal).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from ..engine.result import RunResult, seconds_of
from .common import DEFAULT_CAP, PREVIEW, Cap, Step, _code, _e, _how, _how_html, _plural, money, shorten
from .questions import (
    _IN_DOUBT,
    _asked_again_lines,
    _at_html,
    _at_text,
    _questions_html,
    _questions_text,
    _resumes_html,
    _resumes_text,
    _waiting_for,
    asked_again,
    asked_again_html,
    needs_model_text,
)

RESULT_INLINE = 120
RESULT_MAX = 10_000  # characters of a result a view shows


def _steps(trace: Sequence[Step]) -> int:
    counted = [step["step"] for step in trace if isinstance(step.get("step"), int)]
    return max(counted, default=0)


def _calls_text(calls: Mapping[str, int] | None) -> str:
    """What this showing of the run cost: its new calls, and the answers the journal gave for free; or,
    given ``{"journaled": N}``, the answers the run's part shown took, which the same cell shows alike
    every time it runs (a saved notebook must not change when an unchanged cell runs again)."""
    if not calls:
        return ""
    if "journaled" in calls:
        journaled = int(calls["journaled"] or 0)
        return f" · {_plural(journaled, 'answer')} journaled" if journaled else ""
    made, replayed = int(calls.get("made") or 0), int(calls.get("replayed") or 0)
    if made == 0 and replayed:
        return f" · replayed {_plural(replayed, 'answer')} from the journal, no new calls"
    return f" · {_plural(made, 'new call')}" + (f", {_plural(replayed, 'answer')} replayed" if replayed else "")


def _usage_text(result: RunResult, calls: Mapping[str, int] | None = None) -> str:
    usage = result.usage or {}
    spent_in, spent_out = int(usage.get("input_tokens") or 0), int(usage.get("output_tokens") or 0)
    cost = result.cost_usd
    seconds = seconds_of(result.model_calls)
    return (
        f"{_plural(_steps(result.trace), 'step')} · {_plural(spent_in + spent_out, 'token')} "
        f"(in {spent_in:,}, out {spent_out:,})"
        + (f" · {money(cost)}" if cost is not None else "")
        + (f" · {seconds:.1f} s of model time" if seconds is not None else "")
        + _calls_text(calls)
    )


def _value_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, indent=2, default=str)


def _result_cut(value: Any, cap: Cap) -> tuple[str, str]:
    """A result's text as a view shows it (its first ``RESULT_MAX`` characters unless ``cap.full``), and
    what it leaves out ("" when nothing)."""
    text = _value_text(value)
    if cap.full or len(text) <= RESULT_MAX:
        return text, ""
    return text[:RESULT_MAX], f"… {len(text) - RESULT_MAX:,} more characters not shown"


def _result_html(value: Any, cap: Cap) -> str:
    text, left = _result_cut(value, cap)
    if len(text) <= RESULT_INLINE and "\n" not in text:
        return f"<p>Result: {_code(text)}</p>"
    more = f"<p><em>{_e(left)}</em>{_how_html(cap.result, 'holds all of it')}</p>" if left else ""
    return f"<details><summary>Result: {_e(shorten(text, PREVIEW))}</summary><pre>{_e(text)}</pre>{more}</details>"


def _result_text(value: Any, cap: Cap) -> list[str]:
    text, left = _result_cut(value, cap)
    return ["Result: " + text, *([left + _how(cap.result, "holds all of it")] if left else [])]


def _diagnosis_text(result: RunResult) -> str | None:
    diagnosis = result.diagnosis or {}
    if not diagnosis.get("most_visited_state"):
        return None
    entries = _plural(int(diagnosis.get("visits") or 0), "entry", "entries")
    return f"Most visited state: {diagnosis['most_visited_state']} ({entries})"


def result_summary_html(result: RunResult, calls: Mapping[str, int] | None = None, cap: Cap = DEFAULT_CAP) -> str:
    """The outcome of a run: its result, halt reason, pending question or doubt; always steps and tokens.
    A long result shows its beginning unless ``cap.full``."""
    status = result.status
    parts: list[str] = []
    if status == "done":
        parts += ["<p><strong>Done.</strong></p>", _result_html(result.result, cap)]
    elif status == "halt":
        parts.append(f"<p><strong>Halted:</strong> {_code(result.error or 'halt')}{_at_html(result)}</p>")
        diagnosis = _diagnosis_text(result)
        parts += [f"<p><mark>{_e(diagnosis)}</mark></p>"] if diagnosis else []
    elif result.waits_for_model:
        parts.append(f"<p><strong>{_e(needs_model_text(result))}</strong></p>")
    elif status == "suspended":
        waiting = f"waiting for {_e(_waiting_for(result))}{_resumes_html(result)}"
        parts.append(f"<p><strong>Suspended ({_e(result.error)}):</strong> {waiting}.</p>")
        parts.append(asked_again_html(asked_again(result)))
        parts.append(_questions_html(result))
        parts += [f"<p>The reply goes to {_code(result.reply_to)}.</p>"] if result.reply_to else []
    else:
        parts.append(f"<p><strong>In doubt</strong>{_at_html(result)}: {_e(_IN_DOUBT)}.</p>")
        parts += [f"<p>{_code(result.error)}</p>"] if result.error else []
    parts.append(f"<p><small>{_e(_usage_text(result, calls))}</small></p>")
    return "".join(parts)


def result_summary_text(result: RunResult, calls: Mapping[str, int] | None = None, cap: Cap = DEFAULT_CAP) -> str:
    """The text twin of :func:`result_summary_html`."""
    status = result.status
    lines: list[str] = []
    if status == "done":
        lines += ["Done.", *_result_text(result.result, cap)]
    elif status == "halt":
        lines.append(f"Halted: {result.error or 'halt'}{_at_text(result)}")
        diagnosis = _diagnosis_text(result)
        lines += [diagnosis] if diagnosis else []
    elif result.waits_for_model:
        lines.append(needs_model_text(result))
    elif status == "suspended":
        lines.append(f"Suspended ({result.error}): waiting for {_waiting_for(result)}{_resumes_text(result)}.")
        lines += _asked_again_lines(asked_again(result))
        lines += _questions_text(result)
        lines += [f"The reply goes to {result.reply_to}."] if result.reply_to else []
    else:
        lines.append(f"In doubt{_at_text(result)}: {_IN_DOUBT}.")
        lines += [result.error] if result.error else []
    lines.append(_usage_text(result, calls))
    return "\n".join(lines)
