"""A run's diagram is drawn in every frontend, by Debian's Chromium: an HTML export read offline (nbconvert,
lab and classic templates), Notebook 7 and JupyterLab show its SVG drawing (there is no mermaid source for
JupyterLab's mermaid renderer, which would write its own drawing into the output). The notebook runs the
refund machine until it waits at its first gate. Screenshots land in test-artifacts/diagram/."""

from __future__ import annotations

import base64
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import nbformat
import pytest
from browser_support import browser_page, lab_env, serve
from lab_client import run_all
from test_browser import REFUND_MACHINE, _open_and_run_all, _wait_for_kernel, _write_notebook

ROOT = Path(__file__).resolve().parent.parent
ARTIFACTS = ROOT / "test-artifacts" / "diagram"
NOTEBOOK = "diagram.ipynb"
STATES = ("draft", "confirm · pending", "release", "send", "withdraw")  # as the drawing names them
SVG_URI = re.compile(r'<img\b[^>]*\bsrc="data:image/svg\+xml;base64,([A-Za-z0-9+/=]+)"')

DRAWN_SVG = "img => decodeURIComponent(img.src.slice(img.src.indexOf(',') + 1))"  # the SVG an <img> shows
pytestmark = [pytest.mark.filterwarnings("ignore::DeprecationWarning"), pytest.mark.browser]


def _folder(root: Path) -> Path:
    """A folder with the refund machine's data and a notebook whose run cell waits at the first gate."""
    root.mkdir()
    shutil.copytree(ROOT / "notebooks" / "data", root / "data", ignore=shutil.ignore_patterns(".mkl"))
    machine = REFUND_MACHINE.read_text(encoding="utf-8")
    _write_notebook(
        root / NOTEBOOK,
        nbformat.v4.new_code_cell(
            "%%mkl run --id drawn --script data/refund.script.yaml --set ticket=broken\n" + machine
        ),
    )
    return root


def _offline(page: Any) -> None:
    """Let the page load its own file and nothing from the network (an export read on a train)."""
    page.route(re.compile(r"^(?!file:).*"), lambda route: route.abort())


FIRST_ROW_ALIGNMENT = "table => [...table.tBodies[0].rows[0].cells].map((cell) => getComputedStyle(cell).textAlign)"


def _without_scripts(html: str) -> str:
    return re.sub(r"<script\b.*?</script>", "", html, flags=re.DOTALL | re.IGNORECASE)


@pytest.mark.parametrize("template", ["lab", "classic"])
def test_an_html_export_shows_the_diagram_offline(tmp_path: Path, template: str) -> None:
    from playwright.sync_api import expect

    root = _folder(tmp_path / "export")
    ran = run_all(root / NOTEBOOK)
    assert not [o for cell in ran.cells for o in cell.get("outputs", []) if o["output_type"] == "error"]
    command = [sys.executable, "-m", "jupyter", "nbconvert", "--to", "html", f"--template={template}", NOTEBOOK]
    converted = subprocess.run(command, cwd=root, capture_output=True, text=True, check=False)
    assert converted.returncode == 0, converted.stderr
    page_source = _without_scripts((root / "diagram.html").read_text(encoding="utf-8"))
    drawings = [base64.b64decode(found).decode("utf-8") for found in SVG_URI.findall(page_source)]
    [drawing] = [svg for svg in drawings if "State diagram of machine refund" in svg]
    assert all(f">{state}" in drawing for state in STATES)
    assert 'class="mermaid"' not in page_source  # the SVG only

    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with browser_page() as page:
        _offline(page)
        page.goto((root / "diagram.html").as_uri(), wait_until="domcontentloaded")
        image = page.locator("img[src^='data:image/svg+xml']")
        expect(image).to_have_count(1)
        expect(image).to_be_visible()
        image.scroll_into_view_if_needed()
        assert image.evaluate("img => img.complete && img.naturalWidth > 100 && img.naturalHeight > 100")
        page.screenshot(path=str(ARTIFACTS / f"export-{template}.png"), full_page=True)


