"""``mkl plan``: what resuming or re-running a run would do with the machine file as it is now."""

from __future__ import annotations

import argparse
from pathlib import Path

from .common import emit_status, say, workspace


def plan_main(args: argparse.Namespace) -> int:
    from ..render.plan_views import plan_lines

    with workspace(args) as ws:
        ws.shelf.load(Path(args.file))
        found = ws.plan(args.run_id)
    say("\n".join(plan_lines(found.as_dict())))
    emit_status(found.as_dict())
    return 0
