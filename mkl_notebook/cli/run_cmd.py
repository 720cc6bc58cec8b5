"""``mkl run``, ``mkl resume`` and ``mkl runs``: durable runs from the command line."""

from __future__ import annotations

import argparse
import json
import runpy
from pathlib import Path
from typing import Any

from ..durable import envelope, runs
from ..durable.records import canonical
from ..durable.replay import JournalIndex
from ..durable.stores import DEFAULT_STORE, SQLiteStore, file_lease
from ..engine.options import RunOptions
from ..engine.oracle import Oracle
from ..engine.result import RunResult
from ..host import HostOracle, default_registry
from ..lang.loader import load_file
from ..lang.model import Machine
from ..notebook import nbfile
from ..notebook.views import run_bundle
from ..providers.config import ConfigError, ModelConfig, load_config
from ..providers.litellm_provider import LiteLLMOracle, missing_keys
from ..providers.scripted import NoModelOracle
from ..testing import sibling_registry
from .common import (
    EXIT_FAILED,
    STATUS_EXIT,
    UsageFailure,
    emit_status,
    load_script,
    merge,
    parse_assignments,
    parse_input,
    positive_int,
)

NO_MODEL = (
    "no model is configured: set MKL_MODEL (e.g. MKL_MODEL=openai/gpt-4o-mini) or pass --model, or "
    "pass --script FILE to run offline with scripted answers"
)


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
    resume.add_argument("--resolve", metavar="completed=VALUE|retry|abort", help="settle an in-doubt tool call")
    resume.add_argument("--force", action="store_true", help="resume even though a machine file changed")
    _common(resume)
    resume.set_defaults(handler=resume_command)

    listing = commands.add_parser("runs", help="list the runs in a store or a notebook")
    listing.add_argument(
        "store",
        nargs="?",
        default=str(DEFAULT_STORE),
        help="a run store (default .mkl/runs.sqlite) or a notebook (.ipynb)",
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
        type=positive_int,
        metavar="N",
        help="step budget (replaces budget:); on resume, of the machine that ran out of steps, "
        "the root or a called one",
    )
    parser.add_argument("--max-tokens", type=positive_int, metavar="N", help="token budget for the whole run")
    parser.add_argument("--quiet", action="store_true", help="print only the final JSON status line")


def _store(args: argparse.Namespace) -> SQLiteStore:
    return SQLiteStore(args.store or DEFAULT_STORE)


def describe(result: RunResult) -> str:
    """A few readable lines: the trace, then how the run ended."""
    lines = []
    for step in result.trace:
        target = step.get("to") or "-"
        via = f" via {step['gate_via']}" if step.get("gate_via") else ""
        lines.append(f"  {step.get('step')!s:>4}  {step.get('state')} -> {target}  ({step.get('policy')}{via})")
    open_call = result.pending_step
    while open_call:  # a suspension inside called machines: the calls left open, innermost last
        inner = open_call.get("sub_trace") or []
        finished = sum(1 for step in inner if step.get("step") is not None)
        lines.append(
            f"     …  {open_call.get('state')} -> suspended inside {open_call.get('suspended_in')} "
            f"after {finished} step{'s' if finished != 1 else ''} there"
        )
        open_call = next((step for step in inner if step.get("suspended_in")), None)
    if result.status == "done":
        lines.append(f"done: {json.dumps(result.result, ensure_ascii=False, default=str)}")
    elif result.status == "halt":
        lines.append(f"halt: {result.error}" + (f" at {result.at}" if result.at else ""))
        if result.diagnosis:
            lines.append(
                f"  most visited: {result.diagnosis['most_visited_state']} ({result.diagnosis['visits']} entries)"
            )
    elif result.status == "in_doubt":
        lines.append(f"in doubt: {result.error}")
        lines.append("  settle it with: mkl resume --resolve completed=VALUE | retry | abort")
    else:
        where = f" in called machine '{result.machine}'" if result.machine else ""
        lines.append(f"suspended ({result.error}) at {result.at}{where}")
        if result.error == "budget-exhausted":
            whose = f"'{result.machine}'" if result.machine else "the run"
            lines.append(f"  more steps: mkl resume … --max-steps N (the new budget of {whose})")
        if result.ask:
            lines.append(f"  asks: {result.ask}  (reply lands at {result.reply_to})")
        if result.question:
            lines.append(f"  the model asks (model output): {result.question}")
            lines.append("  answer with: mkl resume … --reply TEXT")
    return "\n".join(lines)


