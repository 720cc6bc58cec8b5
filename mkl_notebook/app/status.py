"""What a run's outcome shows: the status line a command ends with, its text, and its display output."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, replace
from typing import Any

from ..checkpoints.envelope import MIME_TYPE, checkpoint_of, write_private
from ..checkpoints.notebook_file import FORM_MIME
from ..checkpoints.seals import Signer, covering, key_fingerprint, signatures
from ..durable import places
from ..durable.policy import due_at, policy_said
from ..durable.reading import (
    approvers_of_journal,
    claimed_name,
    decisions,
    established_how,
    notification_failed,
    run_state,
)
from ..durable.records import kind_of
from ..durable.runs import Outcome
from ..engine.result import RunResult
from ..lang.model import Machine
from ..render import views
from ..render.common import answer_time
from ..render.diagram import diagram_bundle, path_from_trace


def status_line(outcome: Outcome, *, checkpoint: str | None = None) -> dict[str, Any]:
    """The one JSON object a run-like command prints last: status, where it stands, usage, calls."""
    result = keyed(outcome)
    status: dict[str, Any] = {
        "status": result.status,
        "error": result.error,
        "at": result.at,
        "ask": result.ask,
        "reply_to": result.reply_to,
        # What a person is asked while the run waits for one (the author's ask, or the model's question),
        # beside question_id; null when no one is asked.
        "question": (result.ask or result.question) if result.waits_for_person else None,
        "result": result.result,
        "usage": usage(result),
        "run": outcome.run_id,
        "checkpoint": checkpoint,
        "calls": outcome.calls,
    }
    question = result.question_id(outcome.run_id)
    if question is not None:
        status["question_id"] = question  # what a reply must name: `mkl resume … --question ID`
        approvers = approvers_of_journal(outcome.records)
        if approvers:
            status["approvers"] = list(approvers)  # who may answer it (anyone else is refused)
        deadline = due_at(outcome.records)
        if deadline is not None:  # when the run's rule decides it unless someone answers first (`mkl tick`)
            status["deadline_at"] = deadline
        failed = notification_failed(outcome.records)
        if failed is not None:
            status["notification_failed"] = failed  # its channel redacted, its reason without secrets
    if result.answers:  # what people answered, each with the note beside it when they wrote one
        status["answers"] = [status_answer(answer) for answer in result.answers]
    if result.machine:
        status["called_machine"] = result.machine  # the suspension is inside it: `at` is its state
    if result.asked_again:  # answers that no longer answer: what they were about changed
        status["asked_again"] = [
            {
                "value": again.get("value"),
                "by": again.get("by"),
                "established": again.get("established"),
                "claimed": again.get("claimed"),
                "via": again.get("via"),
                "time": again.get("time"),
                **_key_of(again),
                "changed": views.changed(str(again.get("before") or ""), str(again.get("now") or "")),
            }
            for again in result.asked_again
        ]
    if outcome.in_doubt:
        status["in_doubt"] = asdict(outcome.in_doubt)
    return status


def write_status_file(path: str, line: str) -> None:
    """Put the status line ``line`` in file ``path`` too, replacing it whole (a temporary file in the same
    folder, then a rename), so that a program polling the file reads the last line or the one before, never
    part of one."""
    write_private(path, line + "\n")


def status_answer(answer: Mapping[str, Any]) -> dict[str, Any]:
    """One answer a run used, as the status line says it: where it landed, the value, who, how, when, and
    the note given beside it (only when there is one)."""
    said = {key: answer.get(key) for key in ("reply_to", "value", "by", "established", "claimed", "via")}
    said["time"] = answer.get("at")
    said.update(_key_of(answer))
    if answer.get("note") is not None:
        said["note"] = answer["note"]
    return said


def usage(result: RunResult) -> dict[str, Any]:
    """A run's tokens, and what its model calls cost in US dollars (``cost_usd``) when every price is known."""
    cost = result.cost_usd
    return {**result.usage, **({"cost_usd": round(cost, 8)} if cost is not None else {})}


def traced(outcome: Outcome) -> tuple[list[Any], list[Mapping[str, Any]]]:
    """A run's trace as its journal holds it (with a call a suspension left open, if any) and the people's
    answers below their steps, each naming the key whose signature covers it: what ``mkl trace`` and
    ``%mkl trace`` show."""
    result = keyed(outcome)
    return list(result.trace_with_open_call()), views.traced_answers(result)


