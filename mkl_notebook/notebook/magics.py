"""``%%mkl`` and ``%mkl …``: thin magics over the session API.

User mistakes raise IPython's own ``UsageError`` (one line, no traceback).
Python values reach a run through ``$var`` and ``{expr}`` in flags, and
``--input $dict`` passes the object itself.
"""

from __future__ import annotations

import argparse
import html
import re
import shlex
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any, NoReturn

from IPython.core.error import UsageError
from IPython.core.magic import Magics, line_cell_magic, magics_class, no_var_expand
from IPython.display import display
from traitlets import Unicode, observe

from ..app import oracles
from ..app.batch import DEFAULT_CONCURRENCY
from ..app.errors import USER_ERRORS, UsageProblem
from ..app.executors import check_executor
from ..app.replies import who
from ..app.runs import HITL_MODES, spent_on
from ..app.trust import Untrusted
from ..app.values import host_input, merge, parse_assignments, parse_input
from ..app.waiting import waiting_questions
from ..durable.runs import plan_run
from ..lang import stdlib
from ..lang.check import check
from ..lang.model import TIERS
from ..providers.secrets import shown_url
from ..render import views
from ..render.batch_views import answered_bundle as batch_answered_bundle
from ..render.batch_views import waiting_bundle as batch_waiting_bundle
from ..render.diagram import diagram_bundle
from ..render.plan_views import plan_bundle
from ..testing import run_all, scenarios_from_file
from .batch import Batch, BatchForm, run_batch
from .display import RunView, what_happened
from .form import Superseded
from .session import Run, Session, current_session

MODEL_SETTINGS = ("model", "fast", "balanced", "reasoning", "judge", "api_base", "timeout", "retries")
SUBCOMMANDS = (
    "run",
    "map",
    "plan",
    "resume",
    "runs",
    "trace",
    "visits",
    "pending",
    "forget",
    "check",
    "test",
    "stdlib",
    "load",
    "models",
    "config",
    "help",
)
_WHOLE_VAR = re.compile(r"^\$([A-Za-z_]\w*)$")
_INLINE = re.compile(r"\$([A-Za-z_]\w*)|\{([^{}]+)\}")

HELP = """\
%%mkl                     define (or redefine) the machine named by `machine:` in the cell
%%mkl run [flags]         define it and run it
%mkl run NAME [flags]     run a defined machine; flags:
    --id RUN  --set key=value  --input $dict  --hitl | --no-hitl  --suspend
    --max-steps N  --max-tokens N  --max-cost USD  --script FILE  --model MODEL  --fresh  --notebook PATH
    --trust-file (take up the notebook's copy of the run though no key you trust sealed it)
    --executor dask|dask://ADDRESS (make the calls on this kernel's Dask client, or a scheduler's)
%mkl map NAME --over $rows|ROWS.jsonl|.csv  one run per row (a list of dicts, a DataFrame or a file);
    --key COLUMN  --id BATCH  --concurrency N, and run's flags; one form for all the rows' questions
%mkl resume RUN [--question ID (--reply TEXT | --set path=value) [--as NAME]] [--max-steps N] [--max-tokens N]
               [--max-cost USD] [--resolve completed=VALUE|retry|abort] [--trust-file]
%mkl runs | pending       list runs / runs waiting for a person (with their forms)
%mkl pending --all [DIR]  every question waiting in the notebooks and stores under DIR (default: here)
%mkl trace RUN [--all]    a run's steps: the first and last 20 of a long trace, or with --all every one
%mkl visits RUN [--all]   entries per state: the 40 states entered most of a big machine, or with --all every one
%mkl plan RUN             what running RUN again would replay, call anew and ask again, with the machines as defined now
%mkl forget RUN           delete a run from this kernel's store and from the notebook's metadata
%mkl check NAME           static findings with line numbers
%mkl stdlib [NAME]        the standard library's machines (call: std_cot, ...); one's diagram and source
%mkl load FILE.mkl        define the machine of a file (and the machines beside it that it calls)
%mkl models               the model each tier maps to, and where that was set
%mkl test NAME --script FILE   scripted scenarios, as a pass/fail table
%mkl config [key=value]   show or change settings: store, hitl, user, max_workers, and models:
                          model, fast, balanced, reasoning, judge, api_base, timeout, retries
                          (also %config MklMagics.model = "openai/gpt-4o-mini")
"""


