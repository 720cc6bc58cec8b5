#!/usr/bin/env python
"""Approval to continue, in a real JupyterLab driven through Chromium, and resuming a run from a received notebook.

    .venv/bin/python benchmarks/approval.py [--quick] [--gates 20] [--notebooks 2] [--rounds 7] [--no-write]

Needs what the browser tests need: Debian's ``chromium`` and the ``playwright`` package (no browser download;
see tests/browser_support.py). Writes the ``<!-- approval:start -->`` section of benchmarks/RESULTS.md.

*Approval to continue*: a notebook whose run stops at ``--gates`` human gates one after another (a
generative state, then an escalate gate with an ``ask:``; the scripted model answers at once). JupyterLab
opens it and runs all its cells; then, for each gate, Approve is clicked and the time is taken from the
click (a capturing ``click`` listener notes ``performance.now()``) until the next question, or at the last
gate the run's result, is in the page: a function polled on every animation frame, so on the first frame
drawn with it (``page.wait_for_function(..., polling="raf")``, which returns that frame's
``performance.now()``). The first click of each page is a warm-up (the first message over the widget's
comm) and is left out. Median and 90th percentile over all the other clicks. Two paces: *as a person clicks*,
each click once the page has drawn all the last click changed (it heard nothing over its websockets for
``QUIET`` seconds: a kernel draws the trace and diagram a moment after the question, while the person reads it),
and *back to back*, each click as soon as the question is drawn (the kernel then skips the trace it would have
drawn in between).

*Resume from a received notebook*: a run of ``RESUME_STEPS`` model steps that then waits at a gate, run by
one person (their own key) with nbclient as JupyterLab runs it, the notebook saved. Another person (another
key, so ``--trust-file``) then, in a new folder with no store, each round from a fresh copy:
``mkl resume FILE --run ID --question Q --reply approve --trust-file`` in a subprocess (the whole command:
interpreter start-up, imports, reading the notebook, checking its seals, replaying the journal, the last
step, the write-back), and in process ``get_run(ID, notebook=FILE, trust_file=True)`` (a new session each
round), alone and followed by ``submit("approve")``.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import nbformat
import yaml

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(ROOT / "tests"))

import sections  # noqa: E402  (benchmarks/sections.py, beside this file)
from run import machine_description  # noqa: E402  (benchmarks/run.py, beside this file)

RESUME_STEPS = 20
RESULT = "All the gates were approved."

# A frame's check: the text ``wanted`` is in an output, and (for a question) an enabled Approve button is too.
DRAWN = """([wanted, question]) => {
  const outputs = Array.from(document.querySelectorAll('.jp-OutputArea-output'));
  if (!outputs.some((o) => o.textContent.includes(wanted))) return false;
  if (question && !Array.from(document.querySelectorAll('.jp-OutputArea-output button.jupyter-button'))
      .some((b) => !b.disabled && b.textContent.includes('Approve'))) return false;
  return performance.now();
}"""
CLICK_CLOCK = "document.addEventListener('click', () => { window.__mklClickAt = performance.now(); }, true)"
# When the page last heard from a kernel or the server (every message a websocket brings: the page's own clock).
HEARD = """(() => {
  const Socket = window.WebSocket;
  window.WebSocket = function (...args) {
    const socket = new Socket(...args);
    socket.addEventListener('message', () => { window.__mklHeardAt = performance.now(); });
    return socket;
  };
  window.WebSocket.prototype = Socket.prototype;
  Object.assign(window.WebSocket, Socket);
})();"""
QUIET = 0.5  # seconds without a message after which the page has drawn all a click changed
SETTLED = "(quiet) => performance.now() - (window.__mklHeardAt || 0) > quiet"
PACES = ("as a person clicks", "back to back")


def ask(gate: int, gates: int) -> str:
    return f"Gate {gate} of {gates}: approve?"


def gates_machine(gates: int, steps_before: int = 0) -> str:
    """A machine of ``steps_before`` plain steps, then ``gates`` gates (a step, then an escalate gate that asks),
    then a step that records the result."""
    states: dict[str, Any] = {}
    for index in range(steps_before):
        states[f"p{index}"] = {
            "structure": "One line.",
            "prompt": f"Prepare {index}",
            "output": f"prep{index}",
            "gates": [{"when": "otherwise", "then": "ok", "to": f"p{index + 1}" if index + 1 < steps_before else "g0"}],
        }
    for index in range(gates):
        after = f"g{index + 1}" if index + 1 < gates else "finish"
        states[f"g{index}"] = {
            "structure": "One line.",
            "prompt": f"Step {index}",
            "output": f"step{index}",
            "gates": [
                {
                    "when": "this step needs a sign-off",
                    "escalate": True,
                    "to": after,
                    "ask": ask(index + 1, gates),
                    "reply_to": f"approval{index}",
                },
                {"when": "otherwise", "then": "ok", "to": after},
            ],
        }
    states["finish"] = {
        "structure": "One line.",
        "prompt": "Record the result",
        "output": "outcome",
        "gates": [{"when": "otherwise", "then": "ok", "to": "END"}],
    }
    document = {
        "mklang": "0.4",
        "machine": "gates",
        "entry": "p0" if steps_before else "g0",
        "budget": steps_before + gates + 5,
        "result": "outcome",
        "states": states,
    }
    return yaml.safe_dump(document, sort_keys=False, width=1000)


SCRIPT = json.dumps(
    {"llm": {"produce": {"Prepare": "ready", "Step ": "a step's answer", "Record the result": RESULT}, "judge": [0]}}
)


def write_notebook(path: Path, run_id: str, machine: str) -> None:
    notebook = nbformat.v4.new_notebook()
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    notebook.cells = [
        nbformat.v4.new_code_cell("%load_ext mkl_notebook"),
        nbformat.v4.new_code_cell(f"%%mkl run --id {run_id} --script gates.script.json\n{machine}"),
    ]
    nbformat.write(notebook, path)


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(share * (len(ordered) - 1)))]


def uptime() -> str:
    try:
        return subprocess.run(["uptime"], capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "uptime unavailable"


# -- approval to continue, in JupyterLab -------------------------------------------------------------


def shut_down_kernels(page: Any, base: str) -> None:
    """Shut down every kernel, as the page would (its cookies, and the XSRF token the server gave it)."""
    from browser_support import get_json

    xsrf = next((c["value"] for c in page.context.cookies() if c["name"] == "_xsrf"), "")
    for kernel in get_json(f"{base}/api/kernels"):  # type: ignore[union-attr]
        answer = page.request.delete(f"{base}/api/kernels/{kernel['id']}", headers={"X-XSRFToken": xsrf})
        if not answer.ok:
            raise SystemExit(f"could not shut the kernel down: {answer.status} {answer.text()[:200]}")
    deadline = time.monotonic() + 60
    while get_json(f"{base}/api/kernels"):
        if time.monotonic() > deadline:
            raise SystemExit("the notebook's kernel did not shut down")
        time.sleep(0.2)


def click_through(page: Any, base: str, name: str, gates: int, paced: bool) -> list[float]:
    """Open notebook ``name``, run all, and approve each of its ``gates`` questions: the milliseconds from each
    click until the next question (or the result) is drawn; ``paced``: each click once the page has drawn all the
    last one changed."""
    from browser_support import kernel_idle

    # A workspace of its own (?reset): the last notebook's tab, restored, could take the Run All.
    page.goto(f"{base}/lab/tree/{name}?reset")
    page.wait_for_selector(".jp-NotebookPanel .jp-Notebook", timeout=60_000)
    deadline = time.monotonic() + 60
    while not kernel_idle(base):
        if time.monotonic() > deadline:
            raise SystemExit("the notebook's kernel never became idle")
        page.wait_for_timeout(200)
    page.evaluate(CLICK_CLOCK)
    page.click(".lm-MenuBar-itemLabel:text-is('Run')")
    page.click("li.lm-Menu-item[data-command='runmenu:run-all']")
    page.wait_for_function(DRAWN, arg=[ask(1, gates), True], polling="raf", timeout=120_000)
    taken = []
    approve = page.locator(".jp-OutputArea-output button.jupyter-button:has-text('Approve'):not([disabled])")
    for gate in range(1, gates + 1):
        wanted, question = (ask(gate + 1, gates), True) if gate < gates else (RESULT, False)
        if page.evaluate(DRAWN, [wanted, False]):
            raise SystemExit(f"{wanted!r} is in the page before gate {gate} is approved: it cannot time the click")
        if paced:  # a person reads the question: the page has heard nothing more for a while
            page.wait_for_function(SETTLED, arg=QUIET * 1000, polling=100, timeout=60_000)
        approve.first.click()
        drawn_at = page.wait_for_function(DRAWN, arg=[wanted, question], polling="raf", timeout=60_000).json_value()
        taken.append(drawn_at - page.evaluate("window.__mklClickAt"))
    return taken


EARLY, LATE = range(2, 6), range(15, 21)  # the gates whose clicks are set against each other


def approval_times(gates: int, notebooks: int) -> dict[str, list[list[float]]]:
    """Each pace's clicks, notebook by notebook and gate by gate (``notebooks`` notebooks at each pace, in turn)."""
    from browser_support import browser_page, lab_env, serve

    folder = Path(tempfile.mkdtemp(prefix="mkl-approval-"))
    root = folder / "lab"
    root.mkdir()
    (root / "gates.script.json").write_text(SCRIPT, encoding="utf-8")
    machine = gates_machine(gates)
    turns = [(index, pace) for index in range(notebooks) for pace in PACES]  # the paces in turn, alike in load
    for index, pace in turns:
        write_notebook(root / f"gates{index}-{PACES.index(pace)}.ipynb", f"gates-{index}-{PACES.index(pace)}", machine)
    samples: dict[str, list[list[float]]] = {pace: [] for pace in PACES}  # each notebook's clicks, gate by gate
    with serve(root, lab_env(folder), folder / "jupyter.log") as base, browser_page() as page:
        page.add_init_script(HEARD)
        for index, pace in turns:
            name = f"gates{index}-{PACES.index(pace)}.ipynb"
            taken = click_through(page, base, name, gates, paced=pace == PACES[0])
            print(f"{name} ({pace}): " + ", ".join(f"{each:.0f}" for each in taken) + " ms", file=sys.stderr)
            samples[pace].append(taken)
            shut_down_kernels(page, base)  # so that the next notebook's kernel is the only one to wait for
            page.goto("about:blank")
    return samples


