"""The flags the ``mkl`` command and the ``%mkl`` magics share, declared once: name, meaning, default.

Each front end builds its parsers from this table (:func:`add_flags`), so ``mkl run --max-cost`` and ``%mkl run
--max-cost`` are one flag with one help text, and a flag added here reaches both. What only one front end has
(a store file, a checkpoint file, a status line on the command line; the notebook a cell names) it declares
itself. Importing this costs only :mod:`argparse`: ``mkl --help`` reads it (a test holds it).
"""

from __future__ import annotations

import argparse

from .defaults import DEFAULT_CONCURRENCY

TYPE_CHECKING = False  # (typing.TYPE_CHECKING, without importing typing: this module is on `mkl --help`'s path)
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Any, Protocol

    class TakesArguments(Protocol):
        """A parser, or a group of one (argparse's own types for groups are private)."""

        def add_argument(self, *names: str, **how: Any) -> Any: ...


class Flag:
    """One flag: its option string, what it means, and how argparse reads it. Flags with the same
    ``exclusive`` name cannot be given together. (A plain class: a dataclass would cost ``mkl --help`` more
    than the rest of its parser.)"""

    __slots__ = ("action", "choices", "default", "dest", "exclusive", "help", "metavar", "option", "required", "type")

    def __init__(
        self,
        option: str,
        help: str,
        *,
        dest: str | None = None,
        metavar: str | None = None,
        action: str | None = None,
        default: Any = None,
        type: Any = None,
        choices: tuple[str, ...] | None = None,
        required: bool = False,
        exclusive: str | None = None,
    ) -> None:
        self.option, self.help, self.dest, self.metavar, self.action = option, help, dest, metavar, action
        self.default, self.type, self.choices = default, type, choices
        self.required, self.exclusive = required, exclusive

    def __repr__(self) -> str:
        return f"Flag({self.option!r})"

    def replaced(self, **changes: Any) -> Flag:
        """This flag with ``changes`` (keywords of the constructor), as ``dataclasses.replace`` would give."""
        given = {name: getattr(self, name) for name in self.__slots__} | changes
        return Flag(given.pop("option"), given.pop("help"), **given)

    def add_to(self, parser: TakesArguments) -> None:
        """Declare this flag on ``parser`` (or a group of it)."""
        given: dict[str, Any] = {"help": self.help}
        for name in ("dest", "metavar", "action", "type", "choices"):
            value = getattr(self, name)
            if value is not None:
                given[name] = value
        if self.default is not None:
            given["default"] = list(self.default) if isinstance(self.default, tuple) else self.default
        if self.required:
            given["required"] = True
        parser.add_argument(self.option, **given)