def _split(line: str) -> list[str]:
    """Shell-style words, keeping each unquoted ``{python expression}`` whole and untouched."""
    pieces: list[str] = []
    expressions: list[str] = []
    quote = ""
    index = 0
    while index < len(line):
        char = line[index]
        if quote:
            quote = "" if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char == "{":
            depth, end = 0, index
            while end < len(line):
                depth += {"{": 1, "}": -1}.get(line[end], 0)
                if depth == 0:
                    break
                end += 1
            if depth == 0:
                pieces.append(f"\x00{len(expressions)}\x00")
                expressions.append(line[index : end + 1])
                index = end + 1
                continue
        pieces.append(char)
        index += 1
    words = shlex.split("".join(pieces))
    return [re.sub(r"\x00(\d+)\x00", lambda m: expressions[int(m.group(1))], word) for word in words]


class _HelpShown(Exception):
    pass


@contextmanager
def _running(view: RunView) -> Iterator[None]:
    """While a run advances in a cell: an interrupt ends in one line naming where and how to go on, and
    neither it nor an error leaves the live "running" line behind."""
    try:
        yield
    except KeyboardInterrupt:
        where = f" at state '{view.last_state}'" if view.last_state else ""
        line = (
            f"run '{view.run_id}' was interrupted{where} after {view.last_steps} step(s); every answer so far "
            "is journaled: run this cell again to continue from there"
        )
        view.stop(line)
        raise UsageError(line) from None
    except BaseException:
        view.stop("")  # the error itself shows below
        raise


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise UsageError(f"%mkl {self.prog}: {message}")

    def exit(self, status: int = 0, message: str | None = None) -> NoReturn:
        if message:
            raise UsageError(message.strip())
        raise _HelpShown

    def print_help(self, file: Any = None) -> None:
        print(self.format_help())


def _starting_flags(parser: argparse.ArgumentParser) -> None:
    """What every run a cell starts may be given: host values, hitl, budgets, where its answers come from."""
    parser.add_argument("--set", action="append", default=[])
    parser.add_argument("--input")
    hitl = parser.add_mutually_exclusive_group()
    hitl.add_argument("--hitl", action="store_true")
    hitl.add_argument("--no-hitl", action="store_true")
    parser.add_argument("--suspend", action="store_true")
    parser.add_argument("--max-steps")
    parser.add_argument("--max-tokens")
    parser.add_argument("--max-cost")
    parser.add_argument("--script")
    parser.add_argument("--fresh", action="store_true")
    parser.add_argument("--model")
    parser.add_argument("--executor")


def _run_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--id", dest="run_id")
    _starting_flags(parser)
    parser.add_argument("--notebook")
    parser.add_argument("--trust-file", action="store_true")


def _parsers() -> dict[str, argparse.ArgumentParser]:
    run = _Parser(prog="run", add_help=False)
    run.add_argument("name", nargs="?")
    _run_flags(run)
    resume = _Parser(prog="resume", add_help=False)
    resume.add_argument("run_id")
    resume.add_argument("--set", action="append", default=[])
    resume.add_argument("--reply")
    resume.add_argument("--question")
    resume.add_argument("--as", dest="by")
    resume.add_argument("--max-steps")
    resume.add_argument("--max-tokens")
    resume.add_argument("--max-cost")
    resume.add_argument("--resolve")
    resume.add_argument("--trust-file", action="store_true")
    one_run = {name: _Parser(prog=name, add_help=False) for name in ("trace", "visits", "forget", "plan")}
    for parser in one_run.values():
        parser.add_argument("run_id")
    for name in ("trace", "visits"):
        one_run[name].add_argument("--all", action="store_true", dest="full")
    pending = _Parser(prog="pending", add_help=False)
    pending.add_argument("--all", nargs="?", const=".", metavar="FOLDER")
    check_parser = _Parser(prog="check", add_help=False)
    check_parser.add_argument("name")
    library = _Parser(prog="stdlib", add_help=False)
    library.add_argument("name", nargs="?")
    load_parser = _Parser(prog="load", add_help=False)
    load_parser.add_argument("path")
    models = _Parser(prog="models", add_help=False)
    test = _Parser(prog="test", add_help=False)
    test.add_argument("name")
    test.add_argument("--script", required=True)
    mapped = _Parser(prog="map", add_help=False)
    mapped.add_argument("name")
    mapped.add_argument("--over", required=True)
    mapped.add_argument("--key")
    mapped.add_argument("--id", dest="batch")
    mapped.add_argument("--concurrency", type=int, default=DEFAULT_CONCURRENCY)
    _starting_flags(mapped)
    parsers = {"run": run, "map": mapped, "resume": resume, "pending": pending, "check": check_parser, "test": test}
    return {**parsers, "stdlib": library, "load": load_parser, "models": models, **one_run}


