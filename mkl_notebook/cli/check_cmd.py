"""``mkl check FILE``: static findings with line and column numbers.

Exits 0 with no errors (warnings allowed), 1 with errors (as the reference interpreter, ruff and mypy exit for
findings, so scripts written for them read it alike), and 2 for a file that cannot be read or a usage error.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..app.errors import UsageProblem
from ..render.common import printable
from .common import emit_status, library_of, say
from .parser import EXIT_FAILED, EXIT_OK, EXIT_USAGE


def check_main(args: argparse.Namespace) -> int:
    from ..app.shelf import Shelf

    path = Path(args.file)
    library = library_of(args)  # a library folder that is not there: one line, exit 2
    try:
        findings = Shelf.check_file(path, library)
    except UsageProblem as exc:
        print(f"mkl: error: {printable(exc)}", file=sys.stderr)
        emit_status({"status": "unreadable", "file": str(path)})
        return EXIT_USAGE
    for finding in findings:
        column = f"{finding.column}:" if finding.column else ""
        say(f"{path}:{finding.line or 0}:{column} {finding.severity}: {finding.message}")
    errors = sum(1 for finding in findings if finding.severity == "error")
    if not findings:
        say(f"{path}: no findings")
    emit_status(
        {
            "status": "errors" if errors else "ok",
            "file": str(path),
            "errors": errors,
            "warnings": len(findings) - errors,
        }
    )
    return EXIT_FAILED if errors else EXIT_OK
