"""What every ``mkl`` subcommand shares: exit codes, the final JSON status line, and the workspace its flags make."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..app.errors import UsageProblem
from ..app.settings import DURABILITY_ENV, Settings
from ..app.values import merge, parse_assignments, parse_input
from ..render.commands import trace_command
from ..render.common import FIRST_ROWS, LAST_ROWS, WHOLE_ROWS, Cap, printable

# Building the parser (`mkl --help`, a usage error) imports only what declares the flags: each command imports
# the application's heavier parts (the workspace, signatures, views) when it runs.
if TYPE_CHECKING:  # generic only in the type stubs
    from ..app.terms import Machine
    from ..app.workspace import Workspace

    Commands = argparse._SubParsersAction[Any]  # where each subcommand adds its parser
else:
    Commands = argparse._SubParsersAction

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_SUSPENDED, EXIT_IN_DOUBT = 0, 1, 2, 3, 4
EXIT_INTERRUPTED = 130  # 128 + SIGINT, as shells report a program Ctrl-C stopped
STATUS_EXIT = {"done": EXIT_OK, "halt": EXIT_FAILED, "suspended": EXIT_SUSPENDED, "in_doubt": EXIT_IN_DOUBT}


def say(text: str) -> None:
    """Print ``text`` for a person: whatever in it came from a file is shown, never acted on by the terminal
    (:func:`~mkl_notebook.render.common.printable`); its line breaks are kept."""
    print(printable(text, lines=True))


OUTPUT_FILE_ENV = "MKL_OUTPUT_FILE"  # --output-file's default: where a driver polls for the status line


class StatusFileProblem(UsageProblem):
    """The status line could not be put in the ``--output-file`` (it was printed)."""


class _StatusCopy:
    """The file this command's status line is written to besides stdout, once checked (None: stdout only)."""

    path: str | None = None
    given_as = "--output-file"


def library_flag(parser: argparse.ArgumentParser) -> None:
    """``--library FOLDERS`` on a command that loads machines: where ``call:`` looks before the shipped library."""
    parser.add_argument(
        "--library",
        metavar="FOLDERS",
        help=f"folders ({os.pathsep}-separated) whose NAME.mkl files a `call: NAME` finds before the standard "
        "library's (default: $MKL_LIBRARY_PATH); they are read as machines, never run as code",
    )


def durability_flag(parser: argparse.ArgumentParser) -> None:
    """``--durability process|power`` on a command that writes runs: what their records survive."""
    parser.add_argument(
        "--durability",
        metavar="process|power",
        help="process (default): a killed process loses nothing journaled, and a person's answers and a "
        "non-idempotent tool's intents are synced to disk too; power: every record is synced, to survive a "
        f"power cut (default: ${DURABILITY_ENV}, when set)",
    )


def library_of(args: argparse.Namespace) -> tuple[Path, ...]:
    """The library folders a command's ``--library`` (else ``$MKL_LIBRARY_PATH``) names, each checked."""
    return Settings.from_flags(library=args.library).library_folders()


def output_file_flag(parser: argparse.ArgumentParser) -> None:
    """``--output-file PATH`` on a command that ends with the JSON status line."""
    parser.add_argument(
        "--output-file",
        metavar="PATH",
        help="also write the final JSON status line to PATH, replacing the file at once, so a program can poll it "
        f"(default: ${OUTPUT_FILE_ENV}, when set)",
    )


def copy_status_to(args: argparse.Namespace) -> None:
    """Check the file a command's ``--output-file`` (else ``$MKL_OUTPUT_FILE``) names, before anything runs: a
    folder that does not exist or cannot be written is refused in one line. Commands without a status line
    write none."""
    _StatusCopy.path = None
    if not hasattr(args, "output_file"):
        return
    given, given_as = args.output_file, "--output-file"
    if given is None:
        given, given_as = os.environ.get(OUTPUT_FILE_ENV) or None, OUTPUT_FILE_ENV
    if given is not None:
        from ..app.checkpoints import check_file_to_write

        check_file_to_write(given, given_as)
        _StatusCopy.path, _StatusCopy.given_as = given, given_as


def emit_status(status: dict[str, Any]) -> None:
    """The last stdout line of every run-like command: one JSON object (also put in the ``--output-file``)."""
    line = json.dumps(status, ensure_ascii=False, default=str)
    print(line)
    path = _StatusCopy.path
    if path is not None:
        from ..app.status import write_status_file

        try:
            write_status_file(path, line)
        except OSError as exc:
            reason = (exc.strerror or str(exc)).lower()
            raise StatusFileProblem(
                f"{_StatusCopy.given_as} {path}: the status line could not be written ({reason})"
            ) from None


def interrupted(said: str | None = None, run_id: str | None = None) -> int:
    """Ctrl-C: said once, with what stays and how to go on from there (``said``), and the status line a driver
    reads, as every run-like command ends with one (naming ``run_id``, the run it stopped, where there is one)."""
    print(printable(f"mkl: interrupted{f': {said}' if said else ''}"), file=sys.stderr)
    # The line is printed first; an --output-file that cannot be written now was checked as the command began.
    with contextlib.suppress(StatusFileProblem, OSError):
        emit_status({"status": "interrupted", "error": "interrupted", **({"run": run_id} if run_id else {})})
    return EXIT_INTERRUPTED


def workspace(args: argparse.Namespace) -> Workspace:
    """The workspace a command's flags describe: its store, models, executor, and (``--hitl``) gates that wait.

    Machines follow their files: a run remembers the file it started from, and continuing it reads that file
    again. A Dask executor named ``dask`` is a LocalCluster started for the command.
    """
    from ..app.workspace import Workspace

    settings = Settings.from_flags(
        store=getattr(args, "store", None),
        hitl=bool(getattr(args, "hitl", False)),
        model=getattr(args, "model", None),
        api_base=getattr(args, "api_base", None),
        executor=getattr(args, "executor", None),
        max_model_calls=getattr(args, "max_model_calls", None),
        library=getattr(args, "library", None),
        durability=getattr(args, "durability", None),
    )
    return Workspace(settings, follow_files=True, start_local=True)


def all_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--all",
        dest="full",
        action="store_true",
        help=f"print every step of a long trace and the whole result (else the first {FIRST_ROWS} and "
        f"last {LAST_ROWS} of more than {WHOLE_ROWS} steps)",
    )


def cli_cap(run_id: str, store: str | None, full: bool) -> Cap:
    """How the command line caps a run's trace and result, and says how to see them whole."""
    return Cap(full=full, trace=trace_command(run_id, store), result="the status line below")


def machine_of(ws: Workspace, args: argparse.Namespace) -> Machine:
    """The machine file a command runs (and the files beside it it calls), with its tools file's functions."""
    machine = ws.shelf.load(Path(args.file))
    if args.tools:
        ws.equipment.load_tools(args.tools)
    return machine


def host_values(args: argparse.Namespace) -> dict[str, Any]:
    """The values a run (or every row) is given: ``--input`` JSON, with each ``--set`` laid over it."""
    return merge(parse_input(args.input) if args.input is not None else {}, parse_assignments(args.set))
