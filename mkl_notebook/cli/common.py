"""What every ``mkl`` subcommand shares as it runs: the final JSON status line (and the exit code a status maps to),
and the workspace its flags make. (Exit codes and every flag are declared in :mod:`.parser`.)"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..app.errors import UsageProblem
from ..app.settings import Settings
from ..app.values import merge, parse_assignments, parse_input
from ..render.commands import trace_command
from ..render.common import Cap, printable
from .parser import EXIT_FAILED, EXIT_IN_DOUBT, EXIT_INTERRUPTED, EXIT_OK, EXIT_SUSPENDED, OUTPUT_FILE_ENV

# A command's module is imported when it runs (the parser, in .parser, needs none of them): each imports the
# application's heavier parts (the workspace, signatures, views) when it needs them.
if TYPE_CHECKING:
    from ..app.terms import Machine
    from ..app.workspace import Workspace

STATUS_EXIT = {"done": EXIT_OK, "halt": EXIT_FAILED, "suspended": EXIT_SUSPENDED, "in_doubt": EXIT_IN_DOUBT}


def say(text: str) -> None:
    """Print ``text`` for a person: whatever in it came from a file is shown, never acted on by the terminal
    (:func:`~mkl_notebook.render.common.printable`); its line breaks are kept."""
    print(printable(text, lines=True))


class StatusFileProblem(UsageProblem):
    """The status line could not be put in the ``--output-file`` (it was printed)."""


class _StatusCopy:
    """The file this command's status line is written to besides stdout, once checked (None: stdout only)."""

    path: str | None = None
    given_as = "--output-file"


def library_of(args: argparse.Namespace) -> tuple[Path, ...]:
    """The library folders a command's ``--library`` (else ``$MKL_LIBRARY_PATH``) names, each checked."""
    return Settings.from_flags(library=args.library).library_folders()


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
