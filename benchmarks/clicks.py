#!/usr/bin/env python
"""The kernel's share of an approval click, along a run of many gates: does a click cost more the longer the run?

    .venv/bin/python benchmarks/clicks.py [--gates 20] [--rounds 5] [--no-write]

In a real IPython shell with the extension loaded (real widgets, the view and form a notebook draws), a run of
``--gates`` human gates (``benchmarks/approval.py``'s machine, answered by a script at once) is started, then
Approve is clicked at each gate in turn. Each click is timed in CPU seconds of this process, from the click to
the handler's return: journaling the reply, the advance to the next gate, every redraw of the view and the
form, the checkpoint for the notebook's metadata. The browser's share (drawing what changed) is
``benchmarks/approval.py``'s. Medians over ``--rounds`` runs, each in a new folder and session; the clicks at
gates 2-5 are set against those at gates 15-20 (a run whose clicks cost the same throughout gives 1.0).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

import sections  # noqa: E402  (benchmarks/sections.py, beside this file)
from approval import SCRIPT, gates_machine  # noqa: E402

EARLY, LATE = range(2, 6), range(15, 21)


def _one_run(gates: int) -> list[float]:
    """CPU milliseconds of each click of a new run of ``gates`` gates, in a new folder and session."""
    from IPython.core.interactiveshell import InteractiveShell

    from mkl_notebook.notebook import session as session_module

    shell = InteractiveShell.instance()
    views: list[Any] = []
    with tempfile.TemporaryDirectory() as folder:
        os.chdir(folder)
        Path("gates.script.json").write_text(SCRIPT, encoding="utf-8")
        session_module._SESSION = None
        shell.extension_manager.loaded.discard("mkl_notebook")
        shell.display_pub.publish = lambda *args, **kwargs: None  # what the cell draws goes nowhere
        assert shell.run_cell("%load_ext mkl_notebook").success
        magics = shell.magics_manager.registry["MklMagics"]
        present = magics.present

        def recording(run: Any, view: Any) -> None:
            views.append(view)
            present(run, view)

        magics.present = recording
        assert shell.run_cell("%%mkl run --id g --script gates.script.json\n" + gates_machine(gates)).success
        costs = []
        for _ in range(gates):
            form = views[-1].current_form
            start = time.process_time()
            form.approve.click()
            costs.append((time.process_time() - start) * 1000)
        os.chdir(HERE)
    return costs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--gates", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--no-write", action="store_true", help="print the section only")
    args = parser.parse_args()
    by_gate: list[list[float]] = [[] for _ in range(args.gates)]
    for _ in range(args.rounds):
        for gate, cost in enumerate(_one_run(args.gates), start=1):
            by_gate[gate - 1].append(cost)
    medians = [statistics.median(costs) for costs in by_gate]
    early = statistics.median(medians[gate - 1] for gate in EARLY if gate <= args.gates)
    late = statistics.median(medians[gate - 1] for gate in LATE if gate <= args.gates)
    every = sorted(cost for costs in by_gate[1:] for cost in costs)  # the first click warms up
    p90 = every[min(len(every) - 1, round(0.9 * (len(every) - 1)))]
    lines = [
        "## The kernel's share of an approval click, along a run (`python benchmarks/clicks.py`)",
        "",
        f"CPU per click in a real IPython shell (real widgets and views), a run of {args.gates} gates, medians of "
        f"{args.rounds} runs; load average when run: {os.getloadavg()[0]:.1f}.",
        "",
        "| clicks | CPU per click |",
        "|---|---|",
        f"| at gates 2-5 (median) | {early:.1f} ms |",
        f"| at gates 15-20 (median) | {late:.1f} ms |",
        f"| late / early | {late / early:.2f}× |",
        f"| 90th percentile, all clicks but the first | {p90:.1f} ms |",
        "",
        "By gate: " + ", ".join(f"{gate}: {cost:.1f}" for gate, cost in enumerate(medians, start=1)) + " (ms).",
    ]
    text = "\n".join(lines)
    print(text)
    if not args.no_write:
        sections.write_section("clicks", text)


if __name__ == "__main__":
    main()