@magics_class
class MklMagics(Magics):
    """Also configurable: ``%config MklMagics.model = "openai/gpt-4o-mini"`` (and judge_model, api_base)."""

    model = Unicode(None, allow_none=True, help="litellm model for every tier").tag(config=True)
    judge_model = Unicode(None, allow_none=True, help="litellm model for judge calls").tag(config=True)
    api_base = Unicode(None, allow_none=True, help="base URL of an OpenAI-compatible server").tag(config=True)

    def __init__(self, shell: Any, session: Session) -> None:
        self.session = session
        super().__init__(shell)
        self.parsers = _parsers()

    @observe("model", "judge_model", "api_base")
    def _model_setting(self, change: Any) -> None:
        key = {"model": "model", "judge_model": "judge", "api_base": "api_base"}[change["name"]]
        if change["new"]:
            self.session.model_overrides[key] = change["new"]
        else:
            self.session.model_overrides.pop(key, None)

    # -- values from the user's namespace ------------------------------------------------

    @property
    def _namespace(self) -> dict[str, Any]:
        assert self.shell is not None  # magics are registered with a shell
        return self.shell.user_ns

    def _object(self, token: str) -> Any:
        """``$name`` is the object itself; ``{expr}`` evaluates; anything else is text."""
        whole = _WHOLE_VAR.match(token)
        if whole:
            name = whole.group(1)
            if name not in self._namespace:
                raise UsageError(f"there is no Python variable named '{name}'")
            return self._namespace[name]
        return self._text(token)

    def _text(self, token: str) -> str:
        def value(match: re.Match[str]) -> str:
            name, expr = match.group(1), match.group(2)
            if name is not None:
                if name not in self._namespace:
                    raise UsageError(f"there is no Python variable named '{name}'")
                return str(self._namespace[name])
            try:
                return str(eval(expr, self._namespace))  # the notebook's own expression, like IPython's {expr}
            except Exception as exc:
                raise UsageError(f"{{{expr}}} could not be evaluated: {type(exc).__name__}: {exc}") from None

        return _INLINE.sub(value, token)

    def _input(self, token: str | None) -> dict[str, Any]:
        """``--input $dict``, ``--input {python expression}``, or JSON text (or ``@file.json``)."""
        if token is None:
            return {}
        if _WHOLE_VAR.match(token):
            return host_input(self._object(token))
        if token.startswith("{") and token.endswith("}"):
            try:
                return parse_input(token)
            except UsageProblem:
                pass  # not JSON: the notebook's own Python expression
            try:
                value = eval(token[1:-1], self._namespace)
            except Exception as exc:
                raise UsageError(f"--input {token} could not be evaluated: {type(exc).__name__}: {exc}") from None
            return host_input(value)
        return parse_input(token)

    def _assignments(self, items: Sequence[str]) -> dict[str, Any]:
        return parse_assignments(
            items, convert=lambda raw: self._object(raw) if _WHOLE_VAR.match(raw) else self._text(raw)
        )

    # -- the magic -------------------------------------------------------------------------

    @no_var_expand
    @line_cell_magic
    def mkl(self, line: str, cell: str | None = None) -> Run | Batch | None:
        """mkl machines in notebooks: %%mkl to define, %mkl run/resume/… to run (see %mkl help).

        ``%mkl run`` and ``%mkl resume`` give the :class:`Run` (``r = %mkl run …``); a cell ending with
        one shows the run's view once, where it was drawn live.
        """
        try:
            words = _split(line)
        except ValueError as exc:
            raise UsageError(f"%mkl: {exc} in: {line}") from None
        try:
            if cell is not None:
                return self._cell(words, cell)
            return self._line(words)
        except USER_ERRORS as exc:
            raise UsageError(str(exc)) from None
        except _HelpShown:
            return None

    def _cell(self, words: list[str], cell: str) -> Run | None:
        if words and words[0] != "run":
            raise UsageError("%%mkl takes no arguments to define a machine, or 'run [flags]' to define and run it")
        machine = self.session.define(cell)
        if not words:
            self._show_definition(machine)
            return None
        args = self._parse("run", words[1:])
        if args.name and args.name != machine.name:
            raise UsageError(
                f"%%mkl run defines '{machine.name}'; drop the name '{args.name}' or run it with %mkl run {args.name}"
            )
        return self._run(machine.name, args)

    def _line(self, words: list[str]) -> Run | Batch | None:
        if not words or words[0] == "help":
            print(HELP)
            return None
        command, rest = words[0], words[1:]
        if command not in SUBCOMMANDS:
            raise UsageError(f"%mkl: unknown subcommand '{command}'; use one of {', '.join(SUBCOMMANDS)}")
        given: Run | Batch | None = getattr(self, f"_cmd_{command}")(rest)
        return given

    def _parse(self, name: str, words: list[str]) -> argparse.Namespace:
        return self.parsers[name].parse_args(words)

    # -- subcommands -------------------------------------------------------------------------

    def _show_definition(self, machine: Any, *, calls_known: bool = False) -> None:
        """The machine's diagram and its warnings; with ``calls_known`` (its file's siblings are loaded) also a
        call to a machine that neither the notebook, the folder nor the standard library has."""
        known = self.session.machines if calls_known else None
        findings = [f for f in check(machine.source, known) if f.severity == "warning" or f.code == "unknown-call"]
        display(diagram_bundle(machine), raw=True)
        for finding in findings:
            print(f"line {finding.line}: {finding.severity}: {finding.message}")

    def _cmd_run(self, words: list[str]) -> Run | None:
        args = self._parse("run", words)
        if not args.name:
            raise UsageError("%mkl run needs a machine name (or use %%mkl run in the machine's cell)")
        return self._run(self._text(args.name), args)

    def _run(self, name: str, args: argparse.Namespace) -> Run | None:
        self.session.machine(name)  # an unknown machine is a usage error before anything is drawn
        host_values = merge(self._input(args.input), self._assignments(args.set))
        hitl = "all" if args.hitl else "none" if args.no_hitl else None
        script = self._text(args.script) if args.script else None
        view = self._view(self._text(args.run_id) if args.run_id else name, self.session.machines.get(name))
        asked: dict[str, Any] = {
            "id": self._text(args.run_id) if args.run_id else None,
            "input": host_values,
            "hitl": hitl,
            "suspend": args.suspend,
            "max_steps": args.max_steps,
            "max_tokens": args.max_tokens,
            "max_cost": args.max_cost,
            "script": script,
            "fresh": args.fresh,
            "notebook": args.notebook,
            "model": self._text(args.model) if args.model else None,
            "observer": view.observer,
            "trust_file": args.trust_file,
            "executor": self._text(args.executor) if args.executor else None,
        }

        def again(**choice: Any) -> None:  # a button of the untrusted run's banner: run with that choice
            self.present(self.session.run(name, **{**asked, **choice}), view)

        view.start()
        try:
            with _running(view):
                run = self.session.run(name, **asked)
        except Untrusted as problem:
            choices = [("Take up the file's run", lambda: again(trust_file=True))]
            view.untrusted(problem, [*choices, ("Run it here afresh", lambda: again(fresh=True))])
            return None
        self.present(run, view)
        return run

    def _view(self, run_id: str, machine: Any) -> RunView:
        """The outputs of a run in the executing cell, which its forms' replies will belong to."""
        current = self.session.current_cell()
        path = self.session.notebook_path()
        cell = current[0] if current else None
        name = path.name if path else None
        return RunView(run_id, machine, cell=cell, notebook=name, signer=self.session.signer(), link=self.session.link)

    def present(self, run: Run, view: RunView) -> None:
        """Show a run and, when it waits for a person, a form whose click resumes it here."""

        def on_reply(value: Any, question: str | None) -> None:
            try:
                run.submit(value, question=question, via="form", observer=view.observer, form_of=view.cell)
            except USER_ERRORS:
                run.refresh()  # another path (a cell, another form, a CLI) moved the run on: every form catches up
                if run.question_id == question:
                    raise  # still the pending question: the refusal was about something else, and the form says so
                view.show(run, on_reply)
                raise Superseded(what_happened(run, question)) from None
            view.show(run, on_reply)

        view.show(run, on_reply)
        run.drawn_in = self.shell.execution_count if self.shell is not None else None

    def _cmd_map(self, words: list[str]) -> Batch:
        args = self._parse("map", words)
        name = self._text(args.name)
        self.session.machine(name)  # an unknown machine is a usage error before anything is drawn
        over = self._object(args.over)
        bars: list[Any] = []  # drawn once the rows are counted
        shown: list[Any] = []

        def progress(done: int, total: int) -> None:
            if not bars:
                bars.append(_progress_bar(f"{name}: rows", total))
                shown.append(display(bars[0].container, display_id=True))
            bars[0].update(done - bars[0].n)

        try:
            result = run_batch(
                self.session,
                name,
                over,
                id=self._text(args.batch) if args.batch else None,
                key=self._text(args.key) if args.key else None,
                input=merge(self._input(args.input), self._assignments(args.set)),
                hitl="all" if args.hitl else "none" if args.no_hitl else None,
                suspend=args.suspend,
                max_steps=args.max_steps,
                max_tokens=args.max_tokens,
                max_cost=args.max_cost,
                script=self._text(args.script) if args.script else None,
                model=self._text(args.model) if args.model else None,
                concurrency=args.concurrency,
                fresh=args.fresh,
                progress=progress,
                executor=self._text(args.executor) if args.executor else None,
            )
        finally:
            for bar, handle in zip(bars, shown, strict=True):
                bar.close()
                ran = f"{name}: {bar.total} row{'s' if bar.total != 1 else ''} run"  # alike every time: no timings
                handle.update({"text/plain": ran, "text/html": f"<p><small>{html.escape(ran)}</small></p>"}, raw=True)
        result.progress = bars[0] if bars else None
        table = display(result.bundle(), raw=True, display_id=True)
        if table is not None:  # when the extension answers, the checkpoints leave the output for the metadata
            self.session.link.when_linked(lambda: table.update(result.bundle(), raw=True))
        current = self.session.current_cell()
        cell = current[0] if current else None
        waiting = result.waiting()
        if waiting:
            data = {row.run_id: row.input for row in result.rows}
            place: list[Any] = []

            def moved() -> None:
                if table is not None:
                    table.update(result.bundle(), raw=True)
                if place and place[0] is not None and not result.waiting():  # all answered: say what, here
                    place[0].update(batch_answered_bundle(result.answered_in(cell)), raw=True)

            form = BatchForm(waiting, data, moved, cell)
            stand_in = batch_waiting_bundle([(run.id, run.result_object) for run in waiting])
            place.append(display({**form.widget._repr_mimebundle_(), **stand_in}, raw=True, display_id=True))
            result.form = form
        else:
            answered = result.answered_in(cell)
            if answered:  # this cell's form answered them before: it says so again, as it did
                display(batch_answered_bundle(answered), raw=True)
        result.drawn_in = self.shell.execution_count if self.shell is not None else None
        return result

    def _cmd_resume(self, words: list[str]) -> Run:
        args = self._parse("resume", words)
        run = self.session.get_run(self._text(args.run_id), trust_file=args.trust_file)
        view = self._view(run.id, run.machine)
        view.start()
        with _running(view):
            run.resume(
                reply=self._text(args.reply) if args.reply is not None else None,
                set_values=self._assignments(args.set),
                question=self._text(args.question) if args.question else None,
                by=self._text(args.by) if args.by else None,
                max_steps=args.max_steps,
                max_tokens=args.max_tokens,
                max_cost=args.max_cost,
                resolve=args.resolve,
                observer=view.observer,
            )
        self.present(run, view)
        return run

    def _cmd_plan(self, words: list[str]) -> None:
        run_id = self._text(self._parse("plan", words).run_id)
        if not self.session.store.exists(run_id):
            raise UsageError(f"no run '{run_id}' in {self.session.store.location}")
        found = plan_run(self.session.store, run_id, dict(self.session.machines) or None)
        display(plan_bundle(found.as_dict()), raw=True)

    def _cmd_forget(self, words: list[str]) -> None:
        run_id = self._text(self._parse("forget", words).run_id)
        self.session.forget(run_id)
        print(f"Forgot run '{run_id}': it is gone from {self.session.store.location} and the notebook's metadata.")

    def _cmd_runs(self, words: list[str]) -> None:
        summaries = self.session.store.runs()
        store = self.session.store
        rows = [
            (s.run_id, s.machine, s.status, s.error or "", s.at or "", views.spent_cell(spent_on(store, s.run_id)))
            for s in summaries
        ]
        display(views.runs_bundle(rows), raw=True)

    def _cmd_pending(self, words: list[str]) -> None:
        args = self._parse("pending", words)
        if args.all is not None:
            questions, problems = waiting_questions(Path(self._text(args.all)))
            display(views.questions_bundle(questions, problems), raw=True)
            return
        answered = self.session.answered_here()  # re-executed: the runs this cell's forms answered, as left
        shown = {run.id for run in answered}
        waiting, untrusted = self.session.waiting()
        runs = answered + [run for run in waiting if run.id not in shown]
        if not runs and not untrusted:
            print("No run is waiting for a person.")
            return
        for run in runs:
            self.present(run, self._view(run.id, run.machine))
        for problem in untrusted:  # someone else's: shown with whose it is; taken up only by a click
            view = self._view(problem.run_id, None)

            def take_up(run_id: str = problem.run_id, view: RunView = view) -> None:
                run = self.session.get_run(run_id, trust_file=True)
                view.machine = run.machine
                self.present(run, view)

            view.untrusted(problem, [("Take up the file's run", take_up)])

    def _cmd_trace(self, words: list[str]) -> None:
        args = self._parse("trace", words)
        run = self.session.get_run(self._text(args.run_id))
        steps = run.result_object.trace_with_open_call()  # with a call a suspension left open, if any
        cap = replace(views.notebook_cap(run.id), full=args.full)
        display(
            {"text/html": views.trace_table_html(steps, cap=cap), "text/plain": views.trace_table_text(steps, cap=cap)},
            raw=True,
        )

    def _cmd_visits(self, words: list[str]) -> None:
        args = self._parse("visits", words)
        run = self.session.get_run(self._text(args.run_id))
        machine = run.machine
        if machine is None:
            raise UsageError(f"the machine of run '{run.id}' is not defined in this session")
        diagnosis = run.result_object.diagnosis
        cap = replace(views.notebook_cap(run.id), full=args.full)
        display(
            {
                "text/html": views.visits_table_html(machine, run.visits, diagnosis, cap=cap),
                "text/plain": views.visits_table_text(machine, run.visits, diagnosis, cap=cap),
            },
            raw=True,
        )

    def _cmd_check(self, words: list[str]) -> None:
        machine = self.session.machine(self._text(self._parse("check", words).name))
        findings = check(machine.source, callable_machines=self.session.machines)
        if not findings:
            print(f"{machine.name}: no findings")
        for finding in findings:
            print(f"line {finding.line}: {finding.severity}: {finding.message}")

    def _cmd_test(self, words: list[str]) -> None:
        args = self._parse("test", words)
        machine = self.session.machine(self._text(args.name))
        scenarios = scenarios_from_file(machine, Path(self._text(args.script)), dict(self.session.machines))
        outcomes = run_all(scenarios)
        display(
            {"text/html": views.scenario_table_html(outcomes), "text/plain": views.scenario_table_text(outcomes)},
            raw=True,
        )

    def _cmd_stdlib(self, words: list[str]) -> None:
        name = self._parse("stdlib", words).name
        if name is None:
            library = stdlib.machines()
            defined = self.session.machines
            shadowed = [n for n, m in library.items() if n in defined and defined[n].sha256 != m.sha256]
            html, text = views.library_html(library, shadowed), views.library_text(library, shadowed)
            display({"text/html": html, "text/plain": text}, raw=True)
            return
        name = self._text(name)
        if name not in stdlib.NAMES:
            raise UsageError(f"%mkl stdlib: no library machine '{name}'; the library has {', '.join(stdlib.NAMES)}")
        machine = stdlib.machine(name)
        display(diagram_bundle(machine), raw=True)
        display(
            {
                "text/markdown": f"```yaml\n{machine.source}```",
                "text/plain": machine.source,
            },
            raw=True,
        )

    def _cmd_load(self, words: list[str]) -> None:
        machine = self.session.load(self._text(self._parse("load", words).path))
        self._show_definition(machine, calls_known=True)

    def _cmd_models(self, words: list[str]) -> None:
        self._parse("models", words)
        config = self.session.model_config()
        rows = [(tier, config.model_for(tier), config.tiers[tier].source) for tier in TIERS]
        rows.append(("judge", config.judge, config.judge_source))
        width = max(len(model or "") for _, model, _ in rows) or 1
        for tier, model, source in rows:
            if model is None:
                unset = "(each state's tier model)" if tier == "judge" else "(not configured)"
                print(f"{tier:<9} {unset}")
            else:
                print(f"{tier:<9} {model:<{width}}  from {source}")
        if not config.configured:
            print("No tier has a model: runs need --script, or %mkl config model=… (docs/language.md §9).")

    def _cmd_config(self, words: list[str]) -> None:
        settings = self.session.settings
        for word in words:
            key, sep, value = word.partition("=")
            if not sep:
                raise UsageError(f"%mkl config takes key=value, got {word!r}")
            if key == "store":
                settings.store = Path(self._text(value))
                self.session.reset_store()
            elif key == "hitl":
                if value not in HITL_MODES:
                    raise UsageError(f"hitl must be one of {', '.join(HITL_MODES)}, not {value!r}")
                settings.hitl = value
            elif key == "user":
                settings.user = self._text(value) or None
            elif key == "executor":
                settings.executor = check_executor(self._text(value))
            elif key == "max_model_calls":
                if not value.isdigit() or int(value) < 1:
                    raise UsageError("max_model_calls is a whole number of at least 1")
                settings.max_model_calls = int(value)
            elif key == "max_workers":
                if not value.isdigit() or int(value) < 1:
                    raise UsageError("max_workers is a whole number of at least 1")
                settings.max_workers = int(value)
            elif key in MODEL_SETTINGS:
                candidate = {**self.session.model_overrides, key: self._text(value)}
                oracles.model_config(candidate)  # a bad value is refused before it is kept
                self.session.model_overrides[key] = self._text(value)
            else:
                raise UsageError(
                    f"unknown setting '{key}' (settings: store, hitl, user, max_workers, executor, max_model_calls, "
                    f"{', '.join(MODEL_SETTINGS)})"
                )
        config = self.session.model_config()
        tiers = ", ".join(f"{tier}={config.model_for(tier) or '—'}" for tier in TIERS)
        capped = f" (at most {settings.max_model_calls} model calls at once)" if settings.max_model_calls else ""
        print(
            f"store = {settings.store}\nhitl = {settings.hitl}\nuser = {settings.user or who()}\n"
            f"max_workers = {settings.max_workers or 'default'}\n"
            f"executor = {settings.executor or 'threads'}{capped}\n"
            f"models ({config.source}): {tiers}; judge={config.judge or 'same as tier'}; "
            f"api_base={shown_url(config.api_base) or '—'}"
        )


