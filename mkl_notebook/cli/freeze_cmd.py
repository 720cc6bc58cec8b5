"""``mkl test freeze RUN [--store S | NOTEBOOK] -o FILE.test.yaml``: a real run frozen into a scenario file that
``mkl test MACHINE --script FILE`` replays with no model (see :mod:`mkl_notebook.app.freezing`)."""

from __future__ import annotations

import argparse

from .common import say, workspace
from .parser import EXIT_OK

_USAGE = "mkl test freeze RUN [--store S | NOTEBOOK [--trust-file]] -o FILE.test.yaml"


def freeze_main(args: argparse.Namespace) -> int:
    from ..app.errors import UsageProblem
    from ..app.freezing import freeze, freeze_from_notebook

    if not args.frozen_run or len(args.frozen_run) > 2:
        raise UsageProblem(f"{_USAGE}: name one run (and the notebook that carries it, if no store is to be read)")
    if args.script or args.case:
        raise UsageProblem(f"{_USAGE}: takes no --script or --case (test the file it writes with them)")
    if not args.output:
        raise UsageProblem(f"{_USAGE}: give -o, the scenario file to write")
    run_id, notebook = args.frozen_run[0], (args.frozen_run[1:] or [None])[0]
    if notebook is not None and args.store:
        raise UsageProblem(f"{_USAGE}: give a store or a notebook to read the run from, not both")
    if notebook is not None:
        frozen = freeze_from_notebook(notebook, run_id, args.output, force=args.force, trust_file=args.trust_file)
    else:
        with workspace(args) as ws:
            frozen = freeze(ws, run_id, args.output, force=args.force)
    say(frozen.line(f"test it with: mkl test {frozen.machine}.mkl --script {frozen.path}"))
    return EXIT_OK
