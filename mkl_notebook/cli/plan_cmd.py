"""``mkl plan``: what resuming or re-running a run would do with the machine file as it is now; with ``--over
DIR`` or ``--store S`` (no ``--id``), every run of the machine there, and exit 1 when an edit puts answers a person
gave at stake (see :mod:`~mkl_notebook.app.plan_over`)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from ..app.errors import UsageProblem
from .common import emit_status, say, workspace
from .parser import EXIT_FAILED, EXIT_OK


def plan_main(args: argparse.Namespace) -> int:
    from ..render.plan_views import plan_lines

    stores = args.store or []
    if args.run_id is None:
        if not args.over and not stores:
            raise UsageProblem("name the run to plan with --id RUN, or where every run is: --over DIR or --store S")
        return _plan_over(args, stores)
    if args.over or len(stores) > 1:
        raise UsageProblem("--id plans one run of one store; to plan every run, give --over DIR or --store S alone")
    args.store = stores[0] if stores else None
    with workspace(args) as ws:
        ws.shelf.load(Path(args.file))
        found = ws.plan(args.run_id)
    if not args.json:  # (--json: the plan alone, as its status line says it)
        say("\n".join(plan_lines(found.as_dict())))
    emit_status(found.as_dict())
    return 0


def _plan_over(args: argparse.Namespace, stores: list[str]) -> int:
    from ..app.plan_over import PlanOverRequest, machines_to_plan, plan_over
    from ..render.common import printable
    from ..render.plan_views import plan_over_lines

    name, machines = machines_to_plan(args.file)
    found = plan_over(PlanOverRequest(name, tuple(args.over or ()), tuple(stores)), machines)
    if args.json:  # the rows on one line, then the status line (as every plan ends), ASCII only
        print(json.dumps(found.rows, ensure_ascii=True, default=str))
        for problem in found.problems:
            print(f"not read: {printable(problem)}", file=sys.stderr)
    else:
        say("\n".join(plan_over_lines(found.as_dict())))
    emit_status(found.summary())
    return EXIT_FAILED if found.invalidating else EXIT_OK