def describe(outcome: Outcome, resume: str, cap: views.Cap | None = None) -> str:
    """A run as text: its trace, how it ended (and what showing it cost), and the commands that continue it.

    ``resume`` is the command that names the run, such as ``mkl resume --id RUN``; ``cap`` says whether a
    long trace and result are shown whole, and how to see them whole when they are not.
    """
    result = keyed(outcome)
    cap = cap or views.Cap()
    trace = views.trace_table_text(
        result.trace_with_open_call(), answers=views.traced_answers(result), replayed=outcome.replayed_steps, cap=cap
    )
    parts = [trace, views.result_summary_text(result, outcome.calls, cap)]
    commands = views.continue_commands(result, resume, result.question_id(outcome.run_id))
    approvers = approvers_of_journal(outcome.records) if result.waits_for_person else ()
    if commands:
        who = f" (only {', '.join(approvers)} may answer it)" if approvers else ""
        parts.append(f"To continue{who}:\n" + "\n".join(f"  {command}" for command in commands))
    return "\n\n".join(parts)


def later(outcome: Outcome) -> views.Later | None:
    """What became of the run after the part ``outcome`` shows (None when it shows the run as it stands)."""
    if outcome.latest is None:
        return None
    now = run_state(outcome.latest)
    since = outcome.latest[len(outcome.records) :]
    answers = tuple(
        {
            **_key_of(r),
            "value": r.get("value"),
            "by": r.get("by"),
            "established": established_how(r),
            "claimed": claimed_name(r),
            "at": r.get("time"),
            "via": r.get("via"),
            "note": r.get("note"),
            **({"rule": policy_said(r)} if kind_of(r) == "policy" else {}),
        }
        for r in with_keys(decisions(since), outcome.latest)
    )
    return views.Later(now.status, now.error, now.at, answers)


def run_output(
    run_id: str,
    machine: Machine | None,
    outcome: Outcome,
    *,
    notebook: str | None = None,
    question_above: bool = False,
    signer: Signer | None = None,
    note: str | None = None,
) -> dict[str, Any]:
    """A run's one display output: its view as HTML and text, carrying its checkpoint envelope.

    ``notebook`` names the file in the commands that continue it; ``question_above`` leaves the
    question to the form shown above; ``signer`` seals the checkpoint; ``note`` is said first.
    """
    shown = views.Shown(notebook=notebook, question_above=question_above, later=later(outcome), note=note)
    journaled = {"journaled": sum(outcome.calls.values())}  # alike each time the cell runs: no "[replayed]"
    return {
        **views.run_bundle(run_id, machine, keyed(outcome), journaled, shown),
        MIME_TYPE: checkpoint_of(outcome, signer),
    }


def run_diagram(machine: Machine, outcome: Outcome) -> dict[str, str]:
    """A run's diagram output: its machine, with the path it took, the visits, and where it stands now."""
    result = outcome.result
    kind = {"suspended": "pending", "halt": "halted", "in_doubt": "halted"}.get(result.status)
    return diagram_bundle(
        machine, visits=result.visits, path=path_from_trace(result.trace), current=result.at, current_kind=kind
    )


def form_place(
    run_id: str,
    outcome: Outcome,
    *,
    notebook: str | None = None,
    answers: Sequence[Mapping[str, Any]] = (),
) -> dict[str, Any]:
    """What stands where a run's form is shown, readable without a kernel: the question waiting now with
    the command that answers it, or (once none waits there) the ``answers`` given there and where the run is.

    It is marked with the run and question it stands for, so that a headless resume can rewrite it.
    """
    result = outcome.result
    marker = {"run": run_id, "question_id": result.question_id(run_id) if outcome.latest is None else None}
    if result.waits_for_person and outcome.latest is None:
        bundle = {
            "text/html": views.waiting_html(run_id, result, notebook),
            "text/plain": views.waiting_text(run_id, result, notebook),
        }
        return {**bundle, FORM_MIME: marker}
    now = run_state(outcome.latest or outcome.records)
    note = "" if answers else f"No question waits here any more: the run is {now}."
    return {**views.answered_bundle(answers, note), FORM_MIME: marker}


def cell_answers(records: Sequence[Mapping[str, Any]], cell: str) -> list[dict[str, Any]]:
    """The replies the forms of notebook cell ``cell`` gave, in a journal (each with the key that signed it)."""
    return with_keys(list(places.form_answers(records, cell, len(records))), records)


def cell_answered(outcome: Outcome, cell: str | None, *, newest: bool = False) -> list[dict[str, Any]]:
    """The replies the forms of notebook cell ``cell`` gave the run ``outcome`` shows (``newest``: as the run
    stands now, though ``outcome`` shows it as a cell left it)."""
    records = (outcome.latest or outcome.records) if newest else outcome.records
    return cell_answers(records, cell) if cell else []


