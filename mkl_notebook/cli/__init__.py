"""The ``mkl`` command line: check, test, run (one row or many), resume, trace and list machines' runs; trust keys;
keep a notebook's runs in its metadata; audit every answer; compare two runs.

Exit codes: 0 done / no errors / all tests pass, 1 halt / a test failed, 2 load,
usage or check error (an unknown run included), 3 suspended, 4 in doubt.  Run-like
commands end stdout with one JSON status line.
"""

from __future__ import annotations

import argparse
import os
import sys

from .parser import CARRIED_OUT_BY, EXIT_USAGE, build_parser

TYPE_CHECKING = False  # (typing.TYPE_CHECKING, without importing typing for `mkl --help`)
if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

__all__ = ["build_parser", "main"]


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``mkl`` command ``argv`` (default: this process's arguments) says; its exit code."""
    args = build_parser().parse_args(argv)  # (`mkl --help` and a usage error end here, having loaded only the parser)
    from ..render.commands import on_this_terminal

    with on_this_terminal():  # (what is written into a notebook says plain `mkl`: see app.checkpoints)
        return _run(args, _carried_out_by(args.command))


def _carried_out_by(command: str) -> Callable[[argparse.Namespace], int]:
    """The function of the command's own module that carries ``command`` out."""
    from importlib import import_module

    module, _, function = CARRIED_OUT_BY[command].partition(":")
    carries_out: Callable[[argparse.Namespace], int] = getattr(import_module(f"{__name__}.{module}"), function)
    return carries_out


def _run(args: argparse.Namespace, carry_out: Callable[[argparse.Namespace], int]) -> int:
    from ..app.errors import USER_ERRORS, without_secrets
    from ..render.common import printable
    from .common import StatusFileProblem, copy_status_to, emit_status, interrupted

    try:
        copy_status_to(args)
        return carry_out(args)
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
