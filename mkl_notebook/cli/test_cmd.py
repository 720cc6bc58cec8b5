"""``mkl test``: scripted scenarios against a machine, or conformance cases."""

from __future__ import annotations

import argparse

from .common import library_of, say
from .parser import EXIT_FAILED, EXIT_OK


def test_main(args: argparse.Namespace) -> int:
    from ..app.scenarios import run_test_files, scenarios_summary

    library = library_of(args) if args.machine else ()  # a library folder that is not there: one line, exit 2
    outcomes = run_test_files(args.machine, args.script, args.case, library)
    for outcome in outcomes:
        say(outcome.line())
    say(scenarios_summary(outcomes))
    return EXIT_OK if all(outcome.passed for outcome in outcomes) else EXIT_FAILED
