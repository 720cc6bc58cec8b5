#!/usr/bin/env python
"""Compatibility report: every machine and scenario file of the reference interpreter's source
distribution (mklang 1.4.0, from PyPI), through both engines' command lines.

A developer tool, not part of the test suite; the reference is never a dependency. It runs in the
benchmark environment (docs/development/benchmarks.md)::

    python3 -m venv .bench && .bench/bin/pip install -e . mklang==1.4.0
    .bench/bin/python benchmarks/compat.py            # downloads the sdist with pip, or: --sdist DIR

For every ``.mkl`` file it runs ``mklang check`` and ``mkl check`` and compares the verdicts (clean,
warnings only, errors); for every ``NAME.test.yaml`` beside a ``NAME.mkl`` it runs ``mklang test`` and
``mkl test`` and compares which scenarios pass. The table goes to ``benchmarks/COMPAT.md``.
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
REFERENCE = "mklang==1.4.0"
TIMEOUT = 120


@dataclass
class Row:
    path: str
    kind: str  # "check" or "test"
    reference: str
    ours: str
    agree: bool
    note: str = ""


def _run(command: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=TIMEOUT, check=False)


def _sdist(given: str | None, scratch: Path) -> Path:
    """The unpacked source distribution: as given, or downloaded with pip from the package registry."""
    if given:
        return Path(given)
    subprocess.run(
        [sys.executable, "-m", "pip", "download", REFERENCE, "--no-binary", ":all:", "--no-deps", "-q", "-d", scratch],
        check=True,
    )
    [archive] = scratch.glob("mklang-*.tar.gz")
    with tarfile.open(archive) as tar:
        tar.extractall(scratch, filter="data")
    [folder] = [p for p in scratch.iterdir() if p.is_dir()]
    return folder


def _check_verdict(done: subprocess.CompletedProcess[str], ours: bool) -> str:
    text = done.stdout + done.stderr
    if done.returncode != 0:
        return "errors"
    warned = re.search(r": warning: ", text) if ours else re.search(r"\bwarning\b", text, re.IGNORECASE)
    return "warnings" if warned else "clean"


def _passes(text: str) -> dict[str, bool]:
    """Scenario name -> passed, from either engine's ``test`` output (``PASS name`` / ``FAIL name: …``)."""
    found: dict[str, bool] = {}
    for line in text.splitlines():
        match = re.match(r"\s*(PASS|FAIL)\s+(.+?)(?::\s.*)?$", line)
        if match:
            found[match.group(2).strip()] = match.group(1) == "PASS"
    return found


def _summary(passes: dict[str, bool]) -> str:
    return f"{sum(passes.values())}/{len(passes)} pass"


def compare(sdist: Path, mklang: str) -> list[Row]:
    ours = [sys.executable, "-m", "mkl_notebook.cli"]
    rows = []
    for machine in sorted(sdist.rglob("*.mkl")):
        where = str(machine.relative_to(sdist))
        reference = _check_verdict(_run([mklang, "check", machine.name], machine.parent), ours=False)
        mine = _run([*ours, "check", machine.name], machine.parent)
        verdict = _check_verdict(mine, ours=True)
        first = next((line for line in mine.stdout.splitlines() if ": error: " in line), "")
        rows.append(Row(where, "check", reference, verdict, reference == verdict, first.split(": error: ")[-1][:140]))
    for script in sorted(sdist.rglob("*.test.yaml")):
        machine = script.with_name(script.name.removesuffix(".test.yaml") + ".mkl")
        if not machine.exists():
            continue
        where = str(script.relative_to(sdist))
        reference = _passes(_run([mklang, "test", machine.name, "--script", script.name], script.parent).stdout)
        done = _run([*ours, "test", machine.name, "--script", script.name], script.parent)
        mine = _passes(done.stdout)
        failing = [name for name, passed in mine.items() if not passed]
        note = (done.stderr.strip().splitlines() or [""])[-1][:140] if not mine else ", ".join(failing)[:140]
        rows.append(Row(where, "test", _summary(reference), _summary(mine), reference == mine and bool(mine), note))
    return rows


def report(rows: list[Row], sdist: Path) -> str:
    agreed = sum(row.agree for row in rows)
    checks = [row for row in rows if row.kind == "check"]
    tests = [row for row in rows if row.kind == "test"]
    lines = [
        "# Compatibility with the reference interpreter",
        "",
        f"Every `.mkl` and scenario file in the source distribution of {REFERENCE} (`{sdist.name}`), through",
        "`mklang check` / `mkl check` (verdict: clean, warnings, errors) and `mklang test` / `mkl test`",
        "(which scenarios pass). Written by `benchmarks/compat.py`.",
        "",
        f"**{agreed} of {len(rows)} agree**: {sum(r.agree for r in checks)} of {len(checks)} checks, "
        f"{sum(r.agree for r in tests)} of {len(tests)} scenario files.",
        "",
        "| file | run | reference | mkl_notebook | agree | note |",
        "|---|---|---|---|---|---|",
    ]
    for row in rows:
        note = row.note.replace("|", "\\|")
        agree = "yes" if row.agree else "NO"
        lines.append(f"| `{row.path}` | {row.kind} | {row.reference} | {row.ours} | {agree} | {note} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sdist", help="an unpacked mklang source distribution (default: download it)")
    parser.add_argument("--mklang", default=shutil.which("mklang") or str(Path(sys.executable).with_name("mklang")))
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "COMPAT.md"))
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as scratch:
        sdist = _sdist(args.sdist, Path(scratch))
        rows = compare(sdist, args.mklang)
        Path(args.out).write_text(report(rows, sdist), encoding="utf-8")
    disagree = [row for row in rows if not row.agree]
    print(f"{len(rows) - len(disagree)} of {len(rows)} agree; written to {args.out}")
    for row in disagree:
        print(f"  {row.kind} {row.path}: reference {row.reference}, ours {row.ours} {row.note}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
