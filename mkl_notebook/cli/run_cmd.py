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
from ..app.settings import DEFAULT_STORE, command_api_base
from ..app.values import parse_assignments
from ..render.commands import resume_command
from ..render.common import note_said, printable
from .common import (
    EXIT_FAILED,
    STATUS_EXIT,
    Commands,
    all_flag,
    cli_cap,
    emit_status,
    interrupted,
    machine_of,
    run_settings,
    say,
    workspace,
)
from .live import TerminalStream

if TYPE_CHECKING:  # (the application's heavier parts are imported when a command runs, not for `mkl --help`)
    from ..app.terms import Observer, Outcome
    from ..app.workspace import Workspace


def add_run_parsers(commands: Commands) -> None:
    run = commands.add_parser("run", help="run a machine (durably: re-running an id replays it)")
    run.add_argument("file", help="a .mkl machine file")
    run.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a host value for a context key (dotted keys nest); repeatable",
    )
    run.add_argument("--input", metavar="JSON", help="a JSON object of host values (or @file.json)")
    _common(run)
    run.add_argument("--suspend", action="store_true", help="suspend instead of halting when a budget runs out")
    hitl = run.add_mutually_exclusive_group()
    hitl.add_argument("--hitl", action="store_true", help="every escalate gate suspends for a person")
    hitl.add_argument("--no-hitl", action="store_true", help="escalate gates route as authored (the default)")
    run.add_argument(
        "--on-untrusted-flow",
        choices=("report", "halt"),
        default="report",
        help="what an effectful tool reached by a tainted decision does",
    )
    run.add_argument("--fresh", action="store_true", help="start the run id over, forgetting its journal")
    run.add_argument(
        "--retry",
        action="store_true",
        help="make the calls that failed (a provider's error) again; without it a re-run replays them as they failed",
    )
    run.add_argument(
        "--ask-human", action="store_true", help="let every generative state ask the person a question (extension)"
    )
    run.set_defaults(handler=run_main)

    resume = commands.add_parser("resume", help="continue a suspended or in-doubt run")
    resume.add_argument(
        "target",
        nargs="?",
        metavar="CHECKPOINT|NOTEBOOK",
        help="a checkpoint file written by --checkpoint, or a notebook (.ipynb) that carries the run",
    )
    resume.add_argument("--run", dest="notebook_run", metavar="ID", help="which run of the notebook to resume")
    resume.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="the reply, at the path the run is waiting on (e.g. --set human.reply=approve)",
    )
    resume.add_argument("--reply", metavar="TEXT", help="the reply, wherever the run is waiting for it")
    resume.add_argument(
        "--note",
        metavar="TEXT",
        help="a note beside the reply (--reply approve --note 'add an apology'): journaled and shown with it, "
        "and put at <reply_to>_note for the machine; the reply itself stays as given",
    )
    resume.add_argument(
        "--question",
        metavar="ID",
        help="the question the reply answers (question_id in the status line); a reply to any other is refused",
    )
    resume.add_argument("--as", dest="by", metavar="NAME", help="who answers (default: $JUPYTERHUB_USER, else you)")
    resume.add_argument("--resolve", metavar="completed=VALUE|retry|abort", help="settle an in-doubt tool call")
    resume.add_argument("--force", action="store_true", help="resume even though a machine file changed")
    resume.add_argument(
        "--trust-file",
        action="store_true",
        help="take up the file's run even though its checkpoint is not sealed by you or a key you trust",
    )
    _common(resume)
    resume.set_defaults(handler=resume_main)

    listing = commands.add_parser("runs", help="list the runs in a store or a notebook")
    listing.add_argument(
        "store",
        nargs="?",
        default=str(DEFAULT_STORE),
        help="a run store (default .mkl/runs.sqlite), a notebook (.ipynb), or a folder: every question waiting "
        "in the notebooks and stores under it",
    )
    listing.add_argument("--store", dest="store_flag", metavar="PATH", help="the run store to list (as STORE)")
    listing.set_defaults(handler=runs_main)


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--id", dest="run_id", metavar="RUN", help="the run id (default: a new one for run)")
    parser.add_argument("--store", metavar="PATH", help=f"the run store (default {DEFAULT_STORE})")
    parser.add_argument("--checkpoint", metavar="PATH", help="also write the run's checkpoint here")
    parser.add_argument("--script", metavar="FILE", help="scripted oracles (llm/tools/hooks) to run offline")
    parser.add_argument("--model", metavar="MODEL", help="litellm model for every tier, e.g. openai/gpt-4o-mini")
    parser.add_argument("--api-base", metavar="URL", help="base URL of an OpenAI-compatible or local server")
    parser.add_argument(
        "--tools", metavar="FILE.py", help="a Python file whose @mkl_notebook.tool / .hook functions the run may call"
    )
    parser.add_argument(
        "--max-steps",
        metavar="N",
        help="step budget (replaces budget:); on resume, of the machine that ran out of steps, "
        "the root or a called one",
    )
    parser.add_argument("--max-tokens", metavar="N", help="token budget for the whole run")
    parser.add_argument(
        "--max-cost",
        metavar="USD",
        help="cost limit in US dollars for the run's model calls, from litellm's local price list "
        "(a model with no known price stops the run rather than spend unmetered)",
    )
    executor_flags(parser)
    parser.add_argument("--quiet", action="store_true", help="print only the final JSON status line")
    all_flag(parser)