FLAGS: dict[str, Flag] = {
    flag.dest or flag.option[2:].replace("-", "_"): flag
    for flag in (
        # -- what a run starts with --------------------------------------------------------
        Flag(
            "--id", "the run id (default: a new one; in a notebook, the machine's name)", dest="run_id", metavar="RUN"
        ),
        Flag(
            "--set",
            "a host value for a context key (dotted keys nest); repeatable",
            action="append",
            default=(),
            metavar="KEY=VALUE",
        ),
        Flag("--input", "a JSON object of host values (or @file.json)", metavar="JSON"),
        Flag("--hitl", "every escalate gate suspends for a person", action="store_true", exclusive="hitl"),
        Flag("--no-hitl", "escalate gates route as authored (the default)", action="store_true", exclusive="hitl"),
        Flag("--suspend", "suspend instead of halting when a budget runs out", action="store_true"),
        Flag("--fresh", "start the run id over, forgetting its journal", action="store_true"),
        Flag(
            "--retry",
            "make the calls that failed (a provider's error) again; without it a re-run replays them as they failed",
            action="store_true",
        ),
        Flag(
            "--on-untrusted-flow",
            "what an effectful tool reached by a tainted decision does",
            choices=("report", "halt"),
            default="report",
        ),
        Flag(
            "--approvers",
            "who may answer the run's questions, separated by commas (names the hub or the operating system "
            "establishes; default: the approvers setting, else $MKL_APPROVERS, else anyone); anyone else sees "
            "the question and cannot answer it",
            metavar="NAMES",
        ),
        Flag(
            "--deadline",
            "how long a question may wait for a person (e.g. 30s, 30m, 2h, 1d); then --on-timeout decides it, "
            "journaled as a policy decision (default: the deadline setting, else $MKL_DEADLINE, else none)",
            metavar="DURATION",
        ),
        Flag(
            "--on-timeout",
            "what decides a question past its deadline: reject (the default), approve, or escalate:NAME (asks "
            "again, NAME the only approver; default: the on_timeout setting, else $MKL_ON_TIMEOUT)",
            metavar="reject|approve|escalate:NAME",
        ),
        Flag(
            "--remind-after",
            "when a reminder of a waiting question falls due (e.g. 15m; default: the remind_after setting, else "
            "$MKL_REMIND_AFTER, else none)",
            metavar="DURATION",
        ),
        Flag(
            "--notify",
            "announce each new question of the run on a channel: an https:// webhook (Slack-compatible JSON) or "
            "mailto:ADDRESS (sent through $MKL_SMTP); repeatable (default: the notify setting, else $MKL_NOTIFY). "
            "The run's journal names it only by a digest and its host; it is kept whole on this machine alone",
            action="append",
            default=(),
            metavar="URL",
        ),
        Flag(
            "--ask-human",
            "let every generative state ask the person a question (extension)",
            action="store_true",
        ),
        # -- budgets -------------------------------------------------------------------------
        Flag(
            "--max-steps",
            "step budget (replaces budget:); on resume, of the machine that ran out of steps, the root or a "
            "called one; in a batch, of each row's run",
            metavar="N",
        ),
        Flag("--max-tokens", "token budget for the whole run (in a batch, each row's)", metavar="N"),
        Flag(
            "--max-cost",
            "cost limit in US dollars for the run's model calls (in a batch, each row's), from litellm's local "
            "price list (a model with no known price stops the run rather than spend unmetered)",
            metavar="USD",
        ),
        # -- who answers the calls, and where they are made ----------------------------------
        Flag(
            "--script",
            "scripted oracles (llm/tools/hooks) to run offline (in a batch, each row's run reads them from the top)",
            metavar="FILE",
        ),
        Flag("--model", "litellm model for every tier, e.g. openai/gpt-4o-mini", metavar="MODEL"),
        Flag(
            "--executor",
            "where calls are made: here (threads, the default), a LocalCluster started for the command (dask), "
            "or a running Dask scheduler",
            metavar="threads|dask|dask://ADDRESS",
        ),
        Flag("--max-model-calls", "model calls in flight at once across the cluster", metavar="N"),
        Flag(
            "--otel",
            "export the run's trace (the run, its states, model and tool calls, approvals) to this OTLP/HTTP "
            "endpoint, e.g. http://localhost:4318, or off (default: the otel setting, else "
            "$OTEL_EXPORTER_OTLP_TRACES_ENDPOINT or $OTEL_EXPORTER_OTLP_ENDPOINT, else off); needs the otel extra",
            metavar="URL",
        ),
        # -- a person's answer ---------------------------------------------------------------
        Flag(
            "--set",
            "the reply, at the path the run is waiting on (e.g. --set human.reply=approve)",
            dest="reply_set",
            action="append",
            default=(),
            metavar="KEY=VALUE",
        ),
        Flag("--reply", "the reply, wherever the run is waiting for it", metavar="TEXT"),
        Flag(
            "--note",
            "a note beside the reply (--reply approve --note 'add an apology'): journaled and shown with it, and "
            "put at <reply_to>_note for the machine; the reply itself stays as given",
            metavar="TEXT",
        ),
        Flag(
            "--question",
            "the question the reply answers (question_id in the status line); a reply to any other is refused",
            metavar="ID",
        ),
        Flag("--as", "who answers (default: $JUPYTERHUB_USER, else you)", dest="by", metavar="NAME"),
        Flag("--resolve", "settle an in-doubt tool call", metavar="completed=VALUE|retry|abort"),
        Flag(
            "--trust-file",
            "take up the file's run even though its checkpoint is not sealed by you or a key you trust",
            action="store_true",
        ),
        # -- a batch -------------------------------------------------------------------------
        Flag("--over", "the rows: a .jsonl, .json or .csv file", metavar="ROWS", required=True),
        Flag("--key", "the column naming each row's run (default: its content)", metavar="COLUMN"),
        Flag("--id", "the batch's name, first in each run id", dest="batch", metavar="BATCH"),
        Flag("--concurrency", "rows run at once", type=int, default=DEFAULT_CONCURRENCY, metavar="N"),
        # -- the inbox -----------------------------------------------------------------------
        Flag(
            "--store",
            "a run store whose waiting questions are listed too: a file or a postgresql:// URL; repeatable",
            dest="stores",
            action="append",
            default=(),
            metavar="URL",
        ),
        Flag("--json", "print the rows as one JSON list, each with the commands that answer it", action="store_true"),
        Flag(
            "--mine",
            "only the questions you may answer (the run names no approvers, or you among them)",
            action="store_true",
        ),
        Flag("--machine", "only the questions of runs of this machine", dest="machine", metavar="NAME"),
        Flag("--older-than", "only the questions asked longer ago than this (e.g. 30m, 2h, 1d)", metavar="DURATION"),
        Flag("--overdue", "only the questions whose deadline has passed", action="store_true"),
        Flag("--full", "show each question's subject whole (the table cuts it to one short line)", action="store_true"),
    )
}

LIMITS = ("max_steps", "max_tokens", "max_cost")
STARTING = (
    "set",
    "input",
    "hitl",
    "no_hitl",
    "suspend",
    *LIMITS,
    "script",
    "model",
    "executor",
    "fresh",
    "approvers",
    "notify",
    "otel",
)
DEADLINES = ("deadline", "on_timeout", "remind_after")
RUN = ("run_id", *STARTING, *DEADLINES, "retry", "on_untrusted_flow", "ask_human")
REPLYING = ("reply_set", "reply", "note", "question", "by", *LIMITS, "resolve", "trust_file", "script", "model", "otel")
MAP = ("over", "key", "batch", "concurrency", *STARTING)
INBOX = ("stores", "json", "mine", "machine", "older_than", "overdue", "full")


def add_flags(parser: argparse.ArgumentParser, names: Sequence[str]) -> None:
    """Declare the flags of ``FLAGS`` named (in that order) on ``parser``; exclusive ones in one group."""
    groups: dict[str, TakesArguments] = {}
    for name in names:
        flag = FLAGS[name]
        if flag.exclusive is None:
            flag.add_to(parser)
            continue
        if flag.exclusive not in groups:
            groups[flag.exclusive] = parser.add_mutually_exclusive_group()
        flag.add_to(groups[flag.exclusive])


def hitl_choice(args: argparse.Namespace) -> str | None:
    """``--hitl`` / ``--no-hitl``: all escalate gates suspend, none do, or (None) the setting decides."""
    return "all" if getattr(args, "hitl", False) else "none" if getattr(args, "no_hitl", False) else None