def _finish(args: argparse.Namespace, outcome: runs.Outcome, checkpoint: str | None, written: str | None = None) -> int:
    """Print the outcome and its status line; ``written`` names a checkpoint the caller already updated."""
    if checkpoint:
        envelope.write_file(checkpoint, outcome.envelope())
    result = outcome.result
    if not args.quiet:
        print(describe(result))
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
        "checkpoint": checkpoint or written,
        "calls": outcome.calls,
    }
    if result.machine:
        status["called_machine"] = result.machine  # the suspension is inside it: `at` is its state
    if outcome.in_doubt:
        status["in_doubt"] = outcome.in_doubt
    emit_status(status)
    return STATUS_EXIT[result.status]


def _model_config(args: argparse.Namespace) -> ModelConfig:
    try:
        return load_config(overrides={"model": args.model, "api_base": args.api_base})
    except ConfigError as exc:
        raise UsageFailure(str(exc)) from None


def _preflight(config: ModelConfig, machine: Machine | None) -> None:
    """A model that cannot be called says what to set, in one line, before anything runs."""
    tiers = {machine.tier_of(state) for state in machine.states.values()} if machine else set()
    for tier in sorted(tiers) or ["balanced"]:
        model = config.model_for(tier)
        if not model:
            raise UsageFailure(
                f"no model is configured for tier '{tier}': set MKL_MODEL or MKL_MODEL_"
                f"{tier.upper()}, pass --model, or pass --script FILE for scripted answers"
            )
        if config.api_base_for(tier):
            continue  # local and OpenAI-compatible servers often need no real key
        missing = missing_keys(model)
        if missing:
            raise UsageFailure(f"model {model} needs {' and '.join(missing)}: set it in the environment")


def _oracle(args: argparse.Namespace, machine: Machine | None = None, *, needs_model: bool = False) -> Oracle:
    if args.script:
        model: Oracle = load_script(args.script)
    else:
        config = _model_config(args)
        if config.configured:
            if needs_model:
                _preflight(config, machine)
            model = LiteLLMOracle(config)
        elif needs_model:
            raise UsageFailure(NO_MODEL)
        else:
            model = NoModelOracle(NO_MODEL)
    if args.tools:
        _load_tools(args.tools)
    return HostOracle(model, default_registry)


def _load_tools(path: str) -> None:
    if not Path(path).is_file():
        raise UsageFailure(f"--tools {path}: no such file")
    try:
        runpy.run_path(path, run_name="mkl_tools")
    except Exception as exc:
        raise UsageFailure(f"--tools {path}: failed to load ({type(exc).__name__}: {exc})") from None


def run_command(args: argparse.Namespace) -> int:
    path = Path(args.file)
    machine = load_file(path)
    host_values = merge(parse_input(args.input), parse_assignments(args.set))
    store = _store(args)
    is_new = args.fresh or not args.run_id or not store.exists(args.run_id)
    oracle = _oracle(args, machine, needs_model=is_new)
    options = RunOptions(
        cost_budget=args.max_tokens,
        max_steps=args.max_steps,
        suspendable=args.suspend,
        hitl="all" if args.hitl else "none",
        on_untrusted_flow=args.on_untrusted_flow,
        ask_human=args.ask_human,
    )
    outcome = runs.start(
        machine,
        oracle,
        store=store,
        run_id=args.run_id,
        registry=sibling_registry(path, machine),
        input=host_values,
        options=options,
        fresh=args.fresh,
        origin={"path": str(path.resolve())},
    )
    return _finish(args, outcome, args.checkpoint)


