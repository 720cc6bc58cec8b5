"""The sections the benchmarks write into benchmarks/RESULTS.md, each between its own markers
(``<!-- NAME:start -->`` … ``<!-- NAME:end -->``), so that one benchmark run replaces its own section only."""

from __future__ import annotations

import re
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "RESULTS.md"


def markers(name: str) -> tuple[str, str]:
    """The lines that open and close section ``name``."""
    return f"<!-- {name}:start -->", f"<!-- {name}:end -->"


def write_section(name: str, text: str, path: Path = RESULTS) -> None:
    """Put ``text`` in section ``name`` of ``path``: in place of the section there, else at the end."""
    start, end = markers(name)
    old = path.read_text(encoding="utf-8")
    block = f"{start}\n{text}\n{end}"
    if start in old:
        new = re.sub(re.escape(start) + ".*?" + re.escape(end), lambda _: block, old, flags=re.DOTALL)
    else:
        new = old.rstrip() + "\n\n" + block + "\n"
    path.write_text(new, encoding="utf-8")
