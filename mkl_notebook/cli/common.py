"""What every ``mkl`` subcommand shares: exit codes and the final JSON status line."""

from __future__ import annotations

import json
from typing import Any

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_SUSPENDED, EXIT_IN_DOUBT = 0, 1, 2, 3, 4
STATUS_EXIT = {"done": EXIT_OK, "halt": EXIT_FAILED, "suspended": EXIT_SUSPENDED, "in_doubt": EXIT_IN_DOUBT}


def emit_status(status: dict[str, Any]) -> None:
    """The last stdout line of every run-like command: one JSON object."""
    print(json.dumps(status, ensure_ascii=False, default=str))
