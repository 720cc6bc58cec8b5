"""What every ``mkl`` subcommand shares: exit codes, the final JSON status line, and the workspace its flags make."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..app.settings import Settings
from ..app.terms import Machine
from ..app.values import merge, parse_assignments, parse_input
from ..app.workspace import Workspace
from ..render import views
from ..render.commands import trace_command
from ..render.common import printable

if TYPE_CHECKING:  # generic only in the type stubs
    Commands = argparse._SubParsersAction[Any]  # where each subcommand adds its parser
else:
    Commands = argparse._SubParsersAction

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_SUSPENDED, EXIT_IN_DOUBT = 0, 1, 2, 3, 4
STATUS_EXIT = {"done": EXIT_OK, "halt": EXIT_FAILED, "suspended": EXIT_SUSPENDED, "in_doubt": EXIT_IN_DOUBT}


def say(text: str) -> None:
    """Print ``text`` for a person: whatever in it came from a file is shown, never acted on by the terminal
    (:func:`~mkl_notebook.render.common.printable`); its line breaks are kept."""
    print(printable(text, lines=True))


def emit_status(status: dict[str, Any]) -> None:
    """The last stdout line of every run-like command: one JSON object."""
    print(json.dumps(status, ensure_ascii=False, default=str))


def workspace(args: argparse.Namespace) -> Workspace:
    """The workspace a command's flags describe: its store, models, executor, and (``--hitl``) gates that wait.

    Machines follow their files: a run remembers the file it started from, and continuing it reads that file
    again. A Dask executor named ``dask`` is a LocalCluster started for the command.
    """
    settings = Settings.from_flags(
        store=getattr(args, "store", None),
        hitl=bool(getattr(args, "hitl", False)),
        model=getattr(args, "model", None),
        api_base=getattr(args, "api_base", None),
        executor=getattr(args, "executor", None),
        max_model_calls=getattr(args, "max_model_calls", None),
    )
    return Workspace(settings, follow_files=True, start_local=True)


def all_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--all",
        dest="full",
        action="store_true",
        help=f"print every step of a long trace and the whole result (else the first {views.FIRST_ROWS} and "
        f"last {views.LAST_ROWS} of more than {views.WHOLE_ROWS} steps)",
    )


def cli_cap(run_id: str, store: str | None, full: bool) -> views.Cap:
    """How the command line caps a run's trace and result, and says how to see them whole."""
    return views.Cap(full=full, trace=trace_command(run_id, store), result="the status line below")


def machine_of(ws: Workspace, args: argparse.Namespace) -> Machine:
    """The machine file a command runs (and the files beside it it calls), with its tools file's functions."""
    machine = ws.load(Path(args.file))
    if args.tools:
        ws.load_tools(args.tools)
    return machine


def host_values(args: argparse.Namespace) -> dict[str, Any]:
    """The values a run (or every row) is given: ``--input`` JSON, with each ``--set`` laid over it."""
    return merge(parse_input(args.input) if args.input is not None else {}, parse_assignments(args.set))
