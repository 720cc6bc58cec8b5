#!/usr/bin/env python
"""How many bytes a notebook of N waiting runs takes once saved, and how much of it is widget state.

    .venv/bin/python benchmarks/notebook_size.py --sizes 50        # every way; writes its section of RESULTS.md
    .venv/bin/python benchmarks/notebook_size.py --sizes 50 --no-lab

The notebook loads the extension, defines the tutorials' refund machine and starts N runs of it, each
waiting for a person (scripted answers: no model). It is executed three ways:

- by nbclient in a kernel that believes a Jupyter server started it (``JPY_SESSION_NAME`` set, as
  ``tests/lab_client.py`` does), so it draws every form, and nbclient saves every widget model it saw
  (``store_widget_state=True``, its default): the most widget state a client may keep;
- by ``jupyter nbconvert --to notebook --execute --inplace``: a headless client, where nobody can click, so
  no form is drawn (papermill alike);
- by a real JupyterLab in Chromium, with ipywidgets' *Save Jupyter widget state in notebooks* turned on
  (``saveState``: off by default, on for whoever wants widgets to redraw without a kernel): Run All, wait
  until every form is drawn, Ctrl+S. The page loads the project's extension as built in this checkout.

For each it prints the file's size, the bytes of ``metadata.widgets`` and the number of widget models saved
there, then the bytes each waiting run's cell adds to the file by kind of output (as saved: what the file
loses without them, over the number of runs). Sizes, not times: the machine's load does not change them.
"""

from __future__ import annotations

import argparse
import datetime
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import nbformat

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

import sections  # noqa: E402  (benchmarks/sections.py, beside this file)

from support import refund_notebook  # noqa: E402  (tests/support.py)

WIDGET_STATE = "application/vnd.jupyter.widget-state+json"


def waiting_runs(path: Path, count: int) -> None:
    """A notebook of ``count`` cells, each starting a run of the refund machine that waits for a person."""
    refund_notebook(path, {f"waiting-{index:03d}": f"Parcel A-{1000 + index} arrived broken" for index in range(count)})


def measure(path: Path) -> dict[str, Any]:
    """The saved file's size, its widget state's and the number of models in it (in bytes as saved)."""
    notebook = nbformat.read(path, as_version=4)
    state = notebook.metadata.get("widgets", {}).get(WIDGET_STATE, {}).get("state", {})
    widgets = notebook.metadata.get("widgets")
    return {
        "file_kb": path.stat().st_size / 1024,
        "widgets_kb": len(json.dumps(widgets, indent=1)) / 1024 if widgets else 0.0,
        "models": len(state),
    }


KINDS = {  # the mime type that names an output's kind: the output is a form, a run view, a diagram, a widget
    "application/vnd.mkl.form+json": "form",
    "application/vnd.mkl.run+json": "run view",
    "application/vnd.mkl.run-ref+json": "run view",  # JupyterLab's: the checkpoint moved to the metadata
    "image/svg+xml": "diagram",
    "application/vnd.jupyter.widget-view+json": "widget",
}


def by_kind(path: Path) -> dict[str, float]:
    """Bytes per waiting run each kind of output (``form text/html``, ``diagram image/svg+xml``, ...) and each key
    of the notebook's metadata (the checkpoints JupyterLab's extension keeps there) take in the saved file at
    ``path``: what the file, as nbformat writes it, loses without it, over the number of runs."""
    notebook = nbformat.read(path, as_version=4)
    runs = [cell for cell in notebook.cells if cell.source.startswith("%mkl run")]
    whole = len(nbformat.writes(notebook).encode("utf-8"))
    keys = sorted(
        {
            (_kind(output), mime)
            for cell in runs
            for output in cell.get("outputs", [])
            for mime in output.get("data", {})
        }
    )
    sizes: dict[str, float] = {}
    for kind, mime in keys:
        trimmed = nbformat.from_dict(json.loads(json.dumps(notebook)))
        for cell in trimmed.cells:
            if cell.source.startswith("%mkl run"):
                for output in cell.get("outputs", []):
                    if _kind(output) == kind:
                        output.get("data", {}).pop(mime, None)
        sizes[f"{kind} {mime}"] = (whole - len(nbformat.writes(trimmed).encode("utf-8"))) / len(runs)
    bare = nbformat.from_dict(json.loads(json.dumps(notebook)))
    for cell in bare.cells:
        if cell.source.startswith("%mkl run"):
            cell.outputs = []
    sizes["all outputs"] = (whole - len(nbformat.writes(bare).encode("utf-8"))) / len(runs)
    for key in sorted(set(notebook.metadata) - {"widgets", "kernelspec", "language_info"}):
        trimmed = nbformat.from_dict(json.loads(json.dumps(notebook)))
        del trimmed.metadata[key]
        sizes[f"notebook metadata {key}"] = (whole - len(nbformat.writes(trimmed).encode("utf-8"))) / len(runs)
    return sizes


def _kind(output: Any) -> str:
    return next((KINDS[mime] for mime in output.get("data", {}) if mime in KINDS), "other")


def by_nbclient(folder: Path, count: int) -> dict[str, Any]:
    from lab_client import run_all

    path = folder / f"nbclient-{count}.ipynb"
    waiting_runs(path, count)
    run_all(path, timeout=600)
    return {**measure(path), "kinds": by_kind(path)}


def by_nbconvert(folder: Path, count: int) -> dict[str, Any]:
    """``jupyter nbconvert --to notebook --execute --inplace``: a headless client, where nobody can click a form."""
    path = folder / f"nbconvert-{count}.ipynb"
    waiting_runs(path, count)
    command = [sys.executable, "-m", "jupyter", "nbconvert", "--to", "notebook", "--execute", "--inplace", path.name]
    subprocess.run(command, cwd=folder, check=True, capture_output=True, timeout=1200)
    return {**measure(path), "kinds": by_kind(path)}