def _observer(args: argparse.Namespace) -> Observer | None:
    """Streamed answers go to the terminal when stdout is one (never into a pipe or the status line)."""
    if args.quiet or not sys.stdout.isatty():
        return None
    return TerminalStream(sys.stdout).observer


def executor_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--executor",
        metavar="threads|dask|dask://ADDRESS",
        help="where calls are made: here (threads, the default), a LocalCluster started for the command (dask), "
        "or a running Dask scheduler",
    )
    parser.add_argument("--max-model-calls", metavar="N", help="model calls in flight at once across the cluster")


def _finish(args: argparse.Namespace, ws: Workspace, outcome: Outcome, resume: str, written: str | None = None) -> int:
    """Print the outcome and its status line; ``written`` names a file the caller already updated."""
    from ..app import status
    from ..app.checkpoints import write_checkpoint

    if args.checkpoint:
        write_checkpoint(args.checkpoint, outcome, ws.keyring.signer())
    if not args.quiet:
        say(status.describe(outcome, resume, cli_cap(outcome.run_id, args.store, args.full)))
    emit_status(status.status_line(outcome, checkpoint=args.checkpoint or written))
    return STATUS_EXIT[outcome.result.status]


def _go_on(args: argparse.Namespace, run_id: str) -> str:
    """What is kept of run ``run_id`` after an interruption, and the command that goes on with it from this
    command's store (its answers journaled so far replay), with the answers this command drew on."""
    given = {"script": args.script, "tools": args.tools, "model": getattr(args, "model", None)}
    answers = {key: value for key, value in given.items() if value}
    again = resume_command(run_id, store=args.store, api_base=command_api_base(args.api_base), **answers)
    return f"run {run_id} keeps every answer journaled so far; `{again}` goes on from there"


def _continue_with(args: argparse.Namespace, outcome: Outcome, **where: Any) -> str:
    """The command that continues the run as this one was run: where it is (its store, a checkpoint or a
    notebook file), and the answers it drew on (a script, tools, a model, a server without credentials): those
    given to this command, else those the run was started with."""
    given = {"script": args.script, "tools": args.tools, "model": args.model}
    answers = {**outcome.result.started_with, **{key: value for key, value in given.items() if value}}
    return resume_command(
        outcome.run_id,
        store=None if "notebook" in where else args.store,
        api_base=command_api_base(args.api_base),
        **answers,
        **where,
    )


def run_main(args: argparse.Namespace) -> int:
    from ..app.checkpoints import check_checkpoint_folder
    from ..app.terms import new_run_id

    check_checkpoint_folder(args.checkpoint)
    with workspace(args) as ws:
        machine = machine_of(ws, args)
        run_id = args.run_id or new_run_id()  # named now, so that an interrupted run can be named
        try:
            run = ws.start(
                machine.name,
                id=run_id,
                observer=_observer(args),
                on_untrusted_flow=args.on_untrusted_flow,
                ask_human=args.ask_human,
                retry=args.retry,
                **run_settings(args),
            )
        except KeyboardInterrupt:
            return interrupted(_go_on(args, run_id), run_id)
        assert run.outcome is not None
        return _finish(args, ws, run.outcome, _continue_with(args, run.outcome))


