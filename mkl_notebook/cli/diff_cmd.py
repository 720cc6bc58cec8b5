"""``mkl diff RUN_A RUN_B``: two runs side by side, from one store, two stores, or a notebook and a store.

A RUN is a run of the store (``--store``, else ``$MKL_STORE``, else ``.mkl/runs.sqlite``; ``--store-b`` for
RUN_B's when it is in another) or ``NOTEBOOK.ipynb:RUN``, a run a notebook carries. Reading only (see
:mod:`app.diffing`). Exit code as diff(1): 0 the runs are identical, 1 they differ, 2 a run or file not found.
"""

from __future__ import annotations

import argparse
import json

from .common import say
from .parser import EXIT_FAILED, EXIT_OK


def diff_main(args: argparse.Namespace) -> int:
    from ..app.diffing import diff_runs, run_ref
    from ..render.diff_views import diff_text

    a = run_ref(args.run_a, args.store)
    b = run_ref(args.run_b, args.store_b if args.store_b is not None else args.store)
    found = diff_runs(a, b)
    if args.json:
        print(json.dumps(found.as_dict(), ensure_ascii=False, default=str))
    else:
        say(diff_text(found.as_dict()))
    return EXIT_OK if found.identical else EXIT_FAILED
