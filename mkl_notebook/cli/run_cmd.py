"""``mkl run``, ``mkl resume`` and ``mkl runs``: durable runs from the command line."""

from __future__ import annotations

import argparse
import json
import runpy
from pathlib import Path
from typing import Any

from ..durable import envelope, runs
from ..durable.records import canonical
from ..durable.stores import DEFAULT_STORE, SQLiteStore, file_lease
from ..engine.options import RunOptions
from ..engine.oracle import Oracle, OracleError
from ..engine.result import RunResult
from ..host import HostOracle, default_registry
from ..lang.loader import load_file
from ..lang.model import Machine
from ..testing import sibling_registry
from .common import (
    STATUS_EXIT,
    UsageFailure,
    emit_status,
    load_script,
    merge,
    parse_assignments,
    parse_input,
    positive_int,
)

NO_MODEL = ("no model is configured: pass --script FILE to run offline with scripted answers "
            "(a real model arrives with MKL_MODEL)")


class NoModelOracle(Oracle):
    """Stands in when neither a script nor a model is configured: replays work, new calls explain."""

    def ask(self, request: Any) -> Any:
        if request.kind == "reply":
            from ..engine.oracle import AwaitingHuman

            raise AwaitingHuman(request.position)
        raise OracleError(f"provider-error: {NO_MODEL}")


def add_parsers(commands: argparse._SubParsersAction) -> None:
    run = commands.add_parser("run", help="run a machine (durably: re-running an id replays it)")
    run.add_argument("file", help="a .mkl machine file")
    run.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                     help="a host value for a context key (dotted keys nest); repeatable")
    run.add_argument("--input", metavar="JSON", help="a JSON object of host values (or @file.json)")
    _common(run)
    run.add_argument("--suspend", action="store_true", help="suspend instead of halting when a budget runs out")
    hitl = run.add_mutually_exclusive_group()
    hitl.add_argument("--hitl", action="store_true", help="every escalate gate suspends for a person")
    hitl.add_argument("--no-hitl", action="store_true", help="escalate gates route as authored (the default)")
    run.add_argument("--on-untrusted-flow", choices=("report", "halt"), default="report",
                     help="what an effectful tool reached by a tainted decision does")
    run.add_argument("--fresh", action="store_true", help="start the run id over, forgetting its journal")
    run.set_defaults(handler=run_command)

    resume = commands.add_parser("resume", help="continue a suspended or in-doubt run")
    resume.add_argument("checkpoint", nargs="?", help="a checkpoint file written by --checkpoint")
    resume.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="the reply, at the path the run is waiting on (e.g. --set human.reply=approve)")
    resume.add_argument("--reply", metavar="TEXT", help="the reply, wherever the run is waiting for it")
    resume.add_argument("--resolve", metavar="completed=VALUE|retry|abort",
                        help="settle an in-doubt tool call")
    resume.add_argument("--force", action="store_true", help="resume even though a machine file changed")
    _common(resume)
    resume.set_defaults(handler=resume_command)

    listing = commands.add_parser("runs", help="list the runs in a store")
    listing.add_argument("store", nargs="?", default=str(DEFAULT_STORE), help="a run store (default .mkl/runs.sqlite)")
    listing.set_defaults(handler=runs_command)


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--id", dest="run_id", metavar="RUN", help="the run id (default: a new one for run)")
    parser.add_argument("--store", metavar="PATH", help=f"the run store (default {DEFAULT_STORE})")
    parser.add_argument("--checkpoint", metavar="PATH", help="also write the run's checkpoint envelope here")
    parser.add_argument("--script", metavar="FILE", help="scripted oracles (llm/tools/hooks) to run offline")
    parser.add_argument("--tools", metavar="FILE.py", help="a Python file whose @mkl_notebook.tool / .hook "
                        "functions the run may call")
    parser.add_argument("--max-steps", type=positive_int, metavar="N", help="step budget (replaces budget:)")
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
    if result.status == "done":
        lines.append(f"done: {json.dumps(result.result, ensure_ascii=False, default=str)}")
    elif result.status == "halt":
        lines.append(f"halt: {result.error}" + (f" at {result.at}" if result.at else ""))
        if result.diagnosis:
            lines.append(f"  most visited: {result.diagnosis['most_visited_state']} "
                         f"({result.diagnosis['visits']} entries)")
    elif result.status == "in_doubt":
        lines.append(f"in doubt: {result.error}")
        lines.append("  settle it with: mkl resume --resolve completed=VALUE | retry | abort")
    else:
        lines.append(f"suspended ({result.error}) at {result.at}")
        if result.ask:
            lines.append(f"  asks: {result.ask}  (reply lands at {result.reply_to})")
    return "\n".join(lines)


