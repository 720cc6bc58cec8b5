#!/usr/bin/env python
"""What the ``mkl`` command costs before it does anything: ``mkl --help`` and a usage error, beside the floor
of ``python -c 'import argparse'`` in the same run.

    .venv/bin/python benchmarks/startup.py              # writes its section of benchmarks/RESULTS.md
    .venv/bin/python benchmarks/startup.py --no-write   # prints it only

Each command is a fresh process (as a person's terminal starts it); its CPU (user + system, from the
children's resource usage) is taken per run, with the package's bytecode cached (an untimed round first). The
commands take turns within each round, so a busy spell of the shared machine hits them all; medians of every run,
and each one's ratio to the floor.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import sections  # noqa: E402  (benchmarks/sections.py, beside this file)

# What the `mkl` script pip writes runs (`mkl_notebook.cli:main`), run here so that it imports this tree's code.
CONSOLE_SCRIPT = "import re, sys; from mkl_notebook.cli import main; sys.argv[0] = 'mkl'; sys.exit(main())"
COMMANDS = {
    "python -c 'import argparse' (the floor)": [sys.executable, "-c", "import argparse"],
    "mkl --help": [sys.executable, "-m", "mkl_notebook.cli", "--help"],
    "mkl --help, as the console script starts it": [sys.executable, "-c", CONSOLE_SCRIPT, "--help"],
    "mkl run --help": [sys.executable, "-m", "mkl_notebook.cli", "run", "--help"],
    "mkl runs --bogus (a usage error)": [sys.executable, "-m", "mkl_notebook.cli", "runs", "--bogus"],
}


# As a person's terminal starts it: with the package's bytecode cached, as an installed one's is (pip compiles it;
# an editable install writes it on first use); the warm-up round writes it.
CHILD_ENV = {name: value for name, value in os.environ.items() if name != "PYTHONDONTWRITEBYTECODE"}


def _cpu(command: list[str]) -> float:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False, cwd=ROOT, env=CHILD_ENV)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=21, help="rounds, every command once in each")
    parser.add_argument("--no-write", action="store_true", help="print the section only")
    args = parser.parse_args()
    times: dict[str, list[float]] = {name: [] for name in COMMANDS}
    for command in COMMANDS.values():  # the warm-up round (untimed): the bytecode is written
        _cpu(command)
    for _ in range(args.rounds):
        for name, command in COMMANDS.items():
            times[name].append(_cpu(command))
    floor = statistics.median(next(iter(times.values())))
    lines = [
        "## Starting the command line (`python benchmarks/startup.py`)",
        "",
        f"CPU of a fresh process (user + system), the package's bytecode cached, medians of {args.rounds} runs "
        "each, the commands in turn; "
        f"load average when run: {os.getloadavg()[0]:.1f}.",
        "",
        "| command | CPU | ÷ the floor |",
        "|---|---:|---:|",
    ]
    for name, taken in times.items():
        median = statistics.median(taken)
        lines.append(f"| {name} | {median * 1000:.1f} ms | {median / floor:.2f}× |")
    lines += [
        "",
        "Building the parser and printing its help or a usage error loads only `mkl_notebook.cli.parser`, the flag "
        "table and the defaults its help states: no engine, store, signatures, model client, widgets, Dask or "
        "renderer, nor `typing`, `dataclasses` or `pathlib` (tests/test_startup_imports.py holds it); each command "
        "imports what it needs when it runs, and a usage error also loads what takes secrets out of its line. "
        "`python -m` adds `runpy`'s imports to the console script's. Before issue 49 `mkl --help` took 227 ms "
        "(11.5×); before its parser had a module of its own, 3.2× (66 ms), measured as here.",
    ]
    text = "\n".join(lines)
    print(text)
    if not args.no_write:
        sections.write_section("startup", text)


if __name__ == "__main__":
    main()