def _progress_bar(description: str, total: int) -> Any:
    """tqdm's notebook progress bar (a widget), or its text twin where widgets cannot be shown."""
    from tqdm.notebook import tqdm

    return tqdm(total=total, desc=description, unit="row", display=False)


def _executing_cell(shell: Any) -> tuple[str, str] | None:
    """The notebook cell the kernel executes now (JupyterLab names it in the request's metadata), and
    the request's id; None outside a cell's execution (a form's click, a plain IPython shell)."""
    kernel = getattr(shell, "kernel", None)
    parent = kernel.get_parent() if kernel is not None and hasattr(kernel, "get_parent") else None
    if not isinstance(parent, dict):
        return None
    header, metadata = parent.get("header") or {}, parent.get("metadata") or {}
    cell = metadata.get("cellId")
    if header.get("msg_type") != "execute_request" or not isinstance(cell, str) or not cell:
        return None
    return cell, str(header.get("msg_id") or "")


def load(shell: Any) -> MklMagics:
    session = current_session()
    session.user_ns = shell.user_ns
    session.current_cell = lambda: _executing_cell(shell)
    magics = MklMagics(shell, session)
    shell.register_magics(magics)
    session.link.open()  # the notebook's metadata, when the mkl-notebook JupyterLab extension is there
    if magics not in shell.configurables:
        shell.configurables.append(magics)  # so %config MklMagics.model = … works
    return magics
