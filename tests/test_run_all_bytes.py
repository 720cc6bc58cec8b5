"""Executing an unchanged notebook with a waiting form again leaves the file byte for byte as it was: the form's
widgets have model ids derived from what they show, in the outputs and in the widget state nbclient keeps in
the file's metadata; so two people's Run All of one notebook merge in nbdime without a conflict."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
from nbclient import NotebookClient
from test_static_exports import waiting_notebook

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"


def _execute(source: Path, out: Path) -> bytes:
    """``source`` executed by nbclient in a fresh kernel in its folder (as ``jupyter nbconvert --execute``, without
    per-cell timings, as JupyterLab saves), written to ``out``: the file's bytes."""
    notebook = nbformat.read(source, as_version=4)
    client = NotebookClient(
        notebook,
        kernel_name="python3",
        timeout=120,
        record_timing=False,
        resources={"metadata": {"path": str(source.parent)}},
    )
    client.execute()
    nbformat.write(notebook, out)
    return out.read_bytes()


def test_two_executions_of_a_notebook_with_a_waiting_form_write_the_same_bytes(tmp_path: Path) -> None:
    waiting_notebook(tmp_path / "waiting.ipynb")
    # Written elsewhere, as a person keeps an executed copy: two notebooks of the same cells in the kernel's folder
    # would leave it unable to tell which one it runs (and it would say so).
    (tmp_path / "executed").mkdir()
    first = _execute(tmp_path / "waiting.ipynb", tmp_path / "executed" / "first.ipynb")
    second = _execute(tmp_path / "waiting.ipynb", tmp_path / "executed" / "second.ipynb")  # the store holds the run
    saved = json.loads(first)
    views = [
        output["data"][WIDGET_VIEW]["model_id"]
        for cell in saved["cells"]
        for output in cell.get("outputs", [])
        if WIDGET_VIEW in output.get("data", {})
    ]
    assert len(views) == 1 and views[0] in saved["metadata"]["widgets"][WIDGET_STATE]["state"]  # a form was saved
    assert first == second

    # Two people's Run All of the same notebook (saved over its base) merge cleanly.
    base, ours, theirs = (tmp_path / name for name in ("base.ipynb", "ours.ipynb", "theirs.ipynb"))
    shutil.copy(tmp_path / "waiting.ipynb", base)
    ours.write_bytes(first)
    theirs.write_bytes(second)
    merged = tmp_path / "merged.ipynb"
    command = [sys.executable, "-m", "nbdime", "merge", str(base), str(ours), str(theirs), "--out", str(merged)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert nbformat.read(merged, as_version=4) == nbformat.read(ours, as_version=4)