# -- resume from a received notebook ------------------------------------------------------------------


@contextlib.contextmanager
def data_folder(path: Path) -> Iterator[dict[str, str]]:
    """This process's environment with ``JUPYTER_DATA_DIR`` (where a person's signing key lives) at ``path``."""
    path.mkdir(parents=True, exist_ok=True)
    before = os.environ.get("JUPYTER_DATA_DIR")
    os.environ["JUPYTER_DATA_DIR"] = str(path)
    try:
        yield dict(os.environ)
    finally:
        if before is None:
            del os.environ["JUPYTER_DATA_DIR"]
        else:
            os.environ["JUPYTER_DATA_DIR"] = before


class Received:
    """A notebook whose run waits at a gate, made by one person, resumed each round from a fresh copy by
    another."""

    def __init__(self, folder: Path) -> None:
        from lab_client import run_all

        self.folder = folder
        sender = folder / "sender"
        sender.mkdir(parents=True)
        self.script = sender / "gates.script.json"
        self.script.write_text(SCRIPT, encoding="utf-8")
        self.notebook = sender / "received.ipynb"
        write_notebook(self.notebook, "received", gates_machine(1, steps_before=RESUME_STEPS))
        with data_folder(folder / "sender-data") as env:
            run_all(self.notebook, env={"JUPYTER_DATA_DIR": env["JUPYTER_DATA_DIR"]})
        self.data = folder / "receiver-data"
        self.data.mkdir()
        self.counter = iter(range(10**9))
        listing = self._mkl(["runs", str(self.notebook)], self.folder)
        self.question = json.loads(listing.stdout.strip().splitlines()[-1])["runs"][0]["question_id"]

    def _mkl(self, argv: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
        env = {**os.environ, "JUPYTER_DATA_DIR": str(self.data), "PYTHONPATH": str(ROOT)}
        return subprocess.run(
            [sys.executable, "-m", "mkl_notebook.cli", *argv], cwd=cwd, env=env, capture_output=True, text=True
        )

    def copy(self) -> Path:
        place = self.folder / f"receiver-{next(self.counter)}"
        place.mkdir()
        shutil.copy(self.notebook, place / "received.ipynb")
        return place / "received.ipynb"

    def cli(self) -> float:
        copy = self.copy()
        argv = ["resume", copy.name, "--run", "received", "--question", self.question, "--reply", "approve"]
        argv += ["--script", str(self.script), "--trust-file", "--quiet"]
        start = time.perf_counter()
        done = self._mkl(argv, copy.parent)
        took = time.perf_counter() - start
        if done.returncode != 0:
            raise SystemExit(f"mkl resume failed ({done.returncode}): {done.stdout[-2000:]}{done.stderr[-2000:]}")
        return took

    def in_process(self, submit: bool) -> float:
        from mkl_notebook.app.settings import Settings
        from mkl_notebook.notebook.session import notebook_session

        copy = self.copy()
        with data_folder(self.data):
            session = notebook_session(Settings(store=str(copy.parent / ".mkl" / "runs.sqlite")))
            start = time.perf_counter()
            run = session.get_run("received", notebook=str(copy), script=str(self.script), trust_file=True)
            if submit:
                run.submit("approve")
            took = time.perf_counter() - start
        wanted = "done" if submit else "suspended"
        if run.status != wanted:
            raise SystemExit(f"get_run: the run is {run.status}, not {wanted}")
        return took


def resume_times(rounds: int) -> dict[str, list[float]]:
    received = Received(Path(tempfile.mkdtemp(prefix="mkl-received-")))
    actions = {
        "cli": received.cli,
        "get_run": lambda: received.in_process(False),
        "get_run + submit": lambda: received.in_process(True),
    }
    for action in actions.values():  # warm-up: bytecode, imports
        action()
    times: dict[str, list[float]] = {name: [] for name in actions}
    order = list(actions.items())
    for _ in range(rounds):
        for name, action in order:
            times[name].append(action())
        order.reverse()
    return times


# -- the report ---------------------------------------------------------------------------------------


def report(gates: int, notebooks: int, rounds: int) -> str:
    load_before = uptime()
    by_pace = approval_times(gates, notebooks)
    resumes = resume_times(rounds)
    load_after = uptime()
    import jupyterlab
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path="/usr/bin/chromium", headless=True)
        chromium = browser.version
        browser.close()
    ms = statistics.median
    lines = [
        "## Approval to continue, and resuming a received notebook (`python benchmarks/approval.py`)",
        "",
        f"Measured {datetime.date.today().isoformat()} on {machine_description()}; JupyterLab "
        f"{jupyterlab.__version__}, headless Chromium {chromium}. Load (`uptime`) before: `{load_before}`; after: "
        f"`{load_after}`. No peer publishes these two numbers. How each is taken is in the script's docstring.",
        "",
        f"**Approval to continue**: in JupyterLab, a run of {gates} gates one after another, {notebooks} notebooks "
        "at each pace opened in turn; from the click on Approve until the next question (or the run's result) is "
        "drawn in the page (the first click of each page left out). *As a person clicks*: each click once the page "
        f"has drawn all the last one changed (nothing heard for {QUIET} s); *back to back*: each as soon as the "
        "question is drawn. Until 2026-12-04 "
        "a click grew slower along the run (about 60 ms at gate 2, 150-190 ms at gate 20, p90 136 ms on a quiet "
        "machine): every form shared one layout model, and ipywidgets leaves a listener on a layout for each view "
        "ever drawn with it, so removing a view scanned them all; forms now share layouts only among their own "
        "widgets. Until 2026-12-07 the page also kept a view of the form per question asked (1.22x late/early at "
        "load under 1): JupyterLab gives a redrawn output to the renderer that drew the last one, which ipywidgets' "
        "renderer answers with one view more; the form's place is now blanked before it is redrawn. Since "
        "2026-12-07 a click's trace, diagram and redrawn form place follow its question by 0.15 s, so that the page "
        "draws the question first (the code before it, measured on this machine in the same hour: median 77 ms, "
        "p90 93 ms as a person clicks; 86 ms and 121 ms back to back), and "
        "a batch of redraws waits once, not before each, for ipykernel to flush its output streams.",
        "",
        "Along the run (does a click cost more the longer the run is?): the median click at gates 2-5 and at gates "
        "15-20, and their ratio (1.0: a click costs the same throughout).",
        "",
        "| pace | clicks | median | p90 | fastest | slowest | gates 2-5 | gates 15-20 | late / early |",
        "|---|---|---|---|---|---|---|---|---|",
        *(pace_row(pace, by_notebook) for pace, by_notebook in by_pace.items()),
        "",
        f"**Resume from a received notebook**: a run of {RESUME_STEPS} model steps waiting at a gate, saved in a "
        "notebook by another person (another key), taken up from a fresh copy with no store, the reply "
        f"`approve`, its last two steps made; medians of {rounds} rounds, the three in turn.",
        "",
        "| how | median | fastest |",
        "|---|---|---|",
        f"| `mkl resume FILE --run … --reply approve --trust-file` (a new process, the write-back included) | "
        f"{ms(resumes['cli']) * 1e3:.0f} ms | {min(resumes['cli']) * 1e3:.0f} ms |",
        f"| `get_run(…, notebook=FILE, trust_file=True)` in process (taken up, not answered) | "
        f"{ms(resumes['get_run']) * 1e3:.0f} ms | {min(resumes['get_run']) * 1e3:.0f} ms |",
        f"| `get_run(…)` then `submit('approve')` in process (to the run's end) | "
        f"{ms(resumes['get_run + submit']) * 1e3:.0f} ms | {min(resumes['get_run + submit']) * 1e3:.0f} ms |",
    ]
    return "\n".join(lines)


