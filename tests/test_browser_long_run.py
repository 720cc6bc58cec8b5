"""A run with many gates, clicked through in a real JupyterLab: the page keeps one view of each form.

JupyterLab hands a redrawn output to the renderer that drew it last, and ipywidgets' renderer then adds a
view of the widget and keeps the old ones alive, each following its model: redrawn at every question, the
form's place held a view per question asked, and each click of a long run redrew every form before it. The
page is asked directly (JupyterLab exposes its application to the test) how many views each widget output
holds.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import nbformat
import pytest
import yaml
from browser_support import browser_page, kernel_idle, lab_env, serve

pytestmark = pytest.mark.browser
GATES = 6
RESULT = "All the gates were approved."

# Every widget output of the open notebook: how many widget views its renderer holds (one when it draws one).
VIEWS_PER_OUTPUT = """() => {
  const panel = window.jupyterapp.shell.currentWidget;
  const counts = [];
  for (const cell of panel.content.widgets) {
    const area = cell.outputArea;
    if (!area) continue;
    for (const wrapped of area.widgets) {
      for (const renderer of (wrapped.widgets || [wrapped])) {
        if (renderer.mimeType === 'application/vnd.jupyter.widget-view+json') counts.push(renderer.widgets.length);
      }
    }
  }
  return counts;
}"""


def _ask(gate: int) -> str:
    return f"Gate {gate} of {GATES}: approve?"


def _machine() -> str:
    states: dict[str, Any] = {}
    for index in range(GATES):
        after = f"g{index + 1}" if index + 1 < GATES else "finish"
        states[f"g{index}"] = {
            "structure": "One line.",
            "prompt": f"Step {index}",
            "output": f"step{index}",
            "gates": [
                {"when": "this step needs a sign-off", "escalate": True, "to": after, "ask": _ask(index + 1)},
                {"when": "otherwise", "then": "ok", "to": after},
            ],
        }
    states["finish"] = {
        "structure": "One line.",
        "prompt": "Record the result",
        "output": "outcome",
        "gates": [{"when": "otherwise", "then": "ok", "to": "END"}],
    }
    document = {"mklang": "0.4", "machine": "gates", "entry": "g0", "budget": GATES + 5, "result": "outcome"}
    return yaml.safe_dump({**document, "states": states}, sort_keys=False, width=1000)


def test_a_form_redrawn_at_each_of_six_questions_is_one_view_in_the_page(tmp_path: Path) -> None:
    root = tmp_path / "lab"
    root.mkdir()
    script = {"llm": {"produce": {"Step ": "a step's answer", "Record the result": RESULT}, "judge": [0]}}
    (root / "gates.script.json").write_text(json.dumps(script))
    notebook = nbformat.v4.new_notebook()
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    notebook.cells = [
        nbformat.v4.new_code_cell("%load_ext mkl_notebook"),
        nbformat.v4.new_code_cell(f"%%mkl run --id gates --script gates.script.json\n{_machine()}"),
    ]
    nbformat.write(notebook, root / "gates.ipynb")
    exposed = ["--LabApp.expose_app_in_browser=True"]  # window.jupyterapp: the page's output areas, to count
    with serve(root, lab_env(tmp_path), tmp_path / "jupyter.log", options=exposed) as base, browser_page() as page:
        page.goto(f"{base}/lab/tree/gates.ipynb")
        page.wait_for_selector(".jp-NotebookPanel .jp-Notebook", timeout=60_000)
        deadline = time.monotonic() + 60
        while not kernel_idle(base):
            assert time.monotonic() < deadline, "the kernel never became idle"
            page.wait_for_timeout(200)
        page.click(".lm-MenuBar-itemLabel:text-is('Run')")
        page.click("li.lm-Menu-item[data-command='runmenu:run-all']")
        approve = page.locator(".jp-OutputArea-output button.jupyter-button:has-text('Approve'):not([disabled])")
        for gate in range(1, GATES):
            page.wait_for_selector(f".jp-OutputArea-output:has-text('{_ask(gate)}')", timeout=60_000)
            approve.first.wait_for(timeout=30_000)
            approve.first.click()
        # The last question, asked in the form's place redrawn five times: the page holds one view of it.
        page.wait_for_selector(f".jp-OutputArea-output:has-text('{_ask(GATES)}')", timeout=60_000)
        approve.first.wait_for(timeout=30_000)
        views = page.evaluate(VIEWS_PER_OUTPUT)
        assert views and max(views) == 1, f"views each widget output of the page holds: {views}"
        approve.first.click()
        page.wait_for_selector(f".jp-OutputArea-output:has-text('{RESULT}')", timeout=60_000)