def answered_place(outcome: Outcome, cell: str | None, asked: str | None, *, newest: bool = False) -> dict[str, Any]:
    """What stands where a run's form was once no question waits there: the answers ``cell``'s forms gave, the
    answer to the question it showed (``asked``), or where the run went instead (``newest``: as the run stands
    now, though ``outcome`` shows it as a cell left it)."""
    run_id, records = outcome.run_id, (outcome.latest or outcome.records) if newest else outcome.records
    here = cell_answers(records, cell) if cell else []
    answered = [answer for answer in answers_to(records, asked) if answer not in here]
    note = "" if here or answered else f"No question waits here any more: the run is {run_state(records)}."
    return {**views.answered_bundle([*here, *answered], note), FORM_MIME: {"run": run_id, "question_id": None}}


def answers_to(records: Sequence[Mapping[str, Any]], question_id: Any) -> list[dict[str, Any]]:
    """The replies a journal holds to question ``question_id`` (each with the key that signed it)."""
    given = [r for r in decisions(records) if question_id and r.get("question") == question_id]
    return with_keys([{**r, "rule": policy_said(r)} if kind_of(r) == "policy" else r for r in given], records)


# -- the key that signed each answer ---------------------------------------------------------------------


def reply_seals(records: Sequence[Mapping[str, Any]]) -> dict[tuple[Any, Any], dict[str, str]]:
    """For each reply of a history, by (position, time): the fingerprint of the key whose signature covers it
    (``key``) and whether that signature verifies (``signature``: "verifies" or "fails"). A reply that no
    signature covers yet (its run still going on) is left out: views then name no key."""
    stretches = signatures(records)  # type: ignore[arg-type]
    found: dict[tuple[Any, Any], dict[str, str]] = {}
    for index, record in enumerate(records):
        if kind_of(record) not in ("reply", "policy"):
            continue
        stretch = covering(stretches, index)
        seal = stretch.seal if stretch is not None else None
        if seal is not None:
            found[(record.get("pos"), record.get("time"))] = {
                "key": key_fingerprint(seal.key),
                "signature": "verifies" if seal.holds else "fails",
            }
    return found


def asked_when(outcome: Outcome) -> float | None:
    """When the question the run ``outcome`` shows waits on was asked (its journal's last suspension), if the
    journal says."""
    for record in reversed(outcome.records):
        if kind_of(record) == "suspend":
            at = record.get("time")
            return float(at) if isinstance(at, (int, float)) and not isinstance(at, bool) else None
    return None


def asked_by(records: Sequence[Mapping[str, Any]]) -> str | None:
    """When the question ``records`` end waiting on was asked, and by whose key, when someone other than the one
    who started the run asked it (an advance of another person's brought it): "asked 2026-… UTC, signed as 'bob'
    by key 1c3e …". A fact of the history, the same for every reader (a run nobody changed renders alike for
    all), never whether the reader trusts that key: that is said where it matters, before anything is taken up.
    None for a question the run's starter asked, or one no signature covers."""
    asked = next((at for at in range(len(records) - 1, -1, -1) if kind_of(records[at]) == "suspend"), None)
    if asked is None:
        return None
    stretches = signatures(records)  # type: ignore[arg-type]
    first = stretches[0].seal if stretches else None
    stretch = covering(stretches, asked)
    seal = stretch.seal if stretch is not None else None
    if seal is None or (first is not None and seal.key == first.key):
        return None
    at = answer_time(records[asked].get("time"))
    who = f"signed as {seal.by!r} by key {key_fingerprint(seal.key)}"
    return f"asked {at}, {who}" if at else f"asked, {who}"


def with_keys(
    answers: Sequence[Mapping[str, Any]], records: Sequence[Mapping[str, Any]] | None
) -> list[dict[str, Any]]:
    """``answers`` (reply records, or a run result's answers) each with the key that signed it in ``records``."""
    if not answers:
        return []
    seals = reply_seals(records or ())
    return [{**answer, **seals.get(_reply_place(answer), {})} for answer in answers]


def keyed(outcome: Outcome) -> RunResult:
    """``outcome``'s result with each answer (and each answer asked again) naming the key that signed it."""
    result = outcome.result
    if not result.answers and not result.asked_again:
        return result
    records = outcome.latest or outcome.records
    answers, again = with_keys(result.answers, records), with_keys(result.asked_again, records)
    return replace(result, answers=answers, asked_again=again)


def _reply_place(answer: Mapping[str, Any]) -> tuple[Any, Any]:
    """Where and when an answer was journaled, as :func:`reply_seals` keys it."""
    position = answer["pos"] if "pos" in answer else answer.get("position")
    return position, answer["time"] if "time" in answer else answer.get("at")


def _key_of(answer: Mapping[str, Any]) -> dict[str, Any]:
    return {"key": answer.get("key"), "signature": answer.get("signature")}
