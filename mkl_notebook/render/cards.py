"""What stands in a notebook where a run waits, HTML and text, readable without a kernel: the pending
card (what is pending and the commands that continue it), a waiting question's place in a cell, the
banner of a run the notebook's copy of which is not trusted, and a form's place once it is answered.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..engine.result import RunResult
from .commands import UNKNOWN_NOTEBOOK, continue_commands, resume_command, trust_command
from .common import _code, _e, answers_sentence
from .questions import (
    _IN_DOUBT,
    _at_text,
    _questions_html,
    _questions_text,
    _resumes_text,
    _waiting_for,
    needs_model_text,
)

# -- the pending card (a notebook opened without a kernel) ------------------------------------


def _notebook_commands(run_id: str, result: RunResult, notebook: str | None = None) -> list[str]:
    base = resume_command(run_id, notebook=notebook or UNKNOWN_NOTEBOOK, started_with=result.started_with)
    return continue_commands(result, base, result.question_id(run_id))


UNDEFINED_MACHINE = "(machine not defined)"  # a run's machine, in a view of a kernel that has not defined it


def _of(machine_name: str) -> str:
    """ " of NAME", or what a run's view says when this kernel has not defined its machine."""
    return f" of {machine_name}" if machine_name != UNDEFINED_MACHINE else " (its machine is not defined here)"


def _pending_lines(run_id: str, machine_name: str, result: RunResult) -> tuple[str, str, str | None]:
    """(title, what is pending, detail) of the card, as plain text."""
    if result.status == "in_doubt":
        return "In doubt", f"run {run_id}{_of(machine_name)}{_at_text(result)}: {_IN_DOUBT}.", result.error
    waiting = f"is waiting for {_waiting_for(result)}{_resumes_text(result)}."
    return f"Pending ({result.error})", f"run {run_id}{_of(machine_name)} {waiting}", None


_QUESTION_ABOVE = "The question is above."  # its form, while a kernel draws one, and its commands


def pending_card_html(
    run_id: str, machine_name: str, result: RunResult, *, notebook: str | None = None, question_above: bool = False
) -> str:
    """A static card for a suspended or in-doubt run in a notebook opened without a kernel.

    It says what is pending (the ask, the reply's destination, the state) and how to continue
    (``notebook`` is the file's name for the commands). With ``question_above`` the question is
    left to the form shown above it, so that it is printed once.
    """
    title, what, detail = _pending_lines(run_id, machine_name, result)
    if result.waits_for_model:
        commands = "".join(f"<li>{_code(command)}</li>" for command in _notebook_commands(run_id, result, notebook))
        sentence = _e(needs_model_text(result, run_id))
        return f"<section><p><strong>{sentence}</strong></p><p>From a terminal:</p><ul>{commands}</ul></section>"
    if question_above and result.waits_for_person:
        return f"<section><p><strong>{_e(title)}:</strong> {_e(what)} {_e(_QUESTION_ABOVE)}</p></section>"
    commands = "".join(f"<li>{_code(command)}</li>" for command in _notebook_commands(run_id, result, notebook))
    reply = f"<p>The reply goes to {_code(result.reply_to)}.</p>" if result.reply_to else ""
    return (
        f"<section><p><strong>{_e(title)}:</strong> {_e(what)}</p>"
        f"{f'<p>{_code(detail)}</p>' if detail else ''}{_questions_html(result)}{reply}"
        "<p>To continue, open this notebook with a kernel and run <code>%mkl pending</code>, "
        f"or from a terminal:</p><ul>{commands}</ul></section>"
    )


def pending_card_text(
    run_id: str, machine_name: str, result: RunResult, *, notebook: str | None = None, question_above: bool = False
) -> str:
    """The text twin of :func:`pending_card_html`."""
    title, what, detail = _pending_lines(run_id, machine_name, result)
    if result.waits_for_model:
        commands = [f"  {command}" for command in _notebook_commands(run_id, result, notebook)]
        return "\n".join([needs_model_text(result, run_id), "From a terminal:", *commands])
    if question_above and result.waits_for_person:
        return f"{title}: {what} {_QUESTION_ABOVE}"
    lines = [f"{title}: {what}", *([detail] if detail else []), *_questions_text(result)]
    lines += [f"The reply goes to {result.reply_to}."] if result.reply_to else []
    lines.append("To continue, open this notebook with a kernel and run %mkl pending, or from a terminal:")
    lines += [f"  {command}" for command in _notebook_commands(run_id, result, notebook)]
    return "\n".join(lines)


# -- a question in a cell: the form's place, with or without a kernel ------------------------


