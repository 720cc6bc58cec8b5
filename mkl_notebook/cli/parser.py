"""The ``mkl`` command's parser: every subcommand's arguments, and the module that runs each command.

``mkl --help``, ``mkl SUB --help`` and a usage error need nothing else, so this module imports only
:mod:`argparse`, the flag table (:mod:`~mkl_notebook.app.flags`) and the defaults the help states; a command's
module (and the application's heavier parts it uses) is imported when the command runs (a test holds it).
"""

from __future__ import annotations

import argparse
import os
import sys

from ..app.defaults import DEFAULT_STORE_NAME, DURABILITY_ENV
from ..app.flags import INBOX, MAP, REPLYING, RUN, add_flags
from ..render.rows import FIRST_ROWS, LAST_ROWS, WHOLE_ROWS

TYPE_CHECKING = False  # (typing.TYPE_CHECKING, without importing typing for `mkl --help`)
if TYPE_CHECKING:
    from typing import Any, NoReturn

    Commands = argparse._SubParsersAction[Any]  # where each subcommand adds its parser (generic in the stubs)

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_SUSPENDED, EXIT_IN_DOUBT = 0, 1, 2, 3, 4
EXIT_INTERRUPTED = 130  # 128 + SIGINT, as shells report a program Ctrl-C stopped
OUTPUT_FILE_ENV = "MKL_OUTPUT_FILE"  # --output-file's default: where a driver polls for the status line

# The module and function that carry out each command (imported when it runs).
CARRIED_OUT_BY = {
    "check": "check_cmd:check_main",
    "test": "test_cmd:test_main",
    "run": "run_cmd:run_main",
    "resume": "run_cmd:resume_main",
    "runs": "run_cmd:runs_main",
    "map": "map_cmd:map_main",
    "plan": "plan_cmd:plan_main",
    "trace": "trace_cmd:trace_main",
    "trust": "trust_cmd:trust_main",
    "keep": "keep_cmd:keep_main",
    "audit": "audit_cmd:audit_main",
    "inbox": "inbox_cmd:inbox_main",
    "tick": "tick_cmd:tick_main",
    "notify": "notify_cmd:notify_main",
    "diff": "diff_cmd:diff_main",
}
# The commands that end with the JSON status line: each takes --output-file.
STATUS_COMMANDS = ("check", "run", "resume", "runs", "map", "plan", "trace", "keep", "notify")
# The commands that load machines (a resumed run goes on in the machines it pinned): each takes --library.
LIBRARY_COMMANDS = ("check", "run", "map", "test")
# The commands that write runs to a store: each takes --durability.
DURABILITY_COMMANDS = ("run", "resume", "map")


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        from ..app.errors import without_secrets  # (what shows the message is loaded only to show one)
        from ..render.plain import printable

        self.print_usage(sys.stderr)
        self.exit(EXIT_USAGE, f"mkl: error: {printable(without_secrets(message))}\n")  # it may repeat a flag's URL


def build_parser() -> argparse.ArgumentParser:
    """The parser of the ``mkl`` command and all its subcommands; ``command`` names the one given."""
    parser = _Parser(prog="mkl", description="Check, test and run mkl machines (mklang 0.4).")
    commands = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    _check_and_test(commands)
    _runs(commands)
    _map_plan_and_trace(commands)
    _trust(commands)
    _keep_and_audit(commands)
    _notify(commands)
    _diff(commands)
    for name in STATUS_COMMANDS:
        _output_file_flag(commands.choices[name])
    for name in LIBRARY_COMMANDS:
        _library_flag(commands.choices[name])
    for name in DURABILITY_COMMANDS:
        _durability_flag(commands.choices[name])
    return parser


