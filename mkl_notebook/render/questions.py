"""What a run that stopped for a person says: where it waits and for what, the questions it asks (the
machine author's and the model's), and the earlier answers it asks again because what they were about
changed. The result summary, the pending card, a question's place in a cell and the run's view say these
alike; each phrase has an HTML and a text form.
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence

from ..engine.result import RunResult
from ..lang.interpolate import fmt
from .common import _code, _e, _indent, _lines_html, answered_by

_WAITING_FOR = {
    "escalated": "a person's reply",
    "asked": "an answer to the model's question",
    "budget-exhausted": "more steps",
    "cost-exhausted": "more tokens",
    "spend-exhausted": "a higher cost limit",
}


def _at_text(result: RunResult) -> str:
    return f" at {result.at}" if result.at else ""


def _at_html(result: RunResult) -> str:
    return f" at {_code(result.at)}" if result.at else ""


def _resumes_text(result: RunResult) -> str:
    called = f" in called machine {result.machine}" if result.machine else ""
    return f" (resumes at {result.at}{called})" if result.at else ""


def _resumes_html(result: RunResult) -> str:
    called = f" in called machine {_code(result.machine)}" if result.machine else ""
    return f" (resumes at {_code(result.at)}{called})" if result.at else ""


def _waiting_for(result: RunResult) -> str:
    return _WAITING_FOR.get(result.error or "", result.error or "a reply")


_IN_DOUBT = (
    "a tool with side effects was started but its outcome was never recorded, so it may or may not "
    "have happened; resolve it (completed with a value, retry, or abort) before the run goes on"
)


def _questions(result: RunResult) -> list[tuple[str, str]]:
    """(label, literal text) of what the run asks: the author's ``ask`` and a model's question."""
    asked = [("The machine's author asks:", result.ask), ("The model asks (model output):", result.question)]
    return [(label, text) for label, text in asked if text]


DIFF_LINES = 12  # of a changed output, the lines an asked-again question shows


def changed(before: str, now: str) -> list[str]:
    """What changed between two texts, as a short diff: ``-`` lines went, ``+`` lines came."""
    lines = [
        line
        for line in difflib.unified_diff(before.splitlines(), now.splitlines(), lineterm="", n=1)
        if not line.startswith(("---", "+++", "@@"))
    ]
    return lines[:DIFF_LINES] + ([f"… {len(lines) - DIFF_LINES} more changed lines"] if len(lines) > DIFF_LINES else [])


def asked_again(result: RunResult) -> list[tuple[str, list[str]]]:
    """For each answer that no longer answers its question (what it was about changed): a sentence saying
    who gave which answer when, and the diff of what it was about."""
    said = []
    for again in result.asked_again:
        facts = answered_by(again.get("by"), again.get("time"), again.get("via"))
        sentence = (
            f"Asked again: {fmt(again.get('value'))!r}{f' ({facts})' if facts else ''} answered this question "
            "about an earlier version of what it asks about, which has changed since:"
        )
        said.append((sentence, changed(str(again.get("before") or ""), str(again.get("now") or ""))))
    return said


def asked_again_html(asked: Sequence[tuple[str, list[str]]]) -> str:
    """Earlier answers asked again (what :func:`asked_again` returns) as HTML: for each, its sentence
    marked, then the diff of what it was about. The run's views and the approval form show it alike."""
    return "".join(f"<p><mark>{_e(sentence)}</mark></p><pre>{_e(chr(10).join(diff))}</pre>" for sentence, diff in asked)


def _asked_again_lines(asked: Sequence[tuple[str, list[str]]]) -> list[str]:
    """The text twin of :func:`asked_again_html`, a line each: every sentence, then its diff indented."""
    return [line for sentence, diff in asked for line in (sentence, *(f"    {d}" for d in diff))]


def _questions_html(result: RunResult) -> str:
    return "".join(
        f"<p>{_e(label)}</p><blockquote>{_lines_html(text)}</blockquote>" for label, text in _questions(result)
    )


def _questions_text(result: RunResult) -> list[str]:
    return [f"{label}\n{_indent(text, '    ')}" for label, text in _questions(result)]
