"""The ``mkl`` command line: check, test, run (one row or many), resume, trace and list machines' runs; trust keys;
keep a notebook's runs in its metadata; audit every answer.

Exit codes: 0 done / no errors / all tests pass, 1 halt / a test failed, 2 load,
usage or check error (an unknown run included), 3 suspended, 4 in doubt.  Run-like
commands end stdout with one JSON status line.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from typing import NoReturn

from ..app.errors import USER_ERRORS, without_secrets
from ..render.commands import on_this_terminal
from ..render.common import printable
from . import audit_cmd, check_cmd, keep_cmd, map_cmd, plan_cmd, run_cmd, test_cmd, trace_cmd, trust_cmd
from .common import (
    EXIT_USAGE,
    StatusFileProblem,
    copy_status_to,
    durability_flag,
    emit_status,
    interrupted,
    library_flag,
    output_file_flag,
)

# The commands that end with the JSON status line: each takes --output-file.
STATUS_COMMANDS = ("check", "run", "resume", "runs", "map", "plan", "trace", "keep")
# The commands that load machines (a resumed run goes on in the machines it pinned): each takes --library.
LIBRARY_COMMANDS = ("check", "run", "map", "test")
# The commands that write runs to a store: each takes --durability.
DURABILITY_COMMANDS = ("run", "resume", "map")


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        self.exit(EXIT_USAGE, f"mkl: error: {printable(without_secrets(message))}\n")  # it may repeat a flag's URL


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="mkl", description="Check, test and run mkl machines (mklang 0.4).")
    commands = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    check_cmd.add_check_parser(commands)
    test_cmd.add_test_parser(commands)
    run_cmd.add_run_parsers(commands)
    map_cmd.add_map_parser(commands)
    plan_cmd.add_plan_parser(commands)
    trace_cmd.add_trace_parser(commands)
    trust_cmd.add_trust_parser(commands)
    keep_cmd.add_keep_parser(commands)
    audit_cmd.add_audit_parser(commands)
    for name in STATUS_COMMANDS:
        output_file_flag(commands.choices[name])
    for name in LIBRARY_COMMANDS:
        library_flag(commands.choices[name])
    for name in DURABILITY_COMMANDS:
        durability_flag(commands.choices[name])
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    with on_this_terminal():  # (what is written into a notebook says plain `mkl`: see app.checkpoints)
        return _run(args)


def _run(args: argparse.Namespace) -> int:
    try:
        copy_status_to(args)
        code: int = args.handler(args)
        return code
    except StatusFileProblem as exc:  # the line was printed; writing it again would fail again
        print(f"mkl: error: {printable(without_secrets(str(exc)))}", file=sys.stderr)
        return EXIT_USAGE
    except USER_ERRORS as exc:
        message = without_secrets(str(exc))
        print(f"mkl: error: {printable(message)}", file=sys.stderr)  # one line, whatever a file put in it
        emit_status({"status": "error", "error": message})
        return EXIT_USAGE
    except KeyboardInterrupt:
        return interrupted()
    except BrokenPipeError:  # `mkl runs … | head -1`: the reader left, which is not an error of ours
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0