def _reply(args: argparse.Namespace, waiting_at: str | None) -> tuple[bool, Any]:
    if args.reply is not None and args.set:
        raise UsageFailure("give the reply once: --reply TEXT or --set PATH=TEXT")
    if args.reply is not None:
        return True, args.reply
    if not args.set:
        return False, None
    values = parse_assignments(args.set)
    if waiting_at is None:
        raise UsageFailure("this run is not waiting for a reply, so --set has nothing to answer")
    value: Any = values
    for part in waiting_at.split("."):
        if not isinstance(value, dict) or part not in value or len(value) != 1:
            given = ", ".join(a.partition("=")[0] for a in args.set)
            raise UsageFailure(
                f"the run is waiting for a reply at '{waiting_at}'; --set {given} does not "
                f"answer it (use --set {waiting_at}=TEXT or --reply TEXT)"
            )
        value = value[part]
    return True, value


def _resolve(text: str | None) -> tuple[str, Any] | None:
    if text is None:
        return None
    action, sep, value = text.partition("=")
    if action == "completed" and sep:
        return action, value
    if action in ("retry", "abort") and not sep:
        return action, None
    raise UsageFailure(f"--resolve takes completed=VALUE, retry or abort, not {text!r}")


def _changed_machines(start: dict[str, Any], pins: dict[str, Any]) -> tuple[list[str], dict[str, Machine]]:
    """Machines whose file changed since the run pinned them, and the current machines."""
    origin = (start.get("origin") or {}).get("path")
    if not origin or not Path(origin).is_file():
        return [], {}
    try:
        current_root = load_file(origin, strict=False)
    except Exception:  # an unloadable edit counts as a change; the pinned copy still runs
        return [start.get("root", "")], {}
    current = sibling_registry(Path(origin), current_root)
    changed = [name for name, pin in pins.items() if name in current and current[name].sha256 != pin["sha256"]]
    return changed, current


def _waiting_for(records: list[dict[str, Any]]) -> str | None:
    last = next((r for r in reversed(records) if r.get("t") in ("suspend", "finish")), None)
    if last and last.get("t") == "suspend" and last.get("pos"):
        return last.get("reply_to") or "human.reply"
    return None


def _import_checkpoint(store: SQLiteStore, header: dict[str, Any], records: list[dict[str, Any]], source: str) -> str:
    run_id = str(header["run_id"])
    if store.exists(run_id):
        held = store.read(run_id)
        held_text = [canonical(r) for r in held]
        given_text = [canonical(r) for r in records]
        if held_text[: len(given_text)] == given_text:
            return run_id  # the store is as far along or further
        if given_text[: len(held_text)] != held_text:
            raise UsageFailure(
                f"run '{run_id}' in {store.path} has a different history than {source}; "
                "pass --store PATH to resume it in another store"
            )
    return runs.import_envelope(store, header, records)


def resume_command(args: argparse.Namespace) -> int:
    if bool(args.target) == bool(args.run_id):
        raise UsageFailure("name the run to resume: a checkpoint file, a notebook with --run ID, or --id RUN")
    if args.target and args.target.endswith(".ipynb"):
        return _resume_notebook(args)
    if args.notebook_run:
        raise UsageFailure("--run names a run inside a notebook; give the notebook file too")
    store = _store(args)
    if not args.target:
        return _finish(args, _resume(args, store, args.run_id), args.checkpoint)
    lock = store.path.parent / "locks" / (Path(args.target).resolve().name + ".checkpoint.lock")
    with file_lease(lock, f"checkpoint {args.target}"):
        header, records = envelope.read_file(args.target)
        run_id = _import_checkpoint(store, header, records, args.target)
        outcome = _resume(args, store, run_id)
        envelope.write_file(args.target, outcome.envelope())
    return _finish(args, outcome, args.checkpoint, written=args.target)


