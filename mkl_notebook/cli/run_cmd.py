"""``mkl run``, ``mkl resume`` and ``mkl runs``: durable runs from the command line.

The rules (which oracle answers, how a reply is read, what the status line says) are the
application layer's; this module parses flags, calls it and prints.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..app.errors import UsageProblem
from ..app.settings import command_api_base, default_store, printed_store
from ..app.values import parse_assignments
from ..render.commands import resume_command
from ..render.common import note_said, printable
from .common import (
    STATUS_EXIT,
    cli_cap,
    emit_status,
    host_values,
    interrupted,
    machine_of,
    say,
    workspace,
)
from .live import TerminalStream
from .parser import EXIT_FAILED

if TYPE_CHECKING:  # (the application's heavier parts are imported when a command runs, not for `mkl --help`)
    from ..app.terms import Observer, Outcome
    from ..app.workspace import Workspace


def _observer(args: argparse.Namespace) -> Observer | None:
    """Streamed answers go to the terminal when stdout is one (never into a pipe or the status line)."""
    if args.quiet or not sys.stdout.isatty():
        return None
    return TerminalStream(sys.stdout).observer


def _finish(args: argparse.Namespace, ws: Workspace, outcome: Outcome, resume: str, written: str | None = None) -> int:
    """Print the outcome and its status line; ``written`` names a file the caller already updated."""
    from ..app import status
    from ..app.checkpoints import write_checkpoint

    if args.checkpoint:
        write_checkpoint(args.checkpoint, outcome, ws.keyring.signer())
    if not args.quiet:
        say(status.describe(outcome, resume, cli_cap(outcome.run_id, printed_store(args.store), args.full)))
    line = status.status_line(outcome, checkpoint=args.checkpoint or written)
    sent = ws.notified.get(outcome.run_id)  # what announcing its question did, when it waits on one
    if sent is not None and (sent.sent or sent.failed):
        line["notified"] = [channel for _, channel in sent.sent]
        if sent.failed:
            line["notification_failed"] = "; ".join(f"{channel}: {why}" for _, channel, why in sent.failed)
            if not args.quiet:
                say(f"notification failed: {line['notification_failed']} (`mkl notify` tries again)")
    emit_status(line)
    return STATUS_EXIT[outcome.result.status]


def _go_on(args: argparse.Namespace, run_id: str) -> str:
    """What is kept of run ``run_id`` after an interruption, and the command that goes on with it from this
    command's store (its answers journaled so far replay), with the answers this command drew on."""
    given = {"script": args.script, "tools": args.tools, "model": getattr(args, "model", None)}
    answers = {key: value for key, value in given.items() if value}
    again = resume_command(run_id, store=printed_store(args.store), api_base=command_api_base(args.api_base), **answers)
    return f"run {run_id} keeps every answer journaled so far; `{again}` goes on from there"


def _continue_with(args: argparse.Namespace, outcome: Outcome, **where: Any) -> str:
    """The command that continues the run as this one was run: where it is (its store, a checkpoint or a
    notebook file), and the answers it drew on (a script, tools, a model, a server without credentials): those
    given to this command, else those the run was started with."""
    given = {"script": args.script, "tools": args.tools, "model": args.model}
    answers = {**outcome.result.started_with, **{key: value for key, value in given.items() if value}}
    return resume_command(
        outcome.run_id,
        store=None if "notebook" in where else printed_store(args.store),
        api_base=command_api_base(args.api_base),
        **answers,
        **where,
    )


def run_main(args: argparse.Namespace) -> int:
    from ..app.checkpoints import check_checkpoint_folder
    from ..app.requests import StartRequest, from_flags
    from ..app.terms import new_run_id

    check_checkpoint_folder(args.checkpoint)
    with workspace(args) as ws:
        machine = machine_of(ws, args)
        run_id = args.run_id or new_run_id()  # named now, so that an interrupted run can be named
        request = from_flags(StartRequest, args, id=run_id, input=host_values(args), observer=_observer(args))
        try:
            run = ws.start(machine.name, request)
        except KeyboardInterrupt:
            return interrupted(_go_on(args, run_id), run_id)
        assert run.outcome is not None
        return _finish(args, ws, run.outcome, _continue_with(args, run.outcome))


def resume_main(args: argparse.Namespace) -> int:
    from ..app.checkpoints import check_checkpoint_folder, paired_edits, unheeded_marks
    from ..app.requests import ContinueRequest, from_flags

    check_checkpoint_folder(args.checkpoint)
    if bool(args.target) == bool(args.run_id):
        raise UsageProblem("name the run to resume: a checkpoint file, a notebook with --run ID, or --id RUN")
    if args.notebook_run and not (args.target or "").endswith(".ipynb"):
        raise UsageProblem("--run names a run inside a notebook; give the notebook file too")
    with workspace(args) as ws:
        if args.tools:
            ws.equipment.load_tools(args.tools)
        asked = from_flags(
            ContinueRequest, args, set_values=parse_assignments(args.reply_set), via="cli", observer=_observer(args)
        )
        if not args.target:
            try:
                outcome = ws.resume(args.run_id, asked)
            except KeyboardInterrupt:
                return interrupted(_go_on(args, args.run_id), args.run_id)
            return _finish(args, ws, outcome, _continue_with(args, outcome))
        if args.target.endswith(".ipynb"):
            notebook = Path(args.target)
            at_risk = paired_edits(notebook)  # (asked before the write makes the notebook the newer file)
            for aside in unheeded_marks(notebook, args.notebook_run) if args.notebook_run else []:
                print(f"mkl: warning: {printable(aside)}", file=sys.stderr)
            outcome = ws.resume_notebook(notebook, args.notebook_run, asked)
            if at_risk is not None:
                print(f"mkl: warning: {printable(at_risk)}", file=sys.stderr)
            resume = _continue_with(args, outcome, notebook=str(notebook), trust_file=args.trust_file)
            return _finish(args, ws, outcome, resume, written=str(notebook))
        outcome = ws.resume_checkpoint(args.target, asked)
        resume = _continue_with(args, outcome, checkpoint=args.target, trust_file=args.trust_file)
        return _finish(args, ws, outcome, resume, args.target)


