"""``mkl test``: scripted scenarios against a machine, or conformance cases."""

from __future__ import annotations

import argparse

from ..app.errors import UsageProblem
from ..testing import load_cases, load_scenarios, run_all, summary
from .common import EXIT_FAILED, EXIT_OK


def add_parser(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser("test", help="run scripted scenarios or conformance cases")
    parser.add_argument("machine", nargs="?", help="a .mkl machine file (with --script)")
    parser.add_argument("--script", help="a scenario file (scenarios: [...]) to run against MACHINE")
    parser.add_argument("--case", nargs="+", metavar="FILE", help="conformance case files")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    if args.case and (args.machine or args.script):
        raise UsageProblem("give either --case FILE... or MACHINE --script FILE, not both")
    if args.case:
        scenarios = load_cases(args.case)
    elif args.machine and args.script:
        scenarios = load_scenarios(args.machine, args.script)
    else:
        raise UsageProblem(
            "give conformance cases (--case FILE...) or a machine and its scenarios (MACHINE --script FILE)"
        )
    outcomes = run_all(scenarios)
    for outcome in outcomes:
        print(outcome.line())
    print(summary(outcomes))
    return EXIT_OK if all(outcome.passed for outcome in outcomes) else EXIT_FAILED
