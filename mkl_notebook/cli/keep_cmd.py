"""``mkl keep NOTEBOOK…``: a notebook's runs that live only in its outputs go into its metadata too.

A notebook executed by papermill, ``jupyter nbconvert --execute`` or any client without the mkl-notebook
extension carries its runs in cell outputs only; stripping the outputs (nbstripout, ``jupyter nbconvert
--clear-output``) would take them away. ``mkl keep`` puts each verified copy, as it is (its seals too), into
``metadata.mkl.runs``, under the notebook's lock. A second call changes no byte.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..app.errors import USER_ERRORS, without_secrets
from ..render.common import printable
from .common import emit_status
from .parser import EXIT_OK, EXIT_USAGE


def keep_main(args: argparse.Namespace) -> int:
    from ..app.checkpoints import keep_runs

    kept: dict[str, list[str]] = {}
    errors: list[str] = []
    for name in args.notebooks:
        try:
            kept[name] = ids = keep_runs(Path(name))
        except USER_ERRORS as exc:
            message = without_secrets(str(exc))
            errors.append(message)
            print(f"mkl: error: {printable(message)}", file=sys.stderr)
            continue
        if ids:
            print(printable(f"{name}: kept run {', '.join(ids)} in its metadata"))
        else:
            print(printable(f"{name}: nothing to keep (its metadata holds every run it carries)"))
    emit_status({"kept": kept, "errors": errors})
    return EXIT_USAGE if errors else EXIT_OK