def runs_main(args: argparse.Namespace) -> int:
    """List runs; reading only, nothing is made or written (see app.listing)."""
    from ..app.listing import store_runs

    given: str | None = args.store
    if args.store_flag is not None:  # a store file, whatever its name
        if given is not None:
            raise UsageProblem("name the store once: STORE or --store PATH")
        given = args.store_flag
    elif given is None:
        given = str(default_store())  # $MKL_STORE, else the default store
    elif given.endswith(".ipynb"):
        return _notebook_runs(Path(given))
    elif Path(given).is_dir():
        return _waiting_under(Path(given))
    store = str(given)
    listing = store_runs(store)
    for listed in listing:
        _print_listed(listed)
    if not listing:
        print(f"{printable(printed_store(store) or store)}: no runs")
    emit_status({"runs": listing})
    return 0


def _print_listed(listed: dict[str, Any], where: str = "") -> None:
    """One run of a listing: its line, then each answer a person gave, then the command that answers it now.
    Each is one line whatever the file says (:func:`printable`), so a run's text cannot pass for the next."""
    from ..render import views

    error = f" ({listed['error']})" if listed.get("error") else ""
    at = f" at {listed['at']}" if listed.get("at") else ""
    asks = f" — asks: {views.asked_as_listed(listed, said_below=True)}" if listed.get("ask") else ""
    cost = f"  spent {views.money(listed['cost_usd'])}" if "cost_usd" in listed else ""
    print(printable(f"{listed['run']}  {listed['machine']}  {listed['status']}{error}{at}{where}{cost}{asks}"))
    if listed.get("asked_at") is not None:
        made_by = f", {listed['made_by']}" if listed.get("trusted") else ""  # (an untrusted mark says so below)
        print(printable(f"    asked {views.answer_time(listed['asked_at'])}{made_by}"))
    if listed.get("notification_failed"):
        print(printable(f"    notification failed: {listed['notification_failed']}"))
    if listed.get("stale"):
        print(printable(f"    STALE: {listed['stale']}; not answerable here"))
    if listed.get("refused"):
        print(printable(f"    REFUSED: {listed['refused']}; never taken up, not even with --trust-file"))
    elif listed.get("trusted") is False:
        made_by = printable(listed["made_by"])
        print(f"    not trusted: {made_by}; taken up only with --trust-file, or once you trust the key")
    for answer in listed["answers"]:
        facts = views.answered_by(answer)
        note = note_said(answer.get("note"))
        print(
            printable(f"    answered {answer['value']!r}{f' {note}' if note else ''}{f' ({facts})' if facts else ''}")
        )
    for number, command in enumerate(listed.get("commands") or [], 1):
        print(f"    {'answer it' if number == 1 else '       or'}: {printable(command)}")


def _waiting_under(folder: Path) -> int:
    """Every question waiting in the notebooks and stores under ``folder``: one line each, with its command."""
    from ..app.listing import waiting_questions

    questions, problems, stale, refused = waiting_questions(folder)
    for question in questions:
        mark = f" [NOT TRUSTED: {question['made_by']}]" if question.get("trusted") is False else ""
        print(
            printable(f"{question['where']}: {question['run']}{mark} asks {question['ask']!r} — {question['command']}")
        )
        for command in question["commands"][1:]:
            print(f"    or: {printable(command)}")
    for old in stale:
        print(printable(f"{old['where']}: {old['run']} STALE, asks {old['ask']!r} — {old['stale']}"))
    for kept in refused:
        print(printable(f"{kept['where']}: {kept['run']} REFUSED — {kept['refused']}"))
    for problem in problems:
        print(f"not read: {printable(problem)}")
    if not questions:
        print(f"{printable(folder)}: no run waits for a person")
    kept_aside = {"refused": refused} if refused else {}  # (a file's run holding an answer its run refuses)
    emit_status({"questions": questions, "stale": stale, **kept_aside, "not_read": problems})
    return EXIT_FAILED if problems else 0


def _notebook_runs(path: Path) -> int:
    from ..app.listing import notebook_runs

    found = notebook_runs(path)
    listing = []
    for listed in found.runs:
        where = listed.pop("where")
        _print_listed(listed, f" ({where})")
        if "only_in_outputs" in listed:
            say(
                "    only in this file's outputs: stripping them (nbstripout, nbconvert --clear-output) would lose it; "
                f"`{listed['only_in_outputs']}` keeps it in the notebook's metadata"
            )
        if "advancing_in" in listed:
            say(
                f"    was being advanced in the store {listed['advancing_in']}, and what it did there is not in "
                f"this file yet; `{listed['finish']}` finishes it"
            )
        listing.append(listed)
    for bad in found.damaged:
        print(printable(f"{bad['run'] or '?'}  damaged checkpoint in {bad.pop('where')}: not used ({bad['error']})"))
    if not found.runs and not found.damaged:
        print(f"{printable(path)}: no run checkpoints")
    emit_status({"runs": listing + found.damaged})
    return EXIT_FAILED if found.damaged else 0
