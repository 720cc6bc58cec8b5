"""``mkl test``: scripted scenarios against a machine, or conformance cases; ``mkl test freeze`` writes a real
run's scenario (:mod:`.freeze_cmd`)."""

from __future__ import annotations

import argparse

from .common import library_of, say
from .parser import EXIT_FAILED, EXIT_OK


def test_main(args: argparse.Namespace) -> int:
    from ..app.errors import UsageProblem
    from ..app.scenarios import run_test_files, scenarios_summary

    if args.machine == "freeze":
        from .freeze_cmd import freeze_main

        return freeze_main(args)
    freezing = (
        ("RUN", args.frozen_run),
        ("-o", args.output),
        ("--force", args.force),
        ("--trust-file", args.trust_file),
    )
    given = [flag for flag, value in freezing if value]
    if given or args.store:
        raise UsageProblem(f"{', '.join(given or ['--store'])}: only with mkl test freeze RUN ... -o FILE.test.yaml")
    library = library_of(args) if args.machine else ()  # a library folder that is not there: one line, exit 2
    outcomes = run_test_files(args.machine, args.script, args.case, library)
    for outcome in outcomes:
        say(outcome.line())
    say(scenarios_summary(outcomes))
    return EXIT_OK if all(outcome.passed for outcome in outcomes) else EXIT_FAILED