def _check_and_test(commands: Commands) -> None:
    checked = commands.add_parser("check", help="report static findings for a machine file")
    checked.add_argument("file", help="a .mkl machine file")

    tested = commands.add_parser(
        "test",
        help="run scripted scenarios or conformance cases; freeze a run into scenarios",
        description="mkl test MACHINE --script FILE runs a machine's scenarios; mkl test --case FILE... runs "
        "conformance cases; mkl test freeze RUN [--store PATH | NOTEBOOK] -o FILE.test.yaml writes a real run as "
        "a scenario file that replays it with no model.",
    )
    tested.add_argument("machine", nargs="?", help="a .mkl machine file (with --script), or freeze")
    tested.add_argument("--script", help="a scenario file (scenarios: [...]) to run against MACHINE")
    tested.add_argument("--case", nargs="+", metavar="FILE", help="conformance case files")
    # `mkl test freeze RUN [--store S | NOTEBOOK] -o FILE.test.yaml`: a real run frozen into a scenario file
    tested.add_argument(
        "frozen_run",
        nargs="*",
        metavar="RUN [NOTEBOOK]",
        help="after `freeze`: the run to freeze, and the notebook (.ipynb) that carries it if no store is to be read",
    )
    tested.add_argument("-o", dest="output", metavar="FILE.test.yaml", help="with freeze: the scenario file to write")
    tested.add_argument("--force", action="store_true", help="with freeze: write over a file already there")
    add_flags(tested, ("trust_file",))  # with freeze and a notebook no key you trust sealed
    tested.add_argument(
        "--store", metavar="PATH", help=f"with freeze: the run store (default $MKL_STORE, else {DEFAULT_STORE_NAME})"
    )


def _runs(commands: Commands) -> None:
    """``mkl run``, ``mkl resume`` and ``mkl runs``."""
    run = commands.add_parser("run", help="run a machine (durably: re-running an id replays it)")
    run.add_argument("file", help="a .mkl machine file")
    add_flags(run, RUN)
    _command_line_flags(run)

    resume = commands.add_parser("resume", help="continue a suspended or in-doubt run")
    resume.add_argument(
        "target",
        nargs="?",
        metavar="CHECKPOINT|NOTEBOOK",
        help="a checkpoint file written by --checkpoint, or a notebook (.ipynb) that carries the run",
    )
    resume.add_argument("--run", dest="notebook_run", metavar="ID", help="which run of the notebook to resume")
    add_flags(resume, ("run_id", *REPLYING, "executor"))
    resume.add_argument("--force", action="store_true", help="resume even though a machine file changed")
    _command_line_flags(resume)

    listing = commands.add_parser("runs", help="list the runs in a store or a notebook")
    listing.add_argument(
        "store",
        nargs="?",
        help="a run store (default $MKL_STORE, else .mkl/runs.sqlite; a file or a postgresql:// URL), a notebook "
        "(.ipynb), or a folder: every question waiting in the notebooks and stores under it",
    )
    listing.add_argument("--store", dest="store_flag", metavar="PATH", help="the run store to list (as STORE)")


def _map_plan_and_trace(commands: Commands) -> None:
    mapped = commands.add_parser("map", help="run a machine once per row of a JSONL, JSON or CSV file")
    mapped.add_argument("file", help="a .mkl machine file")
    add_flags(mapped, MAP)
    _command_line_flags(mapped, batch=True)

    planned = commands.add_parser(
        "plan",
        help="what re-running a run, or every run of the machine under a folder or in a store, with the machine as "
        "it is now would do",
        description="With --id: one run. With --over DIR or --store S (and no --id): every run of MACHINE there, "
        "one row each; the exit code is 1 when an answer a person gave would (or may) be asked again, else 0.",
    )
    planned.add_argument("file", metavar="MACHINE", help="the .mkl machine file as it is now (or a library machine)")
    planned.add_argument("--id", dest="run_id", metavar="RUN", help="the run (of the one --store)")
    planned.add_argument(
        "--store",
        metavar="PATH",
        action="append",
        help=f"a run store: a file (default {DEFAULT_STORE_NAME}) or a postgresql:// URL; without --id, every run "
        "of MACHINE in it (repeat for several), read-only",
    )
    planned.add_argument(
        "--over",
        metavar="DIR",
        action="append",
        help="a folder: every run of MACHINE in its notebooks and .mkl/runs.sqlite stores (repeat for several)",
    )
    planned.add_argument(
        "--json",
        action="store_true",
        help="with --over/--store: the rows as one JSON list (a line before the status line)",
    )

    traced = commands.add_parser("trace", help="print a run's trace from its journal (nothing runs)")
    traced.add_argument("--id", dest="run_id", required=True, metavar="RUN", help="the run")
    traced.add_argument(
        "--store", metavar="PATH", help=f"the run store: a file (default {DEFAULT_STORE_NAME}) or a postgresql:// URL"
    )
    _all_flag(traced)