def pace_row(pace: str, by_notebook: list[list[float]]) -> str:
    """A pace's line of the table: all its clicks (the first of each page left out), and along the run."""
    ms = statistics.median
    clicks = [each for taken in by_notebook for each in taken[1:]]  # the first click of a page warms up
    early = [taken[gate - 1] for taken in by_notebook for gate in EARLY if gate <= len(taken)]
    late = [taken[gate - 1] for taken in by_notebook for gate in LATE if gate <= len(taken)]
    along = f"{ms(early):.0f} ms | {ms(late):.0f} ms | {ms(late) / ms(early):.2f}×" if late else "– | – | –"
    return (
        f"| {pace} | {len(clicks)} | {ms(clicks):.0f} ms | {percentile(clicks, 0.9):.0f} ms | {min(clicks):.0f} ms | "
        f"{max(clicks):.0f} ms | {along} |"
    )


def write_section(text: str) -> None:
    sections.write_section("approval", text)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--gates", type=int, default=20)
    parser.add_argument("--notebooks", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--quick", action="store_true", help="5 gates, 1 notebook, 3 rounds")
    parser.add_argument("--no-write", action="store_true", help="print the section, leave RESULTS.md as it is")
    args = parser.parse_args()
    gates, notebooks, rounds = (5, 1, 3) if args.quick else (args.gates, args.notebooks, args.rounds)
    text = report(gates, notebooks, rounds)
    print(text)
    if not args.no_write:
        write_section(text)


if __name__ == "__main__":
    main()
