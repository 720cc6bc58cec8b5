"""What a run's outcome shows: the status line a command ends with, its text, and its display output."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from ..durable.envelope import MIME_TYPE
from ..durable.runs import Outcome
from ..lang.model import Machine
from ..render import views


def status_line(outcome: Outcome, *, checkpoint: str | None = None) -> dict[str, Any]:
    """The one JSON object a run-like command prints last: status, where it stands, usage, calls."""
    result = outcome.result
    status: dict[str, Any] = {
        "status": result.status,
        "error": result.error,
        "at": result.at,
        "ask": result.ask,
        "reply_to": result.reply_to,
        "question": result.question,
        "result": result.result,
        "usage": result.usage,
        "run": outcome.run_id,
        "checkpoint": checkpoint,
        "calls": outcome.calls,
    }
    question = result.question_id(outcome.run_id)
    if question is not None:
        status["question_id"] = question  # what a reply must name: `mkl resume … --question ID`
    if result.machine:
        status["called_machine"] = result.machine  # the suspension is inside it: `at` is its state
    if outcome.in_doubt:
        status["in_doubt"] = asdict(outcome.in_doubt)
    return status


def describe(outcome: Outcome, resume: str) -> str:
    """A run as text: its trace, how it ended (and what showing it cost), and the commands that continue it.

    ``resume`` is the command that names the run, such as ``mkl resume --id RUN``.
    """
    result = outcome.result
    trace = views.trace_table_text(result.trace_with_open_call(), answers=result.answers)
    parts = [trace, views.result_summary_text(result, outcome.calls)]
    commands = views.continue_commands(result, resume, result.question_id(outcome.run_id))
    if commands:
        parts.append("To continue:\n" + "\n".join(f"  {command}" for command in commands))
    return "\n\n".join(parts)


def run_output(run_id: str, machine: Machine | None, outcome: Outcome) -> dict[str, Any]:
    """A run's one display output: its view as HTML and text, carrying its checkpoint envelope."""
    return {**views.run_bundle(run_id, machine, outcome.result, outcome.calls), MIME_TYPE: outcome.envelope()}