_TRUST_DESCRIPTION = """\
With no argument, print your own key (give it to the people who take up your notebooks) and the keys you
trust.

KEY --name NAME trusts that key (ed25519:…) as NAME's.

NOTEBOOK or CHECKPOINT lists every key that signed its runs: its fingerprint, the names it signs as (a
claim anyone can make) and what it signed. On a terminal it asks, key by key, whether to trust each one
you do not yet (y/N). Otherwise it trusts nothing unless told which: --name NAME when the file holds
exactly one key you do not trust, or --key FINGERPRINT --name NAME for one of several. Compare the
fingerprint with the one its owner gets from `mkl trust` before you say yes.

A name says whose key it is in every mark, so a name that is already another trusted key's, or your own,
is refused.
"""


def _trust(commands: Commands) -> None:
    trust = commands.add_parser(
        "trust",
        help="show your key, or trust someone's key (ed25519:…) or one that signed a notebook's runs",
        description=_TRUST_DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    trust.add_argument("what", nargs="?", metavar="KEY|NOTEBOOK|CHECKPOINT", help="a key (ed25519:…) or a file")
    trust.add_argument("--name", help="whose key it is, as you will see it in marks")
    trust.add_argument(
        "--key",
        metavar="FINGERPRINT",
        help="which of the file's keys to trust (or with --remove, stop trusting): its fingerprint or the key",
    )
    trust.add_argument("--remove", action="store_true", help="stop trusting the key (a file's: all its keys)")


def _keep_and_audit(commands: Commands) -> None:
    keep = commands.add_parser(
        "keep",
        help="put the runs a notebook carries only in its outputs into its metadata, where stripping outputs "
        "(nbstripout, nbconvert --clear-output) leaves them",
    )
    keep.add_argument("notebooks", nargs="+", metavar="NOTEBOOK", help="a notebook (.ipynb); several may be named")

    audit = commands.add_parser("audit", help="list every answer a person gave: who, when, signed by which key")
    audit.add_argument(
        "target",
        nargs="?",
        metavar="RUN|NOTEBOOK|DIR",
        help="a run of the store, a notebook (.ipynb), or a folder (its notebooks and .mkl/runs.sqlite stores); "
        "none: every run of the store",
    )
    audit.add_argument(
        "--store",
        metavar="PATH",
        help="the run store to read (default .mkl/runs.sqlite, or a postgresql:// URL), read-only",
    )
    shape = audit.add_mutually_exclusive_group()
    shape.add_argument("--json", action="store_true", help="print the answers as a JSON list of objects")
    shape.add_argument("--csv", action="store_true", help="print the answers as CSV, a header row first")

    inbox = commands.add_parser(
        "inbox",
        help="every question waiting for a person in the notebooks and stores in reach, oldest first, with the "
        "command that answers each",
    )
    inbox.add_argument(
        "folders",
        nargs="*",
        metavar="DIR",
        help="folders whose notebooks and .mkl/runs.sqlite stores are read (default: here); besides them, the "
        "stores named with --store and $MKL_STORE (else .mkl/runs.sqlite), when there",
    )
    add_flags(inbox, INBOX)
    tick = commands.add_parser(
        "tick", help="decide every question past its deadline by its run's rule (--on-timeout); run it from cron"
    )
    tick.add_argument(
        "folders",
        nargs="*",
        metavar="DIR",
        help="a folder: the notebooks and .mkl/runs.sqlite stores under it (none, and no --store: the default store)",
    )
    tick.add_argument(
        "--store",
        dest="stores",
        action="append",
        metavar="PATH",
        help="a run store (a file or a postgresql:// URL); repeatable",
    )
    tick.add_argument("--json", action="store_true", help="print the decisions as a JSON list of objects")


def _notify(commands: Commands) -> None:
    notify = commands.add_parser(
        "notify",
        help="send the notifications of waiting questions still due (a sender was killed, a receiver was down)",
    )
    notify.add_argument("folders", nargs="*", metavar="DIR", help="folders whose .mkl/runs.sqlite stores to send from")
    notify.add_argument(
        "--store",
        action="append",
        metavar="URL",
        help=f"a run store to send from (a file or a postgresql:// URL); repeatable (none, and no DIR: "
        f"$MKL_STORE, else {DEFAULT_STORE_NAME})",
    )
    notify.add_argument(
        "--notify",
        action="append",
        default=[],
        metavar="URL",
        help="a channel this machine may send on, beside those it keeps (runs name theirs by digest only)",
    )
    # The store's own channels (every run started in it announces on them): set, unset, listed; nothing is sent.
    kept = notify.add_mutually_exclusive_group()
    kept.add_argument(
        "--set",
        action="append",
        metavar="URL",
        help="keep a channel in the store: every run started in it announces its questions there; repeatable",
    )
    kept.add_argument(
        "--unset",
        action="append",
        metavar="URL",
        help="drop a channel of the store (as given, its sha256:… digest as --list shows it, or 'all'); repeatable",
    )
    kept.add_argument("--list", action="store_true", help="list the store's channels (redacted)")


def _diff(commands: Commands) -> None:
    """``mkl diff RUN_A RUN_B``."""
    diffed = commands.add_parser(
        "diff",
        help="two runs side by side: where they part, each decision and output that differs, what each spent",
        description="Compare two runs, reading only. A RUN is a run of the store, or NOTEBOOK.ipynb:RUN for one a "
        "notebook carries (one sent to you, say). Exit code: 0 identical, 1 they differ, 2 a run not found.",
    )
    diffed.add_argument("run_a", metavar="RUN_A", help="a run of the store, or NOTEBOOK.ipynb:RUN")
    diffed.add_argument(
        "run_b", metavar="RUN_B", help="a run of the store (--store-b's, if given), or NOTEBOOK.ipynb:RUN"
    )
    diffed.add_argument(
        "--store",
        metavar="PATH",
        help=f"the run store a RUN (not NOTEBOOK.ipynb:RUN) is read from, read-only: a file (default $MKL_STORE, else "
        f"{DEFAULT_STORE_NAME}) "
        "or a postgresql:// URL",
    )
    diffed.add_argument("--store-b", metavar="PATH", help="the run store RUN_B is read from, when not --store's")
    diffed.add_argument("--json", action="store_true", help="print the diff as one JSON object")


def _command_line_flags(parser: argparse.ArgumentParser, *, batch: bool = False) -> None:
    """The flags of a command that starts or continues runs that the notebook's magics do not take: the store
    and checkpoint files, a server's base URL, a tools file, and how much the command prints."""
    parser.add_argument(
        "--store", metavar="PATH", help=f"the run store: a file (default {DEFAULT_STORE_NAME}) or a postgresql:// URL"
    )
    if not batch:
        parser.add_argument("--checkpoint", metavar="PATH", help="also write the run's checkpoint here")
    parser.add_argument("--api-base", metavar="URL", help="base URL of an OpenAI-compatible or local server")
    parser.add_argument(
        "--tools", metavar="FILE.py", help="a Python file whose @mkl_notebook.tool / .hook functions the run may call"
    )
    add_flags(parser, ("max_model_calls",))
    parser.add_argument("--quiet", action="store_true", help="print only the final JSON status line")
    if not batch:
        _all_flag(parser)


def _all_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--all",
        dest="full",
        action="store_true",
        help=f"print every step of a long trace and the whole result (else the first {FIRST_ROWS} and "
        f"last {LAST_ROWS} of more than {WHOLE_ROWS} steps)",
    )


def _library_flag(parser: argparse.ArgumentParser) -> None:
    """``--library FOLDERS`` on a command that loads machines: where ``call:`` looks before the shipped library."""
    parser.add_argument(
        "--library",
        metavar="FOLDERS",
        help=f"folders ({os.pathsep}-separated) whose NAME.mkl files a `call: NAME` finds before the standard "
        "library's (default: $MKL_LIBRARY_PATH); they are read as machines, never run as code",
    )


def _durability_flag(parser: argparse.ArgumentParser) -> None:
    """``--durability process|power`` on a command that writes runs: what their records survive."""
    parser.add_argument(
        "--durability",
        metavar="process|power",
        help="process (default): a killed process loses nothing journaled, and a person's answers and a "
        "non-idempotent tool's intents are synced to disk too; power: every record is synced, to survive a "
        f"power cut (default: ${DURABILITY_ENV}, when set)",
    )


def _output_file_flag(parser: argparse.ArgumentParser) -> None:
    """``--output-file PATH`` on a command that ends with the JSON status line."""
    parser.add_argument(
        "--output-file",
        metavar="PATH",
        help="also write the final JSON status line to PATH, replacing the file at once, so a program can poll it "
        f"(default: ${OUTPUT_FILE_ENV}, when set)",
    )