def waiting_html(run_id: str, result: RunResult, notebook: str | None = None) -> str:
    """What stands in a form's place when no kernel draws it: the question, and the command that answers it."""
    commands = "".join(f"<li>{_code(command)}</li>" for command in _notebook_commands(run_id, result, notebook))
    reply = f" The reply goes to {_code(result.reply_to)}." if result.reply_to else ""
    return (
        f"<section>{_questions_html(result)}<p>Run {_code(run_id)} waits for this reply at "
        f"{_code(result.at)}.{reply} Answer it in this notebook with its kernel (the form appears here), "
        f"or from a terminal:</p><ul>{commands}</ul></section>"
    )


def waiting_text(run_id: str, result: RunResult, notebook: str | None = None) -> str:
    """The text twin of :func:`waiting_html`."""
    lines = [*_questions_text(result), f"Run {run_id} waits for this reply at {result.at}."]
    lines += [f"The reply goes to {result.reply_to}."] if result.reply_to else []
    lines.append("Answer it in this notebook with its kernel (the form appears here), or from a terminal:")
    lines += [f"  {command}" for command in _notebook_commands(run_id, result, notebook)]
    return "\n".join(lines)


def untrusted_bundle(
    run_id: str,
    source: str,
    mark: str,
    found: str,
    ask: str | None,
    *,
    added: str | None = None,
    trust: str | None = None,
    refused: str | None = None,
) -> dict[str, str]:
    """What stands where a run would show when the notebook's copy of it is not trusted: whose it is, how
    the file shows it (its question behind that mark), what it adds past the copy held here (``added``), and
    how to take it up (``trust``: the command that trusts its signer's key). A copy holding an answer from
    someone its run does not let answer (``refused``: who answered, who may) is never taken up, and says so."""
    if refused is not None:
        return _refused_bundle(run_id, source, refused, found, trust)
    commands = [*([trust] if trust else []), f"%mkl run … --trust-file  (or %mkl resume {run_id} --trust-file)"]
    if trust is None:
        commands.append(trust_command(source))
    asked = f" The file says it asks: “{ask}”." if ask else ""
    what = f"is {mark}"
    if added is not None:
        what = f"goes on past the copy you hold ({added}), and that is {mark}"
    text = "\n".join(
        [
            f"NOT TRUSTED: run {run_id} in {source} {what}.",
            "What it shows may not be what its machine's author wrote, and nothing of it runs here until you "
            f"choose to take it up. As the file shows it, the run is {found}.{asked}",
            "Take it up with a button, or:",
            *(f"  {command}" for command in commands),
        ]
    )
    listed = "".join(f"<li>{_code(command)}</li>" for command in commands)
    asked_html = f" The file says it asks: “{_e(ask)}”." if ask else ""
    what_html = f"is <em>{_e(mark)}</em>"
    if added is not None:
        what_html = f"goes on past the copy you hold ({_e(added)}), and that is <em>{_e(mark)}</em>"
    page = (
        f"<section><p><strong>Not trusted:</strong> run {_code(run_id)} in {_code(source)} {what_html}.</p>"
        "<p>What it shows may not be what its machine's author wrote, and nothing "
        f"of it runs here until you choose to take it up. As the file shows it, the run is {_e(found)}."
        f"{asked_html}</p><p>Take it up with a button, or:</p><ul>{listed}</ul></section>"
    )
    return {"text/plain": text, "text/html": page}


def _refused_bundle(run_id: str, source: str, refused: str, found: str, trust: str | None) -> dict[str, str]:
    """What stands where a run would show when the notebook's copy of it holds an answer its run refuses."""
    hint = f" If that key is an approver's, trust it under their name: {trust}" if trust else ""
    text = (
        f"REFUSED: run {run_id} in {source} is not taken up: {refused}. As the file shows it, the run is {found}; "
        f"the file keeps it as it came, and nothing (not --trust-file) takes it up.{hint}"
    )
    hint_html = f" If that key is an approver's, trust it under their name: {_code(trust)}" if trust else ""
    page = (
        f"<section><p><strong>Refused:</strong> run {_code(run_id)} in {_code(source)} is not taken up: "
        f"<em>{_e(refused)}</em>.</p><p>As the file shows it, the run is {_e(found)}; the file keeps it as it "
        f"came, and nothing (not <code>--trust-file</code>) takes it up.{hint_html}</p></section>"
    )
    return {"text/plain": text, "text/html": page}


def answered_bundle(answers: Sequence[Mapping[str, Any]], note: str = "") -> dict[str, str]:
    """A form's place once its question is answered or no longer asked: what happened, in a sentence."""
    text = " ".join(part for part in (answers_sentence(answers), note) if part)
    return {"text/plain": text, "text/html": f"<p><em>{_e(text)}</em></p>" if text else ""}
