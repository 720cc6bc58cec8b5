#!/usr/bin/env python
"""Peak memory of ``mkl audit`` in the number of answers: the audit streams, so 20,000 answers must cost what
1,000 do (within 1.2×), where it used to hold every answer (issue 50).

    .venv/bin/python benchmarks/audit_memory.py              # writes its section of benchmarks/RESULTS.md
    .venv/bin/python benchmarks/audit_memory.py --no-write   # prints it only
    .venv/bin/python benchmarks/audit_memory.py --answers 1000 5000 --rounds 1 --before none

Each store is made the way answers reach one: runs of ``examples/refund.mkl`` (a tool call, two scripted model
calls and a judge), each stopped at its human gate and answered with ``approve`` through the real answer path
(``Workspace.start`` then ``Workspace.resume``, as ``mkl run --hitl`` and ``mkl resume --reply`` do), every
answer signed. Then ``mkl audit --store STORE`` runs as a fresh process, as a person runs it, its stdout to a
file: the text table, and ``--json``. The child's peak resident set is what ``wait4`` reports for it
(``ru_maxrss``); wall time from start to exit. The code before the change (``--before REV``, taken out of git
into a folder of its own) is measured beside it in the same rounds, every command in turn, so a busy spell of
the shared machine hits them all. ``PYTHONUNBUFFERED`` is left out of the children's environment, as a person's
terminal has it, and each package's bytecode is saved by a warm-up run first. The stores are made by a child
process too, so that this one stays small (a child's ``ru_maxrss`` counts the memory it was forked with).
"""

from __future__ import annotations

import argparse
import datetime
import io
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
sys.path.insert(0, str(ROOT))

import sections  # noqa: E402  (benchmarks/sections.py, beside this file)

SIZES = (1_000, 20_000)
TARGET = 1.2
BEFORE = "b08bb67"  # the last commit whose `mkl audit` held every answer in memory
SHAPES = {"text": [], "--json": ["--json"]}


def build_store(path: Path, answers: int) -> float:
    """A store of ``answers`` refund runs, each answered at its gate, made by a child process (so that this
    one stays small: a child's ``ru_maxrss`` counts what it was forked with); the seconds it took."""
    began = time.perf_counter()
    subprocess.run([sys.executable, __file__, "--build", str(path), str(answers)], check=True, env=_env(ROOT))
    return time.perf_counter() - began


def _build(path: Path, answers: int) -> None:
    from mkl_notebook.app.settings import Settings
    from mkl_notebook.app.workspace import Workspace

    script = str(EXAMPLES / "refund.script.yaml")
    with Workspace(Settings.from_flags(store=str(path), hitl=True), follow_files=True) as ws:
        machine = ws.shelf.load(EXAMPLES / "refund.mkl")
        for n in range(answers):
            run = ws.start(machine.name, id=f"r{n}", script=script, input={"ticket": f"Parcel A-{1000 + n} broken"})
            ws.resume(f"r{n}", reply="approve", question=run.question_id, via="cli", by="auditor", script=script)


def _env(code: Path) -> dict[str, str]:
    """The children's environment: the package at ``code``, and no unbuffered output or bytecode left unsaved
    (a person's terminal has neither; each package's first run, a warm-up, saves its bytecode)."""
    env = {
        key: value for key, value in os.environ.items() if key not in ("PYTHONUNBUFFERED", "PYTHONDONTWRITEBYTECODE")
    }
    env["PYTHONPATH"] = str(code)
    return env


def code_before(rev: str, into: Path) -> Path | None:
    """The package as it was at ``rev``, in a folder of its own (None when git does not have that commit)."""
    found = subprocess.run(
        ["git", "archive", "--format=tar", rev, "mkl_notebook"], cwd=ROOT, capture_output=True, check=False
    )
    if found.returncode != 0:
        return None
    with tarfile.open(fileobj=io.BytesIO(found.stdout)) as archive:
        archive.extractall(into, filter="data")
    return into


def audit(code: Path, store: Path, shape: list[str], out: Path) -> tuple[float, float]:
    """Peak RSS (bytes) and wall time (s) of one ``mkl audit --store STORE`` run with the package at ``code``."""
    env = _env(code)
    command = [sys.executable, "-m", "mkl_notebook.cli", "audit", "--store", str(store), *shape]
    with out.open("wb") as stdout, (out.parent / "err.txt").open("wb") as stderr:
        began = time.perf_counter()
        child = subprocess.Popen(command, cwd=out.parent, stdout=stdout, stderr=stderr, env=env)
        _, status, usage = os.wait4(child.pid, 0)
        wall = time.perf_counter() - began
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{' '.join(command)} failed:\n" + (out.parent / "err.txt").read_text()[-2000:])
    factor = 1 if sys.platform == "darwin" else 1024  # ru_maxrss is KiB on Linux, bytes on macOS
    return usage.ru_maxrss * factor, wall