def _resume(args: argparse.Namespace, store: SQLiteStore, run_id: str) -> runs.Outcome:
    records = store.read(run_id)
    has_reply, reply = _reply(args, _waiting_for(records))
    pins = next((r.get("machines") for r in reversed(records) if r.get("t") in ("start", "rerun")), {}) or {}
    changed, current = _changed_machines(records[0], pins)
    if changed and not args.force:
        raise UsageFailure(
            f"machine {', '.join(repr(name) for name in changed)} changed since run '{run_id}' "
            "started; pass --force to resume with the edited machine"
        )
    return runs.resume(
        run_id,
        _oracle(args),
        store=store,
        reply=reply,
        has_reply=has_reply,
        max_steps=args.max_steps,
        max_tokens=args.max_tokens,
        resolve=_resolve(args.resolve),
        registry=current if changed else None,
    )


def _resume_notebook(args: argparse.Namespace) -> int:
    """Resume a run carried by a notebook nobody has open, and write its new checkpoint back into it."""
    notebook = Path(args.target)
    if not args.notebook_run:
        runs_here = ", ".join(run.run_id for run in nbfile.embedded_runs(notebook)) or "none"
        raise UsageFailure(f"name the run to resume with --run ID (runs in {notebook}: {runs_here})")
    store = _store(args)
    lock = store.path.parent / "locks" / (notebook.resolve().name + ".notebook.lock")
    with file_lease(lock, f"notebook {notebook}"):
        embedded = nbfile.find_run(notebook, args.notebook_run)
        run_id = _import_checkpoint(store, embedded.header, embedded.records, str(notebook))
        outcome = _resume(args, store, run_id)
        machines = runs.machines_from_pins(JournalIndex.build(outcome.records).machines, run_id)
        machine = machines.get(str(embedded.header.get("machine")))
        nbfile.write_run(notebook, embedded, run_bundle(run_id, machine, outcome.result, envelope=outcome.envelope()))
    return _finish(args, outcome, args.checkpoint, written=str(notebook))


def runs_command(args: argparse.Namespace) -> int:
    if args.store.endswith(".ipynb"):
        return _notebook_runs(Path(args.store))
    path = Path(args.store)
    if not path.is_file():
        raise UsageFailure(f"{path}: no such run store")
    summaries = SQLiteStore(path).runs()
    for summary in summaries:
        where = f" at {summary.at}" if summary.at else ""
        error = f" ({summary.error})" if summary.error else ""
        print(f"{summary.run_id}  {summary.machine}  {summary.status}{error}{where}")
    if not summaries:
        print(f"{path}: no runs")
    emit_status(
        {
            "runs": [
                {"run": s.run_id, "machine": s.machine, "status": s.status, "error": s.error, "at": s.at}
                for s in summaries
            ]
        }
    )
    return 0


def _notebook_runs(path: Path) -> int:
    embedded, damaged = nbfile.scan(path)
    for run in embedded:
        header = run.header
        where = f" at {header.get('at')}" if header.get("at") else ""
        error = f" ({header.get('error')})" if header.get("error") else ""
        ask = f" — asks: {header.get('ask')}" if header.get("ask") else ""
        print(f"{run.run_id}  {header.get('machine')}  {header.get('status')}{error}{where}{ask}")
    for bad in damaged:
        print(f"{bad.run_id or '?'}  damaged checkpoint in cell {bad.cell_index + 1}: not used ({bad.reason})")
    if not embedded and not damaged:
        print(f"{path}: no run checkpoints")
    listing = [
        {
            "run": r.run_id,
            "machine": r.header.get("machine"),
            "status": r.header.get("status"),
            "error": r.header.get("error"),
            "at": r.header.get("at"),
            "ask": r.header.get("ask"),
            "reply_to": r.header.get("reply_to"),
            "cell": r.cell_index + 1,
        }
        for r in embedded
    ]
    listing += [
        {"run": bad.run_id, "status": "damaged", "error": bad.reason, "cell": bad.cell_index + 1} for bad in damaged
    ]
    emit_status({"runs": listing})
    return EXIT_FAILED if damaged else 0