def by_lab(folder: Path, count: int) -> dict[str, Any]:
    from browser_support import browser_page, checkout_extension, lab_env, serve
    from playwright.sync_api import expect

    root = folder / f"lab-{count}"
    root.mkdir()
    name = f"waiting-{count}.ipynb"
    waiting_runs(root / name, count)
    env = lab_env(folder / f"lab-env-{count}")
    checkout_extension(env)  # this checkout's extension, as built by `jlpm build:prod`
    manager = Path(env["JUPYTERLAB_SETTINGS_DIR"]) / "@jupyter-widgets" / "jupyterlab-manager"
    manager.mkdir(parents=True)
    (manager / "plugin.jupyterlab-settings").write_text(json.dumps({"saveState": True}))
    with serve(root, env, folder / f"lab-{count}.log") as base, browser_page() as page:
        page.goto(f"{base}/lab/tree/{name}")
        page.wait_for_selector(".jp-NotebookPanel .jp-Notebook", timeout=60_000)
        deadline = time.monotonic() + 60
        while not _kernel_idle(base):
            assert time.monotonic() < deadline, "the kernel never became idle"
            page.wait_for_timeout(300)
        page.click(".lm-MenuBar-itemLabel:text-is('Run')")
        page.click("li.lm-Menu-item[data-command='runmenu:run-all']")
        approve = page.locator(".jp-OutputArea-output button:has-text('Approve')")
        expect(approve).to_have_count(count, timeout=600_000)
        deadline = time.monotonic() + 600
        while not _kernel_idle(base) or page.locator(".jp-InputPrompt:text-is('[*]:')").count():
            assert time.monotonic() < deadline, "Run All never finished"
            page.wait_for_timeout(500)
        page.wait_for_timeout(2000)  # the extension's metadata writes, after the last cell
        page.locator(".jp-InputPrompt").first.click()
        page.keyboard.press("Control+s")
        expect(page.locator(".jp-mod-dirty")).to_have_count(0, timeout=60_000)
    return {**measure(root / name), "kinds": by_kind(root / name)}


def _kernel_idle(base: str) -> bool:
    from browser_support import get_json

    try:
        kernels = get_json(f"{base}/api/kernels")
    except OSError:
        return False
    return any(k.get("execution_state") == "idle" and k.get("connections", 0) > 0 for k in kernels)  # type: ignore


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10, 50])
    parser.add_argument("--no-lab", action="store_true", help="nbclient only (no browser)")
    parser.add_argument("--no-nbclient", action="store_true", help="JupyterLab only (no nbclient, no nbconvert)")
    parser.add_argument("--no-write", action="store_true", help="print the section, leave RESULTS.md as it is")
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        for count in args.sizes:
            if not args.no_nbclient:
                rows.append(("nbclient", count, by_nbclient(folder, count)))
                rows.append(("jupyter nbconvert --execute", count, by_nbconvert(folder, count)))
            if not args.no_lab:
                rows.append(("JupyterLab (saveState on)", count, by_lab(folder, count)))
    text = report(rows, args.sizes)
    print(text)
    if not args.no_write and not args.no_lab and not args.no_nbclient:  # every way measured: the section whole
        sections.write_section("notebook-size", text)


def report(rows: list[tuple[str, int, dict[str, Any]]], sizes: list[int]) -> str:
    """The section of RESULTS.md: what was measured, each saved file, and the bytes each waiting run adds."""
    counts = " and ".join(str(size) for size in sizes)
    lines = [
        f"## A notebook of {counts} waiting runs, saved (`python benchmarks/notebook_size.py --sizes "
        f"{' '.join(map(str, sizes))}`)",
        "",
        f"Measured {datetime.date.today().isoformat()} (sizes, not times: load does not change them). The refund "
        "machine, one cell per run, each run waiting for a person; saved three ways (see the script's docstring): "
        "nbclient in a kernel that believes a Jupyter server started it (it draws every form and nbclient keeps "
        "every widget model: the most state a client may save), `jupyter nbconvert --execute` (a headless client: "
        "no form is drawn where nobody can click; papermill alike), and a real JupyterLab with ipywidgets' *Save "
        "widget state* on (the extension keeps the forms' models out). Before issue 38, 50 waiting runs saved by "
        "JupyterLab took 1,570 KB, 910 KB of it widget state (1,100 models); with no widget state left, 588 KB "
        "(11.7 KB a run), until each checkpoint was packed with preset words (2.6 -> 1.9 KB), a run's view left out "
        "a visits table that repeated its trace, its diagram's text twin said the path taken rather than the "
        "machine again, and the drawing's arrow heads stopped being SVG markers.",
        "",
        "| saved by | waiting runs | file (KB) | widget state (KB) | widget models | per run (KB) |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for who, count, got in rows:
        per = got["widgets_kb"] / count
        lines.append(
            f"| {who} | {count} | {got['file_kb']:.0f} | {got['widgets_kb']:.0f} | {got['models']} | {per:.2f} |"
        )
    lines += [
        "",
        "Bytes each waiting run adds, by kind of output (and, for JupyterLab, the checkpoint the extension keeps in "
        "the notebook's metadata):",
        "",
        "| saved by | waiting runs | output | bytes per run |",
        "|---|---:|---|---:|",
    ]
    for who, count, got in rows:
        lines += [f"| {who} | {count} | {kind} | {size:.0f} |" for kind, size in got["kinds"].items()]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