def _mib(size: float) -> str:
    return f"{size / 2**20:.1f} MiB"


def table(results: dict[tuple[str, str, int], list[tuple[float, float]]], sizes: list[int], codes: list[str]) -> str:
    small, large = sizes[0], sizes[-1]
    lines = [
        "| code | output | " + " | ".join(f"peak RSS, {n:,} answers" for n in sizes) + f" | {large:,} ÷ {small:,} "
        f"| wall, {small:,} | wall, {large:,} | wall per 1,000 answers |",
        "|---|---|" + "---:|" * (len(sizes) + 4),
    ]
    worst = 0.0
    for code in codes:
        for shape in SHAPES:
            peaks = [statistics.median(p for p, _ in results[code, shape, n]) for n in sizes]
            walls = [statistics.median(w for _, w in results[code, shape, n]) for n in sizes]
            ratio = peaks[-1] / peaks[0]
            if code == "streaming":
                worst = max(worst, ratio)
            per_thousand = (walls[-1] - walls[0]) / ((large - small) / 1000)
            lines.append(
                f"| {code} | {shape} | "
                + " | ".join(_mib(p) for p in peaks)
                + f" | {ratio:.2f}× | {walls[0]:.1f} s | {walls[-1]:.1f} s | {per_thousand:.2f} s |"
            )
    lines.append("")
    lines.append(f"Target: {large:,} answers within {TARGET}× of {small:,}. Streaming, worst here: {worst:.2f}×.")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--answers", type=int, nargs="+", default=list(SIZES), help="store sizes, smallest first")
    parser.add_argument("--rounds", type=int, default=3, help="rounds, every command once in each")
    parser.add_argument("--before", default=BEFORE, help="the git revision to compare with ('none': do not)")
    parser.add_argument("--no-write", action="store_true", help="print the section only")
    parser.add_argument("--build", nargs=2, metavar=("STORE", "ANSWERS"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.build:
        _build(Path(args.build[0]), int(args.build[1]))
        return
    sizes = sorted(args.answers)
    with tempfile.TemporaryDirectory(prefix="mkl-audit-memory-") as folder:
        here = Path(folder)
        codes = {"streaming": ROOT}
        if args.before != "none":
            before = code_before(args.before, here / "before")
            if before is None:
                print(f"(git has no {args.before}: the code before is not measured)", file=sys.stderr)
            else:
                codes[f"before ({args.before})"] = before
        stores, built = {}, {}
        for n in sizes:
            stores[n] = here / f"{n}.sqlite"
            built[n] = build_store(stores[n], n)
            print(f"built {n:,} answers in {built[n]:.0f} s", file=sys.stderr)
        for code in codes.values():  # a warm-up each: imports compiled and saved, files in the page cache
            audit(code, stores[sizes[0]], [], here / "out.txt")
        results: dict[tuple[str, str, int], list[tuple[float, float]]] = {}
        for _ in range(args.rounds):
            for n in sizes:
                for name, code in codes.items():
                    for shape, flags in SHAPES.items():
                        measured = audit(code, stores[n], flags, here / "out.txt")
                        results.setdefault((name, shape, n), []).append(measured)
                        print(f"{name} {shape} {n:,}: {_mib(measured[0])}, {measured[1]:.1f} s", file=sys.stderr)
    text = "\n".join(
        [
            "## Memory of `mkl audit` in the number of answers (`python benchmarks/audit_memory.py`)",
            "",
            f"{datetime.date.today().isoformat()}. `mkl audit --store STORE` (the text table, and `--json`) as a fresh "
            f"process, its stdout to a file; peak resident set of the child (`wait4`'s `ru_maxrss`) and wall time, "
            f"medians of {args.rounds} rounds, every command in turn within each. Each store holds runs of "
            "`examples/refund.mkl`, each answered once at its human gate through the real answer path (signed). "
            "*Streaming* reads one run at a time and prints each answer as its run is read; *before* is the code "
            "that read every run, then printed every answer. Wall per 1,000 answers: the growth from the small "
            "store to the large one, per 1,000 answers more.",
            "",
            table(results, sizes, list(codes)),
        ]
    )
    print(text)
    if not args.no_write:
        sections.write_section("audit-memory", text)


if __name__ == "__main__":
    main()