def resume_main(args: argparse.Namespace) -> int:
    from ..app.checkpoints import check_checkpoint_folder, paired_edits, unheeded_marks

    check_checkpoint_folder(args.checkpoint)
    if bool(args.target) == bool(args.run_id):
        raise UsageProblem("name the run to resume: a checkpoint file, a notebook with --run ID, or --id RUN")
    if args.notebook_run and not (args.target or "").endswith(".ipynb"):
        raise UsageProblem("--run names a run inside a notebook; give the notebook file too")
    with workspace(args) as ws:
        if args.tools:
            ws.load_tools(args.tools)
        asked: dict[str, Any] = {
            "reply": args.reply,
            "set_values": parse_assignments(args.set),
            "question": args.question,
            "by": args.by,
            "via": "cli",
            "note": args.note,
            "max_steps": args.max_steps,
            "max_tokens": args.max_tokens,
            "max_cost": args.max_cost,
            "resolve": args.resolve,
            "observer": _observer(args),
            "force": args.force,
            "script": args.script,
        }
        if not args.target:
            try:
                outcome = ws.resume(args.run_id, **asked)
            except KeyboardInterrupt:
                return interrupted(_go_on(args, args.run_id), args.run_id)
            return _finish(args, ws, outcome, _continue_with(args, outcome))
        if args.target.endswith(".ipynb"):
            notebook = Path(args.target)
            at_risk = paired_edits(notebook)  # (asked before the write makes the notebook the newer file)
            for aside in unheeded_marks(notebook, args.notebook_run) if args.notebook_run else []:
                print(f"mkl: warning: {printable(aside)}", file=sys.stderr)
            outcome = ws.resume_notebook(notebook, args.notebook_run, trust_file=args.trust_file, **asked)
            if at_risk is not None:
                print(f"mkl: warning: {printable(at_risk)}", file=sys.stderr)
            resume = _continue_with(args, outcome, notebook=str(notebook), trust_file=args.trust_file)
            return _finish(args, ws, outcome, resume, written=str(notebook))
        outcome = ws.resume_checkpoint(args.target, trust_file=args.trust_file, **asked)
        resume = _continue_with(args, outcome, checkpoint=args.target, trust_file=args.trust_file)
        return _finish(args, ws, outcome, resume, args.target)


def runs_main(args: argparse.Namespace) -> int:
    """List runs; reading only, nothing is made or written (see app.listing)."""
    from ..app.listing import store_runs

    if args.store_flag is not None:  # a store file, whatever its name
        if args.store != str(DEFAULT_STORE):
            raise UsageProblem("name the store once: STORE or --store PATH")
    elif args.store.endswith(".ipynb"):
        return _notebook_runs(Path(args.store))
    elif Path(args.store).is_dir():
        return _waiting_under(Path(args.store))
    store = args.store_flag or args.store
    listing = store_runs(Path(store))
    for listed in listing:
        _print_listed(listed)
    if not listing:
        print(f"{printable(store)}: no runs")
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
    if listed.get("stale"):
        print(printable(f"    STALE: {listed['stale']}; not answerable here"))
    if listed.get("trusted") is False:
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

    questions, problems, stale = waiting_questions(folder)
    for question in questions:
        mark = f" [NOT TRUSTED: {question['made_by']}]" if question.get("trusted") is False else ""
        print(
            printable(f"{question['where']}: {question['run']}{mark} asks {question['ask']!r} — {question['command']}")
        )
        for command in question["commands"][1:]:
            print(f"    or: {printable(command)}")
    for old in stale:
        print(printable(f"{old['where']}: {old['run']} STALE, asks {old['ask']!r} — {old['stale']}"))
    for problem in problems:
        print(f"not read: {printable(problem)}")
    if not questions:
        print(f"{printable(folder)}: no run waits for a person")
    emit_status({"questions": questions, "stale": stale, "not_read": problems})
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