@pytest.fixture
def folder(tmp_path: Path) -> Iterator[tuple[Path, dict[str, str]]]:
    yield _folder(tmp_path / "served"), lab_env(tmp_path)


def test_notebook_7_draws_the_diagram(folder: tuple[Path, dict[str, str]], tmp_path: Path) -> None:
    """Notebook 7 has no mermaid renderer for outputs (only for Markdown): it shows the SVG drawing."""
    from playwright.sync_api import expect

    root, env = folder
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with serve(root, env, tmp_path / "notebook.log", app=("jupyter", "notebook")) as base, browser_page() as page:
        try:
            page.goto(f"{base}/notebooks/{NOTEBOOK}")
            page.wait_for_selector(".jp-Notebook .jp-CodeCell", timeout=60_000)
            _wait_for_kernel(page, base)
            page.click(".lm-MenuBar-itemLabel:text-is('Run')")
            page.click("li.lm-Menu-item[data-command='runmenu:run-all']")
            run_cell = page.locator(".jp-CodeCell:has(.jp-InputArea:has-text('--id drawn'))")
            drawing = run_cell.locator(".jp-RenderedSVG img[src^='data:image/svg+xml']")
            expect(drawing).to_have_count(1, timeout=90_000)
            expect(drawing).to_be_visible()
            drawing.scroll_into_view_if_needed()
            assert drawing.evaluate("img => img.complete && img.naturalWidth > 100 && img.naturalHeight > 100")
            svg = drawing.evaluate(DRAWN_SVG)
            assert "State diagram of machine refund" in svg and all(f">{state}" in svg for state in STATES), svg[:2000]
            expect(run_cell.locator(".jp-RenderedMermaid")).to_have_count(0)
            expect(run_cell.locator(".jp-OutputArea-output:has-text('stateDiagram-v2')")).to_have_count(0)
            expect(run_cell.locator(".jp-OutputArea-output:has-text('the path taken (entry draft')")).to_have_count(0)
        finally:
            page.screenshot(path=str(ARTIFACTS / "notebook7.png"), full_page=True)


def test_jupyterlab_draws_the_svg_and_leaves_the_output_as_the_kernel_wrote_it(
    folder: tuple[Path, dict[str, str]], tmp_path: Path
) -> None:
    """JupyterLab draws the SVG; no mermaid renderer rewrites the output, so the saved file holds the kernel's."""
    from playwright.sync_api import expect

    root, env = folder
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with serve(root, env, tmp_path / "lab.log") as base, browser_page() as page:
        try:
            _open_and_run_all(page, base, NOTEBOOK)
            run_cell = page.locator(".jp-CodeCell:has(.jp-InputArea:has-text('--id drawn'))")
            view = run_cell.locator(".jp-OutputArea-output:has-text('Pending (escalated)')")
            expect(view).to_have_count(1, timeout=90_000)
            run_cell.locator(".jp-OutputArea").last.scroll_into_view_if_needed()
            drawn = run_cell.locator(".jp-RenderedSVG img[src^='data:image/svg+xml']")
            expect(drawn).to_have_count(1, timeout=30_000)
            expect(drawn).to_be_visible()
            assert "State diagram of machine refund" in drawn.evaluate(DRAWN_SVG)
            assert "confirm · pending" in drawn.evaluate(DRAWN_SVG)
            expect(run_cell.locator(".jp-RenderedMermaid")).to_have_count(0)
            drawn.scroll_into_view_if_needed()
            # Lab's stylesheet right-aligns table cells: the trace's words read left, its numbers right.
            summary = page.locator("summary", has_text=re.compile(r"^Trace of"))  # a run's view: the trace first
            trace = view.locator("details", has=summary).locator("table")
            aligned = trace.first.evaluate(FIRST_ROW_ALIGNMENT)
            assert aligned == ["right", "left", "left", "left", "left", "left", "right", "left"], aligned
        finally:
            page.screenshot(path=str(ARTIFACTS / "jupyterlab.png"), full_page=True)
