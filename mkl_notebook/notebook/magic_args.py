"""What a ``%mkl`` line says: its words, each subcommand's flags, and the Python values ``$var`` and ``{expr}`` name.

User mistakes raise IPython's own ``UsageError`` (one line, no traceback). Python values reach a run through
``$var`` (the object itself) and ``{expr}`` (evaluated in the notebook's namespace, as IPython does), in flags
and in ``--input``.
"""

from __future__ import annotations

import argparse
import re
import shlex
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

from IPython.core.error import UsageError

from ..app.errors import MklError, UsageProblem
from ..app.flags import FLAGS, INBOX, MAP, REPLYING, RUN, add_flags
from ..app.values import host_input, merge, parse_assignments, parse_input

SUBCOMMANDS = (
    "run",
    "map",
    "plan",
    "resume",
    "runs",
    "trace",
    "visits",
    "pending",
    "inbox",
    "audit",
    "diff",
    "forget",
    "check",
    "test",
    "freeze",
    "stdlib",
    "load",
    "models",
    "notebook",
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
    --retry (make the calls that failed again; a re-run otherwise replays a provider's failure as it was)
    --executor dask|dask://ADDRESS (make the calls on this kernel's Dask client, or a scheduler's)
    --deadline DURATION --on-timeout reject|approve|escalate:NAME --remind-after DURATION (a question's deadline)
    --on-untrusted-flow report|halt  --ask-human   (the flags `mkl run` shares mean the same, see `mkl run -h`)
%mkl map NAME --over $rows|ROWS.jsonl|.csv  one run per row (a list of dicts, a DataFrame or a file);
    --key COLUMN  --id BATCH  --concurrency N, and run's flags; one form for all the rows' questions
%mkl resume RUN [--question ID (--reply TEXT | --set path=value) [--as NAME] [--note TEXT]]
               [--max-steps N] [--max-tokens N] [--max-cost USD] [--resolve completed=VALUE|retry|abort] [--trust-file]
               [--script FILE | --model MODEL] (what answers the calls it still has to make)
%mkl runs                 the runs of this kernel's store: status, where, what each spent
%mkl pending              the runs waiting for a person, each with its form
%mkl pending --queue      the same questions in one review queue (filter, sort, approve the N shown)
%mkl pending --all [DIR]  every question waiting in the notebooks and stores under DIR (default: here)
%mkl inbox [DIR ...] [--store URL] [--mine] [--machine M] [--older-than 2h] [--overdue] [--full] [--json]
                          every question waiting in the notebooks and stores under DIR (default: here), the
                          stores named and this kernel's store: one row each, oldest first, with its command
%mkl audit [RUN|NOTEBOOK|DIR]  every answer given: question, value, who, key and signature, time to decide
%mkl trace RUN [--all]    a run's steps: the first and last 20 of a long trace, or with --all every one
%mkl visits RUN [--all]   entries per state: the 40 states entered most of a big machine, or with --all every one
%mkl diff RUN_A RUN_B [--json]  two runs side by side: where they part, each decision and output that
                          differs, what each spent (a RUN: this kernel's, or NOTEBOOK.ipynb:RUN, one a file carries)
%mkl plan RUN             what running RUN again would replay, call anew and ask again, with the machines as defined now
%mkl plan NAME --over DIR [--store S] [--json]   the same for every run of machine NAME in the notebooks and
                          stores under DIR (and the stores named): which answers people gave an edit puts at stake
%mkl forget RUN           delete a run from this kernel's store and from the notebook's metadata
%mkl check NAME           static findings with line numbers
%mkl stdlib [NAME]        the standard library's machines (call: std_cot, ...); one's diagram and source
%mkl load FILE.mkl        define the machine of a file (and the machines beside it that it calls)
%mkl models               the model each tier maps to, and where that was set
%mkl notebook [PATH]      which notebook this kernel runs and how it knows; with PATH, say which (as
                          MKL_NOTEBOOK=PATH does), where a headless client (papermill, nbconvert) leaves it unclear
%mkl test NAME --script FILE   scripted scenarios, as a pass/fail table
%mkl freeze RUN [-o FILE.test.yaml] [--force]  a run's answers, route and result as a scenario file to test with
%mkl config [key=value]   show or change settings: store, durability (process, or power: every record synced
                          to disk, as MKL_DURABILITY), hitl, user, approvers (who may answer runs started here,
                          as MKL_APPROVERS), deadline, on_timeout, remind_after (a question's deadline
                          rule, as MKL_DEADLINE, MKL_ON_TIMEOUT, MKL_REMIND_AFTER), max_workers, executor,
                          max_model_calls, otel (an OTLP/HTTP endpoint the runs' traces go to, or off; as
                          OTEL_EXPORTER_OTLP_ENDPOINT),
                          library (folders call: searches first, as MKL_LIBRARY_PATH), and models: model,
                          fast, balanced, reasoning, judge, api_base, timeout, retries
                          (also %config MklMagics.model = "openai/gpt-4o-mini")
%mkl help                 this list
"""


def split_words(line: str) -> list[str]:
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


class HelpShown(MklError):
    """A subcommand's help was printed: nothing else happens."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise UsageError(f"%mkl {self.prog}: {message}")

    def exit(self, status: int = 0, message: str | None = None) -> NoReturn:
        if message:
            raise UsageError(message.strip())
        raise HelpShown

    def print_help(self, file: Any = None) -> None:
        print(self.format_help())


def parsers() -> dict[str, argparse.ArgumentParser]:
    """The flags of each subcommand that takes any: those the ``mkl`` command shares from one table
    (:mod:`~mkl_notebook.app.flags`), and the notebook's own."""
    run = _Parser(prog="run", add_help=False)
    run.add_argument(
        "name", nargs="?", help="a machine defined in this notebook (omitted where the cell itself defines it)"
    )
    add_flags(run, RUN)
    run.add_argument("--notebook", help="the notebook file that carries the run (default: this one)")
    run.add_argument("--trust-file", action="store_true", help=FLAGS["trust_file"].help)
    resume = _Parser(prog="resume", add_help=False)
    resume.add_argument("run_id", help="the run")
    add_flags(resume, REPLYING)
    one_run = {name: _Parser(prog=name, add_help=False) for name in ("trace", "visits", "forget", "plan")}
    for parser in one_run.values():
        parser.add_argument("run_id", help="the run")
    for name in ("trace", "visits"):
        one_run[name].add_argument("--all", action="store_true", dest="full", help="every row, however many")
    one_run["plan"].add_argument("--over", action="append", metavar="DIR", help="every run of NAME under DIR")
    one_run["plan"].add_argument("--store", action="append", dest="stores", metavar="S", help="every run of NAME in S")
    one_run["plan"].add_argument("--json", action="store_true", help="with --over/--store: the rows as JSON")
    pending = _Parser(prog="pending", add_help=False)
    pending.add_argument(
        "--all",
        nargs="?",
        const=".",
        metavar="FOLDER",
        help="every question waiting in the notebooks and stores under FOLDER",
    )
    pending.add_argument("--queue", action="store_true", help="the questions in one review queue")
    audit = _Parser(prog="audit", add_help=False)
    audit.add_argument(
        "target", nargs="?", help="a run, a notebook (.ipynb) or a folder (default: every run of the store)"
    )
    diffed = _Parser(prog="diff", add_help=False)
    diffed.add_argument("run_a", metavar="RUN_A", help="a run of this kernel's store, or NOTEBOOK.ipynb:RUN")
    diffed.add_argument("run_b", metavar="RUN_B", help="a run of this kernel's store, or NOTEBOOK.ipynb:RUN")
    diffed.add_argument("--json", action="store_true", help="print the diff as one JSON object")
    inbox = _Parser(prog="inbox", add_help=False)
    inbox.add_argument("folders", nargs="*", metavar="DIR", help="folders to read (default: here)")
    add_flags(inbox, INBOX)
    check_parser = _Parser(prog="check", add_help=False)
    check_parser.add_argument("name", help="a machine defined in this notebook")
    library = _Parser(prog="stdlib", add_help=False)
    library.add_argument("name", nargs="?", help="a machine of the standard library (none: list them)")
    load_parser = _Parser(prog="load", add_help=False)
    load_parser.add_argument("path", help="a .mkl machine file")
    models = _Parser(prog="models", add_help=False)
    notebook = _Parser(prog="notebook", add_help=False)
    notebook.add_argument("path", nargs="?", help="the notebook file this kernel runs (none: say which it found)")
    test = _Parser(prog="test", add_help=False)
    test.add_argument("name", help="a machine defined in this notebook")
    test.add_argument("--script", required=True, help="a scenario file (scenarios: [...]) to run against it")
    freeze = _Parser(prog="freeze", add_help=False)
    freeze.add_argument("run_id", help="the run")
    freeze.add_argument("-o", dest="output", help="the scenario file to write (default: MACHINE-RUN.test.yaml)")
    freeze.add_argument("--force", action="store_true", help="write over a file already there")
    mapped = _Parser(prog="map", add_help=False)
    mapped.add_argument("name", help="a machine defined in this notebook")
    add_flags(mapped, MAP)
    named = {
        "run": run,
        "map": mapped,
        "resume": resume,
        "pending": pending,
        "audit": audit,
        "diff": diffed,
        "inbox": inbox,
        "check": check_parser,
        "test": test,
        "freeze": freeze,
    }
    return {**named, "stdlib": library, "load": load_parser, "models": models, "notebook": notebook, **one_run}


class Values:
    """The values a ``%mkl`` line names, from the notebook's namespace."""

    def __init__(self, namespace: Callable[[], dict[str, Any]]) -> None:
        self._namespace = namespace

    def object(self, token: str) -> Any:
        """``$name`` is the object itself; ``{expr}`` evaluates; anything else is text."""
        whole = _WHOLE_VAR.match(token)
        if whole:
            name = whole.group(1)
            if name not in self._namespace():
                raise UsageError(f"there is no Python variable named '{name}'")
            return self._namespace()[name]
        return self.text(token)

    def text(self, token: str) -> str:
        """``token`` with each ``$name`` and ``{expr}`` in it replaced by its value's text."""
        namespace = self._namespace()

        def value(match: re.Match[str]) -> str:
            name, expr = match.group(1), match.group(2)
            if name is not None:
                if name not in namespace:
                    raise UsageError(f"there is no Python variable named '{name}'")
                return str(namespace[name])
            try:
                return str(eval(expr, namespace))  # the notebook's own expression, like IPython's {expr}
            except Exception as exc:
                raise UsageError(f"{{{expr}}} could not be evaluated: {type(exc).__name__}: {exc}") from None

        return _INLINE.sub(value, token)

    def maybe_text(self, token: str | None) -> str | None:
        """:meth:`text`, or None when the flag was not given."""
        return None if token is None else self.text(token)

    def input(self, token: str | None) -> dict[str, Any]:
        """``--input $dict``, ``--input {python expression}``, or JSON text (or ``@file.json``)."""
        if token is None:
            return {}
        if _WHOLE_VAR.match(token):
            return host_input(self.object(token))
        if token.startswith("{") and token.endswith("}"):
            try:
                return parse_input(token)
            except UsageProblem:
                pass  # not JSON: the notebook's own Python expression
            try:
                value = eval(token[1:-1], self._namespace())
            except Exception as exc:
                raise UsageError(f"--input {token} could not be evaluated: {type(exc).__name__}: {exc}") from None
            return host_input(value)
        return parse_input(token)

    def assignments(self, items: Sequence[str]) -> dict[str, Any]:
        """``--set key=value`` pairs, each value ``$var``'s object or text with ``{expr}`` evaluated."""
        return parse_assignments(
            items, convert=lambda raw: self.object(raw) if _WHOLE_VAR.match(raw) else self.text(raw)
        )

    def host_values(self, input_token: str | None, assignments: Sequence[str]) -> dict[str, Any]:
        """A run's host values: ``--input`` with each ``--set`` laid over it."""
        return merge(self.input(input_token), self.assignments(assignments))
