"""Take the screenshot the README and the docs' front page show: a run waiting at its approval form in JupyterLab.

It drives the browser tests' machinery (``tests/browser_support.py``): a JupyterLab of its own on a copy of the
tutorials, Debian's Chromium headless (or the one ``MKL_TEST_CHROMIUM`` names) through Playwright. It runs
tutorial 02 with Run All, waits for the run cell's Approve button, and saves that cell as
``docs/_static/approval-form.png``. Run it from a checkout where the test extra is installed::

    .venv/bin/python docs/screenshot.py
"""

from __future__ import annotations

import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from browser_support import browser_page, kernel_idle, lab_env, serve  # noqa: E402

TUTORIAL = "02-human-approval.ipynb"
OUT = ROOT / "docs" / "_static" / "approval-form.png"


def main() -> int:
    from playwright.sync_api import expect

    with tempfile.TemporaryDirectory(prefix="mkl-screenshot-") as scratch:
        folder = Path(scratch)
        root = folder / "lab"
        root.mkdir()
        shutil.copy(ROOT / "notebooks" / TUTORIAL, root / TUTORIAL)
        shutil.copytree(ROOT / "notebooks" / "data", root / "data", ignore=shutil.ignore_patterns(".mkl"))
        with serve(root, lab_env(folder), folder / "jupyter.log") as base, browser_page() as page:
            page.set_viewport_size({"width": 1280, "height": 820})
            page.goto(f"{base}/lab/tree/{TUTORIAL}")
            page.wait_for_selector(".jp-NotebookPanel .jp-Notebook", timeout=60_000)
            deadline = time.monotonic() + 60
            while not kernel_idle(base):
                if time.monotonic() > deadline:
                    raise SystemExit("the kernel never became idle")
                page.wait_for_timeout(300)
            page.click(".lm-MenuBar-itemLabel:text-is('Run')")
            page.click("li.lm-Menu-item[data-command='runmenu:run-all']")
            run_cell = page.locator(".jp-CodeCell:has(.jp-InputArea:has-text('--id approval-demo'))")
            approve = run_cell.locator("button.jupyter-button:has-text('Approve')")
            expect(approve).to_have_count(1, timeout=120_000)
            expect(approve).to_be_enabled()
            page.mouse.move(0, 0)  # no hover highlight in the picture
            run_cell.evaluate("cell => cell.scrollIntoView({block: 'start'})")  # its %mkl line at the top
            expect(run_cell.locator("button.jupyter-button:has-text('Approve')")).to_be_in_viewport()
            OUT.parent.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(OUT))  # the whole window: JupyterLab around the cell
    print(f"wrote {OUT.relative_to(ROOT)} ({OUT.stat().st_size // 1024} KB)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
