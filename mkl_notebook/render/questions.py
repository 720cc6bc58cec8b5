"""What a run that stopped for a person says: where it waits and for what, the questions it asks (the
machine author's and the model's), and the earlier answers it asks again because what they were about
changed. The result summary, the pending card, a question's place in a cell and the run's view say these
alike; each phrase has an HTML and a text form.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..engine.result import RunResult
from ..lang.interpolate import fmt
from .commands import shell_word
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


def needs_model_text(result: RunResult, run_id: str | None = None) -> str:
    """The one sentence a run stopped for want of a model says, with the fix: on the command line (no
    ``run_id``) the flags to give, in a notebook (``run_id``) the magics, naming the script the run was
    started with when it was."""
    at = f" at {result.at}" if result.at else ""
    script = shell_word(result.started_with.get("script") or "FILE")
    if run_id is None:
        return (
            f"The run needs a model to go on{at}, and none is configured here: give the command below --model MODEL "
            f"(or set MKL_MODEL, e.g. openai/gpt-4o-mini), or --script {script} to go on with scripted answers."
        )
    return (
        f"Run {run_id} needs a model to go on{at}, and none is configured in this kernel: run "
        f"%mkl resume {run_id} --model MODEL (e.g. openai/gpt-4o-mini; %mkl config model=MODEL sets it for "
        f"every run), or %mkl resume {run_id} --script {script} to go on with scripted answers."
    )


def _waiting_for(result: RunResult) -> str:
    return _WAITING_FOR.get(result.error or "", result.error or "a reply")


_IN_DOUBT = (
    "a tool with side effects was started but its outcome was never recorded, so it may or may not "
    "have happened; resolve it (completed with a value, retry, or abort) before the run goes on"
)


ABOUT_LABEL = "About this (the output the question is about):"


def _questions(result: RunResult) -> list[tuple[str, str]]:
    """(label, literal text) of what the run asks: the author's ``ask`` and a model's question, and what they are
    about (a person answering from a terminal reads it here, whole, as the form shows it)."""
    asked = [
        ("The machine's author asks:", result.ask),
        ("The model asks (model output):", result.question),
        (ABOUT_LABEL, result.about if result.waits_for_person else None),
    ]
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
        facts = answered_by(again)
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


# -- one question a person is asked: the form's header, and its place where no widget draws ----------------------


@dataclass(frozen=True)
class Asked:
    """One question as a person is shown it (a run's ``pending``): what is asked and by whom, what it is about,
    where the run continues and where the reply lands."""

    run_id: str
    text: str  # the author's ``ask``, or the model's question
    model_asks: bool = False
    about: str | None = None  # the output the question is about
    asked_by: str | None = None  # of a question someone else's copy brought: who signed it, when
    taken_up: str | None = None  # of someone else's run, taken up by choice: why it is not trusted
    at: str | None = None
    reply_to: str = "human.reply"
    again: tuple[tuple[str, list[str]], ...] = ()  # earlier answers asked again (:func:`asked_again`)
    approvers: tuple[str, ...] = ()  # who may answer it (empty: anyone)

    @classmethod
    def of(cls, run_id: str, pending: Mapping[str, Any]) -> Asked:
        """The question a run's ``pending`` (``Run.pending``, with ``taken_up`` when it was) describes."""
        model_asks = pending.get("question")
        text = model_asks if model_asks is not None else pending.get("ask")
        return cls(
            run_id=run_id,
            text=str(text or f"The run is waiting at '{pending.get('at')}'."),
            model_asks=model_asks is not None,
            about=str(pending["about"]) if pending.get("about") else None,
            asked_by=str(pending["asked_by"]) if pending.get("asked_by") else None,
            taken_up=str(pending["taken_up"]) if pending.get("taken_up") else None,
            at=str(pending.get("at")),
            reply_to=str(pending.get("reply_to") or "human.reply"),
            again=tuple(pending.get("asked_again") or ()),
            approvers=tuple(str(name) for name in pending.get("approvers") or ()),
        )

    def _who_may(self) -> str:
        return f"Only {', '.join(self.approvers)} may answer it." if self.approvers else ""

    def _label(self) -> str:
        if self.model_asks:
            return "The model asks (model output, not the machine's author):"
        if self.taken_up:  # someone else's run, taken up by choice: the text is the file's word
            return "The file says its machine's author asks:"
        return "The machine's author asks:"


def question_html(asked: Asked) -> str:
    """The question as HTML: earlier answers asked again, who asks, the literal text, what it is about, and
    where the run continues and the reply lands. The form's header and its place without a kernel say it alike."""
    label = f"<strong>{asked._label()}</strong>"  # one of the fixed labels: nothing to escape
    if asked.taken_up:
        label = f"<strong>Not trusted:</strong> {_e(asked.taken_up)}.</p><p>{label}"
    if asked.asked_by:
        label += f" <small>({_e(asked.asked_by)})</small>"
    about = f"<p>{_e(ABOUT_LABEL)}</p><blockquote>{_e(asked.about)}</blockquote>" if asked.about else ""
    return (
        f"{asked_again_html(asked.again)}<p>{label}</p><blockquote>{_e(asked.text)}</blockquote>{about}"
        f"<p><small>Run {_code(asked.run_id)} continues at {_code(asked.at)}; your reply lands at "
        f"{_code(asked.reply_to)}.{' ' + _e(asked._who_may()) if asked.approvers else ''}</small></p>"
    )


def question_text(asked: Asked) -> str:
    """The text twin of :func:`question_html`."""
    lines = [*_asked_again_lines(asked.again)]
    if asked.taken_up:
        lines.append(f"Not trusted: {asked.taken_up}.")
    lines.append(asked._label() + (f" ({asked.asked_by})" if asked.asked_by else ""))
    lines.append(_indent(asked.text, "    "))
    if asked.about:
        lines += [ABOUT_LABEL, _indent(asked.about, "    ")]
    lines.append(f"Run {asked.run_id} continues at {asked.at}; your reply lands at {asked.reply_to}.")
    if asked.approvers:
        lines.append(asked._who_may())
    return "\n".join(lines)


_ANSWER_IT = "Answer it with the form here while the notebook's kernel runs, or from a terminal:"


def question_place(asked: Asked, commands: Sequence[str]) -> dict[str, str]:
    """Where a question stands in a cell, readable wherever no widget draws (an HTML or PDF export, a Git host,
    a notebook opened without its kernel): the question, and the ``commands`` that answer it from a terminal."""
    listed = "".join(f"<li>{_code(command)}</li>" for command in commands)
    return {
        "text/html": f"<section>{question_html(asked)}<p>{_e(_ANSWER_IT)}</p><ul>{listed}</ul></section>",
        "text/plain": "\n".join([question_text(asked), _ANSWER_IT, *(f"  {command}" for command in commands)]),
    }
