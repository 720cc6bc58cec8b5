"""How much widget state a saved notebook of waiting runs carries per form.

A notebook keeps the state of the widget models its client saw: nbclient (``jupyter nbconvert --execute``,
papermill) always, JupyterLab when ipywidgets' *Save Jupyter widget state in notebooks* is on. Before, every
form a run waited on was about two dozen models, and a notebook of 50 waiting runs was mostly widget state.
The widgets of one form share their layouts and styles (not wider: ipywidgets leaves a listener on a layout
for every view ever drawn with it, and a layout shared by every form made each click of a long run slower),
and the project's JupyterLab extension leaves the models only
forms use out of the state Lab saves (the question and its commands are printed beside each form), while
any other widget's state is kept as ipywidgets saves it.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import nbformat
import pytest
from browser_support import browser_page, checkout_extension, kernel_idle, lab_env, serve
from lab_client import run_all

from support import refund_notebook

ROOT = Path(__file__).resolve().parent.parent
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"
SLIDER = "import ipywidgets\nslider = ipywidgets.IntSlider(value=7, description='mine')\nslider"


def waiting_runs(path: Path, count: int, *, slider: bool = False) -> None:
    """A notebook of ``count`` cells each leaving a run of the refund machine waiting for a person (scripted:
    no model), after a cell showing a slider of the person's own when ``slider``."""
    runs = {f"waiting-{index}": f"Parcel A-{index} arrived broken" for index in range(count)}
    refund_notebook(path, runs, first=(SLIDER,) if slider else ())


def saved_state(path: Path) -> dict[str, Any]:
    """The widget models the saved notebook at ``path`` carries, by model id."""
    widgets = nbformat.read(path, as_version=4).metadata.get("widgets", {})
    return dict(widgets.get(WIDGET_STATE, {}).get("state", {}))


def state_bytes(path: Path) -> int:
    return len(json.dumps(nbformat.read(path, as_version=4).metadata.get("widgets", {}), indent=1))


def test_a_notebook_executed_by_nbclient_carries_a_few_kilobytes_of_widget_state_per_waiting_form(
    tmp_path: Path,
) -> None:
    one, four = tmp_path / "one.ipynb", tmp_path / "four.ipynb"
    waiting_runs(one, 1)
    waiting_runs(four, 4)
    run_all(one)
    run_all(four)
    forms = [output for cell in nbformat.read(four, as_version=4).cells for output in cell.get("outputs", [])]
    assert sum("application/vnd.jupyter.widget-view+json" in output.get("data", {}) for output in forms) == 4
    per_form = (state_bytes(four) - state_bytes(one)) / 3
    # nbclient saves every model's whole state: a form of a layout and a style per widget was 23 KB
    assert per_form < 16 * 1024, f"{per_form / 1024:.1f} KB of widget state per waiting form"
    layouts = [m for m in saved_state(four).values() if m["model_name"] == "LayoutModel"]
    ones = [m for m in saved_state(one).values() if m["model_name"] == "LayoutModel"]
    assert len(layouts) == 4 * len(ones) <= 4 * 4  # a form's widgets share theirs; no form shares another's


def _until(page: Any, condition: Any, what: str, seconds: float = 120) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, what
        page.wait_for_timeout(300)


@pytest.mark.browser
def test_jupyterlab_saving_widget_state_keeps_the_forms_out_and_the_persons_own_widgets_in(tmp_path: Path) -> None:
    from playwright.sync_api import expect

    count = 3
    root = tmp_path / "lab"
    root.mkdir()
    waiting_runs(root / "forms.ipynb", count, slider=True)
    env = lab_env(tmp_path)
    checkout_extension(env)
    manager = Path(env["JUPYTERLAB_SETTINGS_DIR"]) / "@jupyter-widgets" / "jupyterlab-manager"
    manager.mkdir(parents=True)
    (manager / "plugin.jupyterlab-settings").write_text(json.dumps({"saveState": True}))
    with serve(root, env, tmp_path / "jupyter.log") as base, browser_page() as page:
        page.goto(f"{base}/lab/tree/forms.ipynb")
        page.wait_for_selector(".jp-NotebookPanel .jp-Notebook", timeout=60_000)
        _until(page, lambda: kernel_idle(base), "the kernel never became idle")
        page.click(".lm-MenuBar-itemLabel:text-is('Run')")
        page.click("li.lm-Menu-item[data-command='runmenu:run-all']")
        expect(page.locator(".jp-OutputArea-output button:has-text('Approve')")).to_have_count(count, timeout=120_000)
        expect(page.locator(".jp-OutputArea-output .widget-slider")).to_have_count(1)
        _until(
            page,
            lambda: kernel_idle(base) and not page.locator(".jp-InputPrompt:text-is('[*]:')").count(),
            "Run All never finished",
        )
        page.locator(".jp-InputPrompt").first.click()
        page.keyboard.press("Control+s")
        expect(page.locator(".jp-mod-dirty")).to_have_count(0, timeout=30_000)

    saved = nbformat.read(root / "forms.ipynb", as_version=4)
    state = saved_state(root / "forms.ipynb")
    sliders = [model for model in state.values() if model["model_name"] == "IntSliderModel"]
    assert len(sliders) == 1 and sliders[0]["state"]["value"] == 7  # the person's own widget, as Lab saves it
    for reference in ("layout", "style"):  # with the models it uses
        assert sliders[0]["state"][reference].removeprefix("IPY_MODEL_") in state
    assert len(state) == 3, sorted(model["model_name"] for model in state.values())
    # each form still reads without a kernel: its question and the command that answers it are printed
    printed = [
        output["data"]["text/plain"]
        for cell in saved.cells
        for output in cell.get("outputs", [])
        if "The draft promises a refund" in output.get("data", {}).get("text/plain", "")
    ]
    assert len([text for text in printed if "--reply approve" in text]) == count
