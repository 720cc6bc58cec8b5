"""Freezing a real run into a scenario file (``mkl test freeze``, ``%mkl freeze``): its answers, each beside
what it answered, and the route and result they gave (docs/language.md §8, *Frozen runs*).

The run is read as a trace reads it (:meth:`Workspace.read`: the store, and the copies in reach reconciled
first), so a run only a notebook's metadata carries freezes from the ``.ipynb``. What the file holds is what the
run was asked and answered: no signature, key, secret, name or time; prompts lose their run's fence nonces and
any secret is masked. ``mkl test MACHINE --script FILE`` then replays it with no model.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from ..checkpoints import notebook_file as nbfile
from ..durable.outcome import Outcome
from ..durable.replay import JournalIndex
from ..durable.runs import read_run
from ..engine.oracle import HookRequest, JudgeRequest, OracleRequest, ProduceRequest, ReplyRequest, ToolRequest
from ..engine.taint import tool_class
from ..providers.frozen import plain_prompt
from ..providers.secrets import scrub
from .errors import UsageProblem
from .settings import Settings
from .workspace import Workspace

TRACE_KEYS = ("state", "policy", "to")  # a step's route: where it was, what its gate did, where it went


class FreezeProblem(UsageProblem):
    """A run that cannot be frozen, or a file that is not to be written (one line, exit 2)."""


@dataclass(frozen=True)
class Frozen:
    """What freezing a run wrote: the file, the run and its machine, how it ended, how many answers it holds."""

    path: Path
    run_id: str
    machine: str
    status: str
    answers: int

    def line(self, test_with: str) -> str:
        """What was written, and (``test_with``, the front end's own command) how to test it."""
        what = f"{self.machine}, {self.status}: {self.answers} answers"
        return f"froze run {self.run_id} ({what}) into {self.path}; {test_with}"


def _scrubbed(value: Any) -> Any:
    """``value`` with any secret in its text masked (what the file holds is for anyone who reads it)."""
    if isinstance(value, str):
        return scrub(value)
    if isinstance(value, Mapping):
        return {str(key): _scrubbed(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_scrubbed(item) for item in value]
    return value


def _reply_record(index: JournalIndex, request: ReplyRequest) -> Mapping[str, Any]:
    """The reply the journal gave ``request`` (the latest about what the person was shown, as a replay takes)."""
    given = index.replies.get(request.position) or [{}]
    return next((r for r in reversed(given) if r.get("about", request.about) == request.about), given[-1])


def _entry(request: OracleRequest, index: JournalIndex, tokens: bool) -> dict[str, Any]:
    entry: dict[str, Any] = {"at": request.position, "state": request.state}
    if isinstance(request, ReplyRequest):
        record = _reply_record(index, request)
        entry.update(ask=request.ask, reply=_scrubbed(record.get("value")))
        if isinstance(record.get("note"), str):
            entry["note"] = scrub(record["note"])
        return entry
    record = index.answers[request.position]
    answer = record.get("answer") or {}
    if isinstance(request, ProduceRequest):
        entry["prompt"] = plain_prompt(request.user)
        entry["produce"] = scrub(str(answer.get("text", "")))
        if tokens and record.get("usage"):
            entry["tokens"] = list(record["usage"])
    elif isinstance(request, JudgeRequest):
        choice = answer.get("choice")
        entry["gates"] = list(request.conditions)
        entry["judge"] = "none" if choice == len(request.conditions) else choice
    elif isinstance(request, ToolRequest):
        entry.update(tool=request.name, input=scrub(request.input_json), observation=_scrubbed(answer.get("value")))
    elif isinstance(request, HookRequest):
        entry.update(hook=request.name, verdict=bool(answer.get("value")))
    if "error" in record:  # the call failed, and is frozen failing as it did
        for key in ("produce", "judge", "observation", "verdict"):
            entry.pop(key, None)
        entry["error"] = scrub(str(record["error"]))
    return entry


def _run_options(options: Mapping[str, Any], index: JournalIndex) -> dict[str, Any]:
    """The scenario's ``run:`` block: the options the run had that change its route, with the class each tool
    had when it ran where that is not the one a test would give it (it decides what is fenced as outside text)."""
    run: dict[str, Any] = {}
    ran_as = {
        name: effect for name, effect in sorted(index.tool_effects.items()) if tool_class(name, {}, None) != effect
    }
    if tool_effects := {**ran_as, **(options.get("tool_effects") or {})}:
        run["tool_effects"] = tool_effects
    if options.get("hitl") in ("all", "asking"):
        run["hitl"] = options["hitl"]
    for key in ("cost_budget", "max_steps"):
        if options.get(key) is not None:
            run[key] = options[key]
    for key in ("suspendable", "ask_human", "trusted_keys"):
        if options.get(key):
            run[key] = options[key]
    if options.get("on_untrusted_flow") == "halt":
        run["on_untrusted_flow"] = "halt"
    return run


def _expect(outcome: Outcome) -> dict[str, Any]:
    result = outcome.result
    expect: dict[str, Any] = {"status": result.status}
    if result.status == "done":
        expect["result"] = _scrubbed(result.result)
    else:
        expect["error"] = scrub(str(result.error)) if result.error is not None else None
    if result.status == "suspended":
        expect.update(at=result.at, ask=result.ask, reply_to=result.reply_to)
    expect["trace"] = [{key: step.get(key) for key in TRACE_KEYS if key in step} for step in result.trace]
    return expect


def frozen_scenario(outcome: Outcome) -> dict[str, Any]:
    """The scenario file that replays ``outcome``'s run: its host values and options, every answer its journal
    gave (each beside what it answered, in the order the run asked) and what the run came to."""
    if outcome.result.status in ("running", "in_doubt"):
        raise FreezeProblem(
            f"run '{outcome.run_id}' is {outcome.result.status}: freeze a run that finished, halted or waits for a "
            "person"
        )
    index = JournalIndex.build(outcome.records)
    asked: list[OracleRequest] = []
    read_run(outcome.run_id, outcome.records, known=outcome.machines, told=asked.append)
    options = index.options
    scenario: dict[str, Any] = {
        "name": f"{outcome.root}-{outcome.run_id}",
        "description": f"run {outcome.run_id} of {outcome.root}, frozen by mkl test freeze",
    }
    for key in ("input", "context"):
        if index.setup.get(key):
            scenario[key] = _scrubbed(index.setup[key])
    if run := _run_options(options, index):
        scenario["run"] = run
    tokens = options.get("cost_budget") is not None
    written: dict[str, int] = {}  # where each answer is in the journal: branches running at once are told in any order
    for number, record in enumerate(outcome.records):
        written.setdefault(str(record.get("pos")), number)
    asked.sort(key=lambda request: written.get(request.position, len(written)))
    scenario["frozen"] = [_entry(request, index, tokens) for request in asked]
    scenario["expect"] = _expect(outcome)
    return {"scenarios": [scenario]}


class _BlockDumper(yaml.SafeDumper):
    """Block YAML that reads as written: text with line breaks as ``|`` blocks, keys in the order given, a
    list's items indented under their key."""

    def increase_indent(self, flow: bool = False, indentless: bool = False) -> None:
        super().increase_indent(flow, False)


def _text(dumper: yaml.SafeDumper, value: str) -> yaml.Node:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_BlockDumper.add_representer(str, _text)


def frozen_text(outcome: Outcome, data: Mapping[str, Any] | None = None) -> str:
    """The scenario file of ``outcome``'s run (``data``, else :func:`frozen_scenario`'s), as YAML with a header
    saying what it is and how to test it."""
    data = frozen_scenario(outcome) if data is None else data
    body = yaml.dump(data, Dumper=_BlockDumper, sort_keys=False, allow_unicode=True, width=100)
    return (
        f"# Run {outcome.run_id} of {outcome.root}, frozen: every answer it was given, beside what it answered,\n"
        f"# and the route and result they gave. Test it: mkl test {outcome.root}.mkl --script THIS_FILE\n"
        f"{body}"
    )


def _write_new(path: Path, text: str, force: bool) -> None:
    """Write ``text`` to ``path``; a file already there is written over only when forced (and then whole)."""
    if path.is_dir():
        raise FreezeProblem(f"{path}: is a folder; give -o the scenario file to write (NAME.test.yaml)")
    if not path.parent.is_dir():
        raise FreezeProblem(f"{path}: its folder {path.parent} does not exist")
    try:
        if not force:
            with path.open("x", encoding="utf-8") as handle:  # (never over a file made meanwhile)
                handle.write(text)
            return
        made, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        with os.fdopen(made, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.replace(temporary, path)
    except FileExistsError:
        raise FreezeProblem(f"{path}: exists; give --force to write over it, or another -o FILE") from None
    except OSError as exc:
        raise FreezeProblem(f"{path}: cannot be written ({exc.strerror or exc})") from None


def freeze(ws: Workspace, run_id: str, out: str | Path | None = None, *, force: bool = False) -> Frozen:
    """Freeze run ``run_id`` of ``ws`` (its store and the copies in reach) into the scenario file ``out``
    (default: ``MACHINE-RUN.test.yaml`` here)."""
    if out is not None and Path(out).exists() and not force:  # said before the run is read: a kept file is kept
        raise FreezeProblem(f"{out}: exists; give --force to write over it, or another -o FILE")
    outcome = ws.read(run_id)
    data = frozen_scenario(outcome)
    path = Path(out) if out is not None else Path(f"{outcome.root}-{outcome.run_id}.test.yaml")
    _write_new(path, frozen_text(outcome, data), force)
    return Frozen(path, outcome.run_id, outcome.root, outcome.status, len(data["scenarios"][0]["frozen"]))


def freeze_from_notebook(
    notebook: str | Path, run_id: str, out: str | Path | None, *, force: bool = False, trust_file: bool = False
) -> Frozen:
    """Freeze run ``run_id`` a notebook file carries: its copy is reconciled into a scratch store (so nothing but
    ``out`` is written), then read as a trace reads it."""
    nbfile.find_run(notebook, run_id)  # a notebook that cannot be read, or holds no such run: one line
    with (
        tempfile.TemporaryDirectory(prefix="mkl-freeze-") as scratch,
        Workspace(Settings(store=Path(scratch) / "runs.sqlite")) as ws,
    ):
        ws.take_up(run_id, str(notebook), trust_file)
        return freeze(ws, run_id, out, force=force)
