"""``mkl run``, ``mkl resume`` and ``mkl runs``: durable runs from the command line.

The rules (which oracle answers, how a reply is read, what the status line says) are the
application layer's; this module parses flags, calls it and prints.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from ..app import oracles, status
from ..app import runs as app_runs
from ..app.errors import UsageProblem
from ..app.executors import executing
from ..app.trust import Keyring
from ..app.values import merge, parse_assignments, parse_input
from ..app.waiting import waiting_questions
from ..durable import envelope, nbfile
from ..durable import runs as durable
from ..durable.leases import file_lease
from ..durable.runs import Outcome
from ..durable.stores import DEFAULT_STORE, SQLiteStore
from ..engine.oracle import Oracle
from ..lang.loader import load_file
from ..lang.model import Machine
from ..lang.siblings import sibling_registry
from ..providers.host import default_registry
from ..render import views
from .common import EXIT_FAILED, STATUS_EXIT, emit_status
from .live import TerminalStream
from .trace_cmd import all_flag, cli_cap


def add_parsers(commands: argparse._SubParsersAction) -> None:
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
        "--ask-human", action="store_true", help="let every generative state ask the person a question (extension)"
    )
    run.set_defaults(handler=run_command)

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
    resume.set_defaults(handler=resume_command)

    listing = commands.add_parser("runs", help="list the runs in a store or a notebook")
    listing.add_argument(
        "store",
        nargs="?",
        default=str(DEFAULT_STORE),
        help="a run store (default .mkl/runs.sqlite), a notebook (.ipynb), or a folder: every question waiting "
        "in the notebooks and stores under it",
    )
    listing.set_defaults(handler=runs_command)


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--id", dest="run_id", metavar="RUN", help="the run id (default: a new one for run)")
    parser.add_argument("--store", metavar="PATH", help=f"the run store (default {DEFAULT_STORE})")
    parser.add_argument("--checkpoint", metavar="PATH", help="also write the run's checkpoint envelope here")
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


def _observer(args: argparse.Namespace) -> durable.Observer | None:
    """Streamed answers go to the terminal when stdout is one (never into a pipe or the status line)."""
    if args.quiet or not sys.stdout.isatty():
        return None
    return TerminalStream(sys.stdout).observer


def _store(args: argparse.Namespace) -> SQLiteStore:
    return SQLiteStore(args.store or DEFAULT_STORE)


def executor_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--executor",
        metavar="threads|dask|dask://ADDRESS",
        help="where calls are made: here (threads, the default), a LocalCluster started for the command (dask), "
        "or a running Dask scheduler",
    )
    parser.add_argument("--max-model-calls", metavar="N", help="model calls in flight at once across the cluster")


def _oracle(
    args: argparse.Namespace,
    *,
    needs_model: bool = False,
    machine: Machine | None = None,
    executor: Callable[[Oracle], Oracle] | None = None,
) -> Oracle:
    if args.tools:
        oracles.load_tools_file(args.tools)
    config = None if args.script else oracles.model_config({"model": args.model, "api_base": args.api_base})
    return oracles.choose(
        script=args.script,
        config=config,
        needs_model=needs_model,
        machine=machine,
        registry=default_registry,
        executor=executor,
    )


def _finish(args: argparse.Namespace, outcome: Outcome, resume: str, written: str | None = None) -> int:
    """Print the outcome and its status line; ``written`` names a file the caller already updated."""
    if args.checkpoint:
        envelope.write_file(args.checkpoint, outcome.envelope(Keyring().signer()))
    if not args.quiet:
        print(status.describe(outcome, resume, cli_cap(outcome.run_id, args.store, args.full)))
    emit_status(status.status_line(outcome, checkpoint=args.checkpoint or written))
    return STATUS_EXIT[outcome.result.status]


def _resume_by_id(args: argparse.Namespace, run_id: str) -> str:
    """The command that continues the run as this one was run: its store, and the answers it drew on (a script,
    tools, a model; a server address only when it carries no credentials or query, which are never printed)."""
    given = [("--store", args.store), ("--script", args.script), ("--tools", args.tools), ("--model", args.model)]
    if args.api_base:
        address = urlsplit(args.api_base)
        if "@" not in address.netloc and not address.query:
            given.append(("--api-base", args.api_base))
    flags = "".join(f" {flag} {shlex.quote(value)}" for flag, value in given if value)
    return f"mkl resume --id {shlex.quote(run_id)}{flags}"


def _checkpoint_folder(args: argparse.Namespace) -> None:
    """Refuse a ``--checkpoint`` path that cannot be written before anything runs or is journaled."""
    if args.checkpoint:
        folder = Path(args.checkpoint).parent
        if not folder.is_dir():
            raise UsageProblem(f"--checkpoint {args.checkpoint}: the folder {folder} does not exist")


def run_command(args: argparse.Namespace) -> int:
    _checkpoint_folder(args)
    path = Path(args.file)
    machine = load_file(path)
    host_values = merge(parse_input(args.input) if args.input is not None else {}, parse_assignments(args.set))
    options = app_runs.run_options(
        max_steps=args.max_steps,
        max_tokens=args.max_tokens,
        max_cost=args.max_cost,
        suspend=args.suspend,
        hitl="all" if args.hitl else "none",
        on_untrusted_flow=args.on_untrusted_flow,
        ask_human=args.ask_human,
    )
    store = _store(args)
    with executing(args.executor, args.max_model_calls, start_local=True) as executor:
        oracle = _oracle(
            args, needs_model=oracles.starts_anew(store, args.run_id, args.fresh), machine=machine, executor=executor
        )
        outcome = durable.start(
            machine,
            oracle,
            store=store,
            run_id=args.run_id,
            registry=sibling_registry(path, machine),
            input=host_values,
            options=options,
            fresh=args.fresh,
            origin={"path": str(path.resolve())},
            observer=_observer(args),
        )
    return _finish(args, outcome, _resume_by_id(args, outcome.run_id))


def resume_command(args: argparse.Namespace) -> int:
    _checkpoint_folder(args)
    if bool(args.target) == bool(args.run_id):
        raise UsageProblem("name the run to resume: a checkpoint file, a notebook with --run ID, or --id RUN")
    if args.target and args.target.endswith(".ipynb"):
        return _resume_notebook(args)
    if args.notebook_run:
        raise UsageProblem("--run names a run inside a notebook; give the notebook file too")
    store = _store(args)
    if not args.target:
        return _finish(args, _resume(args, store, args.run_id), _resume_by_id(args, args.run_id))
    lock = store.path.parent / "locks" / (Path(args.target).resolve().name + ".checkpoint.lock")
    keyring = Keyring()
    with file_lease(lock, f"checkpoint {args.target}"):
        header, records, seal = envelope.read_file(args.target)
        run_id = app_runs.import_checkpoint(
            store, header, records, args.target, seal=seal, keyring=keyring, trust_file=args.trust_file
        ).run_id
        outcome = _resume(args, store, run_id)
        envelope.write_file(args.target, outcome.envelope(keyring.signer()))
    return _finish(args, outcome, f"mkl resume {args.target}", written=args.target)


def _resume(args: argparse.Namespace, store: SQLiteStore, run_id: str, via: str = "cli") -> Outcome:
    changed, current, unloadable = app_runs.edited_machines(store.read(run_id))
    if changed and not args.force:
        names = ", ".join(repr(name) for name in changed)
        if unloadable:
            raise UsageProblem(
                f"{unloadable[0]}; so machine {names} of run '{run_id}' cannot be read as it is now: fix the "
                "file, or pass --force to resume with the copies the run pinned"
            )
        raise UsageProblem(
            f"machine {names} changed since run '{run_id}' started; pass --force to resume with the edited machine"
        )
    with executing(args.executor, args.max_model_calls, start_local=True) as executor:
        return app_runs.resume(
            store,
            run_id,
            _oracle(args, executor=executor),
            reply=args.reply,
            set_values=parse_assignments(args.set),
            question=args.question,
            by=args.by,
            via=via,
            max_steps=args.max_steps,
            max_tokens=args.max_tokens,
            max_cost=args.max_cost,
            resolve=args.resolve,
            registry=current if changed else None,
            observer=_observer(args),
            known=current,
        )


def _resume_notebook(args: argparse.Namespace) -> int:
    """Resume a run carried by a notebook nobody has open, and write its new checkpoint back into it."""
    notebook = Path(args.target)
    if not args.notebook_run:
        runs_here = ", ".join(run.run_id for run in nbfile.embedded_runs(notebook)) or "none"
        raise UsageProblem(f"name the run to resume with --run ID (runs in {notebook}: {runs_here})")
    store = _store(args)
    outcome = app_runs.resume_in_notebook(
        notebook,
        args.notebook_run,
        store,
        lambda run_id: _resume(args, store, run_id, via="notebook-file"),
        keyring=Keyring(),
        trust_file=args.trust_file,
    )
    return _finish(args, outcome, f"mkl resume {notebook} --run {outcome.run_id}", written=str(notebook))


def runs_command(args: argparse.Namespace) -> int:
    if args.store.endswith(".ipynb"):
        return _notebook_runs(Path(args.store))
    if Path(args.store).is_dir():
        return _waiting_under(Path(args.store))
    path = Path(args.store)
    if not path.is_file():
        raise UsageProblem(f"{path}: no such run store")
    store = SQLiteStore(path)
    store_flag = "" if path == DEFAULT_STORE else f" --store {path}"
    listing = [
        app_runs.summary(summary.run_id, store.read(summary.run_id), f"mkl resume --id {summary.run_id}{store_flag}")
        for summary in store.runs()
    ]
    for listed in listing:
        _print_listed(listed)
    if not listing:
        print(f"{path}: no runs")
    emit_status({"runs": listing})
    return 0


def _print_listed(listed: dict[str, Any], where: str = "") -> None:
    """One run of a listing: its line, then each answer a person gave, then the command that answers it now."""
    error = f" ({listed['error']})" if listed.get("error") else ""
    at = f" at {listed['at']}" if listed.get("at") else ""
    asks = f" — asks: {views.asked_as_listed(listed, said_below=True)}" if listed.get("ask") else ""
    cost = f"  spent {views.money(listed['cost_usd'])}" if "cost_usd" in listed else ""
    print(f"{listed['run']}  {listed['machine']}  {listed['status']}{error}{at}{where}{cost}{asks}")
    if listed.get("trusted") is False:
        print(f"    not trusted: {listed['made_by']}; taken up only with --trust-file, or once you trust the key")
    for answer in listed["answers"]:
        facts = views.answered_by(answer.get("by"), answer.get("time"), answer.get("via"))
        print(f"    answered {answer['value']!r}{f' ({facts})' if facts else ''}")
    if listed.get("command"):
        print(f"    answer it: {listed['command']}")


def _waiting_under(folder: Path) -> int:
    """Every question waiting in the notebooks and stores under ``folder``: one line each, with its command."""
    questions, problems = waiting_questions(folder)
    for question in questions:
        mark = f" [NOT TRUSTED: {question['made_by']}]" if question.get("trusted") is False else ""
        print(f"{question['where']}: {question['run']}{mark} asks {question['ask']!r} — {question['command']}")
    for problem in problems:
        print(f"not read: {problem}")
    if not questions:
        print(f"{folder}: no run waits for a person")
    emit_status({"questions": questions, "not_read": problems})
    return EXIT_FAILED if problems else 0


def _notebook_runs(path: Path) -> int:
    keyring = Keyring()
    for run in nbfile.embedded_runs(path):  # a write-back a stopped resume never made, from a store here
        done = app_runs.finish_write_back(path, run.run_id, keyring)
        if done is not None:
            print(f"{run.run_id}: wrote back what the store {done} holds (a resume there stopped before it could)")
    embedded, damaged = nbfile.scan(path)
    listing = []
    for run in embedded:
        resume = f"mkl resume {path} --run {run.run_id}"
        listed = app_runs.summary(run.run_id, run.records, resume, keyring.judge(run.seal))
        _print_listed(listed, f" ({run.where})")
        marked = nbfile.advancing(path, run.run_id)
        if marked is not None:
            listed["advancing_in"] = marked["store"]
            print(
                f"    left mid-advance in the store {marked['store']}: what it did there is not in this file yet; "
                f"resume it with --store {marked['store']}"
            )
        cell = None if run.cell_index is None else run.cell_index + 1
        listing.append({**listed, "cell": cell, "in_metadata": run.in_metadata})
    for bad in damaged:
        print(f"{bad.run_id or '?'}  damaged checkpoint in {bad.where}: not used ({bad.reason})")
    if not embedded and not damaged:
        print(f"{path}: no run checkpoints")
    listing += [
        {
            "run": bad.run_id,
            "status": "damaged",
            "error": bad.reason,
            "cell": None if bad.cell_index is None else bad.cell_index + 1,
        }
        for bad in damaged
    ]
    emit_status({"runs": listing})
    return EXIT_FAILED if damaged else 0