def _finish(args: argparse.Namespace, outcome: runs.Outcome, checkpoint: str | None) -> int:
    if checkpoint:
        envelope.write_file(checkpoint, outcome.envelope())
    result = outcome.result
    if not args.quiet:
        print(describe(result))
    status: dict[str, Any] = {
        "status": result.status, "error": result.error, "at": result.at, "ask": result.ask,
        "reply_to": result.reply_to, "result": result.result, "usage": result.usage, "run": outcome.run_id,
        "checkpoint": checkpoint, "calls": outcome.calls,
    }
    if outcome.in_doubt:
        status["in_doubt"] = outcome.in_doubt
    emit_status(status)
    return STATUS_EXIT[result.status]


def _oracle(args: argparse.Namespace) -> Oracle:
    model = load_script(args.script) if args.script else NoModelOracle()
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
    if not args.script and (args.fresh or not args.run_id or not store.exists(args.run_id)):
        raise UsageFailure(NO_MODEL)
    options = RunOptions(cost_budget=args.max_tokens, max_steps=args.max_steps, suspendable=args.suspend,
                         hitl="all" if args.hitl else "none", on_untrusted_flow=args.on_untrusted_flow)
    outcome = runs.start(machine, _oracle(args), store=store, run_id=args.run_id,
                         registry=sibling_registry(path, machine), input=host_values, options=options,
                         fresh=args.fresh, origin={"path": str(path.resolve())})
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
            raise UsageFailure(f"the run is waiting for a reply at '{waiting_at}'; --set {given} does not "
                               f"answer it (use --set {waiting_at}=TEXT or --reply TEXT)")
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


def _import_checkpoint(store: SQLiteStore, header: dict[str, Any], records: list[dict[str, Any]],
                       source: str) -> str:
    run_id = str(header["run_id"])
    if store.exists(run_id):
        held = store.read(run_id)
        held_text = [canonical(r) for r in held]
        given_text = [canonical(r) for r in records]
        if held_text[:len(given_text)] == given_text:
            return run_id  # the store is as far along or further
        if given_text[:len(held_text)] != held_text:
            raise UsageFailure(f"run '{run_id}' in {store.path} has a different history than {source}; "
                               "pass --store PATH to resume it in another store")
    return runs.import_envelope(store, header, records)


def resume_command(args: argparse.Namespace) -> int:
    if bool(args.checkpoint) == bool(args.run_id):
        raise UsageFailure("name the run to resume: a checkpoint file, or --id RUN (with --store)")
    store = _store(args)
    checkpoint_out = args.checkpoint
    if args.checkpoint:
        lock = store.path.parent / "locks" / (Path(args.checkpoint).resolve().name + ".checkpoint.lock")
        with file_lease(lock, f"checkpoint {args.checkpoint}"):
            header, records = envelope.read_file(args.checkpoint)
            run_id = _import_checkpoint(store, header, records, args.checkpoint)
            return _resume(args, store, run_id, checkpoint_out)
    return _resume(args, store, args.run_id, checkpoint_out)


def _resume(args: argparse.Namespace, store: SQLiteStore, run_id: str, checkpoint: str | None) -> int:
    records = store.read(run_id)
    has_reply, reply = _reply(args, _waiting_for(records))
    pins = next((r.get("machines") for r in reversed(records) if r.get("t") in ("start", "rerun")), {}) or {}
    changed, current = _changed_machines(records[0], pins)
    if changed and not args.force:
        raise UsageFailure(f"machine {', '.join(repr(name) for name in changed)} changed since run '{run_id}' "
                           "started; pass --force to resume with the edited machine")
    outcome = runs.resume(run_id, _oracle(args), store=store, reply=reply, has_reply=has_reply,
                          max_steps=args.max_steps, max_tokens=args.max_tokens, resolve=_resolve(args.resolve),
                          registry=current if changed else None)
    return _finish(args, outcome, checkpoint)


def runs_command(args: argparse.Namespace) -> int:
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
    emit_status({"runs": [{"run": s.run_id, "machine": s.machine, "status": s.status, "error": s.error,
                           "at": s.at} for s in summaries]})
    return 0
