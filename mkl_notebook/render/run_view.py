"""A run's view in a notebook cell, HTML and text: its outcome (or the pending card when a person's answer is
awaited), then its trace and its machine's visits, capped with the magics that show them whole; and what
became of the run after the part a cell shows.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..engine.result import RunResult
from ..lang.model import Machine
from .cards import UNDEFINED_MACHINE, pending_card_html, pending_card_text
from .common import _e, _plural, answers_sentence, notebook_cap, status_phrase
from .questions import (
    _asked_again_lines,
    _questions_html,
    _questions_text,
    _resumes_text,
    _waiting_for,
    asked_again,
    asked_again_html,
)
from .summary import _steps, _usage_text, result_summary_html, result_summary_text
from .trace import trace_table_html, trace_table_text, traced_answers
from .visits import visits_say_more, visits_table_html, visits_table_text

BUDGET_HALTS = ("budget-exhausted", "cost-exhausted", "spend-exhausted")


@dataclass(frozen=True)
class Later:
    """What became of a run after the part a cell shows: how it stands now, and the answers given since."""

    status: str
    error: str | None
    at: str | None
    answers: tuple[Mapping[str, Any], ...] = ()

    def sentence(self) -> str:
        """What a cell's view says last: that the run went on, the answers since, and where it is now."""
        given = answers_sentence(self.answers)
        return (
            f"The run went on after this cell{': ' + given[:1].lower() + given[1:-1] if given else ''}; "
            f"it is now {status_phrase(self.status, self.error, self.at)}."
        )


def _highlight_max(result: RunResult) -> bool:
    return result.error in BUDGET_HALTS


@dataclass(frozen=True)
class Shown:
    """How a run's view is drawn: the notebook's file name for commands, whether a form above carries the
    question, and what became of the run since the part shown (when it went on)."""

    notebook: str | None = None
    question_above: bool = False
    later: Later | None = None
    replayed: int = 0  # how many leading steps took their answers from the journal
    note: str | None = None  # said first: e.g. that the notebook's saved copy of the run was not taken up


def _waited_here(result: RunResult) -> str:
    if result.waits_for_model:
        return f"This cell left the run needing a model{_resumes_text(result)}."
    return f"This cell left the run waiting for {_waiting_for(result)}{_resumes_text(result)}."


def run_html(
    run_id: str,
    machine: Machine | None,
    result: RunResult,
    calls: Mapping[str, int] | None = None,
    shown: Shown = Shown(),
) -> str:
    """The finished (or parked) view of a run: outcome or pending card, then trace and visits (given the
    machine), in a ``<details>`` that is open (a folded one is left out of a printed page or a PDF).

    ``calls`` (made, replayed) says what showing it cost: a replayed run says so. Long traces, big
    machines' visits and long results are capped (:func:`cut`), with the magics that show them whole.
    """
    name = machine.name if machine is not None else UNDEFINED_MACHINE
    cap = notebook_cap(run_id)
    usage = f"<p><small>{_e(_usage_text(result, calls))}</small></p>"
    if shown.later is not None and result.status == "suspended":
        head = f"<p><strong>{_e(_waited_here(result))}</strong></p>{_questions_html(result)}{usage}"
    elif result.status in ("suspended", "in_doubt"):
        card = pending_card_html(run_id, name, result, notebook=shown.notebook, question_above=shown.question_above)
        head = card + asked_again_html(asked_again(result)) + usage
    else:
        head = result_summary_html(result, calls, cap)
    if shown.later is not None:
        head += f"<p><mark>{_e(shown.later.sentence())}</mark></p>"
    if shown.note:
        head = f"<p><mark>{_e(shown.note)}</mark></p>{head}"
    trace = trace_table_html(
        result.trace_with_open_call(),
        caption=None,  # the summary says it
        answers=traced_answers(result),
        replayed=shown.replayed,
        cap=cap,
    )
    with_visits = _with_visits(machine, result)
    visits = (
        visits_table_html(machine, result.visits, result.diagnosis, highlight_max=_highlight_max(result), cap=cap)
        if machine is not None and with_visits
        else ""
    )
    title = f"Trace and visits of {run_id}" if with_visits else f"Trace of {run_id}"
    details = (
        f"<details open><summary>{_e(title)} — {_e(_plural(_steps(result.trace), 'step'))}</summary>"
        f"{trace}{visits}</details>"
    )
    return f"<div>{head}{details}</div>"


def _with_visits(machine: Machine | None, result: RunResult) -> bool:
    """Whether the run's view shows its visits table (``%mkl visits`` always does)."""
    if machine is None:
        return False
    return visits_say_more(machine, result.visits, result.diagnosis, _highlight_max(result))


def run_text(
    run_id: str,
    machine: Machine | None,
    result: RunResult,
    calls: Mapping[str, int] | None = None,
    shown: Shown = Shown(),
) -> str:
    """The text twin of :func:`run_html`."""
    name = machine.name if machine is not None else UNDEFINED_MACHINE
    cap = notebook_cap(run_id)
    if shown.later is not None and result.status == "suspended":
        head = "\n".join([_waited_here(result), *_questions_text(result), _usage_text(result, calls)])
    elif result.status in ("suspended", "in_doubt"):
        card = pending_card_text(run_id, name, result, notebook=shown.notebook, question_above=shown.question_above)
        head = "\n".join([card, *_asked_again_lines(asked_again(result)), _usage_text(result, calls)])
    else:
        head = result_summary_text(result, calls, cap)
    if shown.later is not None:
        head += f"\n{shown.later.sentence()}"
    if shown.note:
        head = f"{shown.note}\n{head}"
    trace = trace_table_text(
        result.trace_with_open_call(),
        caption=f"Trace of {run_id}",
        answers=traced_answers(result),
        replayed=shown.replayed,
        cap=cap,
    )
    parts = [head, trace]
    if machine is not None and _with_visits(machine, result):
        visits = visits_table_text(
            machine, result.visits, result.diagnosis, highlight_max=_highlight_max(result), cap=cap
        )
        parts.append(visits)
    return "\n\n".join(parts)


def run_bundle(
    run_id: str,
    machine: Machine | None,
    result: RunResult,
    calls: Mapping[str, int] | None = None,
    shown: Shown = Shown(),
) -> dict[str, str]:
    """The finished (or parked) view of a run as HTML and text (the diagram is a separate output)."""
    return {
        "text/html": run_html(run_id, machine, result, calls, shown),
        "text/plain": run_text(run_id, machine, result, calls, shown),
    }
