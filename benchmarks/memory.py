#!/usr/bin/env python
"""Peak memory of ``mkl map`` in the number of rows: a batch must stay flat, not keep every row's run.

    .venv/bin/python benchmarks/memory.py                 # 1,000 / 20,000 / 100,000 rows; writes RESULTS.md
    .venv/bin/python benchmarks/memory.py --rows 1000 2000 --no-write

Each size runs the real command line in a child process, as a user runs it: ``mkl map examples/refund.mkl
--over rows.jsonl --key id --script examples/refund.script.yaml --quiet`` (a tool call, two model calls and a
judge per row, every answer scripted and instant, the default threads executor), into a store of its own. The
child's peak resident set is what ``wait4`` reports for it (``ru_maxrss``); per-row bytes are the growth over
the smallest batch, divided by the extra rows. Its stdout (the JSON status line holds every row) goes to a file.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
import sections  # noqa: E402  (benchmarks/sections.py, beside this file)

SIZES = (1_000, 20_000, 100_000)
TARGET = 1.5


def write_rows(path: Path, count: int) -> None:
    with path.open("w", encoding="utf-8") as out:
        for n in range(count):
            out.write(json.dumps({"id": f"T{n}", "ticket": f"Parcel A-{1000 + n % 9000} arrived broken"}) + "\n")


def measure(count: int, python: str) -> dict[str, float]:
    """Peak RSS (bytes) and wall time (s) of one ``mkl map`` over ``count`` rows, in a fresh folder."""
    with tempfile.TemporaryDirectory(prefix="mkl-memory-") as folder:
        here = Path(folder)
        write_rows(here / "rows.jsonl", count)
        command = [
            python,
            "-m",
            "mkl_notebook.cli",
            "map",
            str(EXAMPLES / "refund.mkl"),
            "--over",
            "rows.jsonl",
            "--key",
            "id",
            "--script",
            str(EXAMPLES / "refund.script.yaml"),
            "--store",
            str(here / "runs.sqlite"),
            "--quiet",
        ]
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        with (here / "out.txt").open("wb") as out, (here / "err.txt").open("wb") as err:
            began = time.perf_counter()
            child = subprocess.Popen(command, cwd=here, stdout=out, stderr=err, env=env)
            _, status, usage = os.wait4(child.pid, 0)
            wall = time.perf_counter() - began
        child.returncode = os.waitstatus_to_exitcode(status)
        last = (here / "out.txt").read_text(encoding="utf-8").strip().splitlines()[-1:]
        line = json.loads(last[0]) if last else {}
        if child.returncode != 0 or line.get("counts") != {"done": count}:
            raise SystemExit(
                f"{count} rows: exit {child.returncode}, {line.get('counts')}\n"
                + (here / "err.txt").read_text(encoding="utf-8")[-2000:]
            )
    factor = 1 if sys.platform == "darwin" else 1024  # ru_maxrss is KiB on Linux, bytes on macOS
    return {"rows": count, "peak": usage.ru_maxrss * factor, "wall": wall}


def table(results: list[dict[str, float]]) -> str:
    base = results[0]
    lines = [
        "| rows | peak RSS | × the 1st size | growth per extra row | wall time | per row |",
        "| ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for result in results:
        extra = result["rows"] - base["rows"]
        per_row = f"{(result['peak'] - base['peak']) / extra:,.0f} B" if extra else "—"
        lines.append(
            f"| {result['rows']:,.0f} | {result['peak'] / 2**20:,.1f} MiB | {result['peak'] / base['peak']:.2f}× "
            f"| {per_row} | {result['wall']:,.1f} s | {result['wall'] / result['rows'] * 1000:.2f} ms |"
        )
    return "\n".join(lines)


def section(results: list[dict[str, float]]) -> str:
    load = os.getloadavg()
    worst = max(result["peak"] / results[0]["peak"] for result in results)
    return "\n".join(
        [
            "## Memory of `mkl map` in the number of rows",
            "",
            f"Measured {datetime.date.today().isoformat()}, load average {load[0]:.2f} / {load[1]:.2f} / "
            f"{load[2]:.2f} ({os.cpu_count()} cores, shared). `benchmarks/memory.py`: the real `mkl map` in a child "
            "process over `examples/refund.mkl` (a tool call, two model calls and a judge per row, scripted and "
            "instant), threads executor, concurrency 8, rows from a JSONL file, its own SQLite store; peak RSS is "
            f"the child's `ru_maxrss`. Target: every size within {TARGET}× of the first. Worst here: {worst:.2f}×.",
            "",
            table(results),
        ]
    )


def write_section(text: str) -> None:
    sections.write_section("memory", text)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, nargs="+", default=list(SIZES), help="batch sizes, smallest first")
    parser.add_argument("--no-write", action="store_true", help="print the table, leave RESULTS.md alone")
    args = parser.parse_args()
    results = []
    for count in args.rows:
        results.append(measure(count, sys.executable))
        print(f"{count:,} rows: {results[-1]['peak'] / 2**20:,.1f} MiB, {results[-1]['wall']:,.1f} s", flush=True)
    text = section(results)
    print(text)
    if not args.no_write:
        write_section(text)


if __name__ == "__main__":
    main()
