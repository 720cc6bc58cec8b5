"""The approval flow in a real JupyterLab, driven through Debian's Chromium with Playwright.

Run All in 02-human-approval, click Approve on the rendered form, watch the second question
appear in the same output area, approve it, see the result, save, and read the saved file:
its embedded checkpoint must now say done. Screenshots land in test-artifacts/browser/.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import nbformat
import pytest

from mkl_notebook.durable import envelope
from mkl_notebook.durable.envelope import MIME_TYPE

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = Path("/usr/bin/chromium")
ARTIFACTS = ROOT / "test-artifacts" / "browser"
NOTEBOOK = "02-human-approval.ipynb"
RUN_ID = "approval-demo"
BROWSER_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
]


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _get_json(url: str) -> object:
    with urllib.request.urlopen(url, timeout=5) as response:
        return json.loads(response.read())


@pytest.fixture
def jupyter_lab(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    root = tmp_path / "lab"
    root.mkdir()
    shutil.copy(ROOT / "notebooks" / NOTEBOOK, root / NOTEBOOK)
    shutil.copytree(ROOT / "notebooks" / "data", root / "data", ignore=shutil.ignore_patterns(".mkl"))
    env = {key: value for key, value in os.environ.items() if not key.startswith("MKL_")}
    for name in (
        "JUPYTER_CONFIG_DIR",
        "JUPYTER_DATA_DIR",
        "JUPYTER_RUNTIME_DIR",
        "JUPYTERLAB_SETTINGS_DIR",
        "JUPYTERLAB_WORKSPACES_DIR",
        "IPYTHONDIR",
    ):
        folder = tmp_path / name.lower()
        folder.mkdir()
        env[name] = str(folder)
    settings = tmp_path / "jupyterlab_settings_dir" / "@jupyterlab" / "docmanager-extension"
    settings.mkdir(parents=True)
    (settings / "plugin.jupyterlab-settings").write_text(json.dumps({"autosave": False}))
    notices = tmp_path / "jupyterlab_settings_dir" / "@jupyterlab" / "apputils-extension"
    notices.mkdir(parents=True)
    (notices / "notification.jupyterlab-settings").write_text(json.dumps({"fetchNews": "false"}))
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    port = _free_port()
    log = open(tmp_path / "jupyter.log", "w")  # noqa: SIM115 - closed below
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "jupyter",
            "lab",
            "--no-browser",
            "--ip=127.0.0.1",
            f"--port={port}",
            "--port-retries=0",
            "--allow-root",
            "--IdentityProvider.token=",
            "--ServerApp.password=",
            f"--ServerApp.root_dir={root}",
            "--ServerApp.terminals_enabled=False",
            "--LabApp.news_url=None",
            "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
            "--LabApp.extension_manager=readonly",
        ],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                _get_json(f"{base}/api/status")
                break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError((tmp_path / "jupyter.log").read_text()[-3000:]) from None
                time.sleep(0.3)
        yield base, root
    finally:
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            server.kill()
        log.close()


def _kernel_ready(base: str) -> bool:
    kernels = _get_json(f"{base}/api/kernels")
    return any(k.get("execution_state") == "idle" and k.get("connections", 0) > 0 for k in kernels)  # type: ignore


def _open_and_run_all(page: Any, base: str, name: str) -> None:
    """Open notebook ``name``, wait until its kernel is attached and idle, and run all its cells."""
    page.goto(f"{base}/lab/tree/{name}")
    page.wait_for_selector(".jp-NotebookPanel .jp-Notebook", timeout=60_000)
    deadline = time.monotonic() + 60
    while not _kernel_ready(base):
        assert time.monotonic() < deadline, "the kernel never became idle"
        page.wait_for_timeout(300)
    page.click(".lm-MenuBar-itemLabel:text-is('Run')")
    page.click("li.lm-Menu-item[data-command='runmenu:run-all']")


def _run_checkpoint(path: Path) -> dict:
    saved = nbformat.read(path, as_version=4)
    for cell in saved.cells:
        for output in cell.get("outputs", []):
            data = output.get("data", {}).get(MIME_TYPE)
            if data is not None and data.get("run_id") == RUN_ID:
                header, _ = envelope.verify(json.loads(json.dumps(data)), str(path))
                return header
    raise AssertionError(f"no checkpoint of run {RUN_ID!r} in {path}")


def test_approve_in_jupyterlab_resumes_the_run_in_place(jupyter_lab: tuple[str, Path]) -> None:
    from playwright.sync_api import expect, sync_playwright

    assert CHROMIUM.exists(), "Debian's chromium must be installed (.ci/run installs it)"
    base, root = jupyter_lab
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=BROWSER_ARGS, headless=True)
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        try:
            _open_and_run_all(page, base, NOTEBOOK)

            first_ask = page.locator(".jp-OutputArea-output:has-text('The draft promises a refund. Approve it?')")
            expect(first_ask.first).to_be_visible(timeout=90_000)
            approve = page.locator(".jp-OutputArea-output button.jupyter-button:has-text('Approve')")
            expect(approve).to_have_count(1, timeout=30_000)
            # The last cell ran after the run cell returned: the run waits, nothing blocks.
            expect(page.locator(".jp-OutputArea-output:has-text('suspended at confirm')")).to_be_visible()
            page.screenshot(path=str(ARTIFACTS / "1-before-approve.png"), full_page=True)

            approve.click()
            second_ask = page.locator(".jp-OutputArea-output:has-text('Send this reply to the customer now?')")
            expect(second_ask.first).to_be_visible(timeout=60_000)
            page.screenshot(path=str(ARTIFACTS / "2-second-gate.png"), full_page=True)
            # The second form replaced the first in the same output area.
            run_cell = page.locator(".jp-CodeCell:has(button.jupyter-button:has-text('Approve'))")
            expect(run_cell).to_have_count(1)
            expect(page.locator("button.jupyter-button:has-text('Approve'):not([disabled])")).to_have_count(1)
            page.locator("button.jupyter-button:has-text('Approve'):not([disabled])").click()

            expect(run_cell.locator(".jp-OutputArea-output:has-text('Sent to the customer.')").first).to_be_visible(
                timeout=60_000
            )
            page.screenshot(path=str(ARTIFACTS / "3-after-approve.png"), full_page=True)

            page.locator(".jp-InputPrompt").first.click()
            page.keyboard.press("Control+s")
            expect(page.locator(".jp-mod-dirty")).to_have_count(0, timeout=30_000)
        finally:
            page.screenshot(path=str(ARTIFACTS / "4-final.png"), full_page=True)
            browser.close()

    header = _run_checkpoint(root / NOTEBOOK)
    assert header["status"] == "done"
    assert header["machine"] == "refund"


TWO_FORMS = "two-forms.ipynb"


def _two_forms_notebook(root: Path) -> None:
    """A run cell (its form) and a `%mkl pending` cell (a second form) for the same waiting run."""
    machine = (ROOT / "notebooks" / "data" / "refund.mkl").read_text(encoding="utf-8")
    notebook = nbformat.v4.new_notebook()
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    notebook.cells = [
        nbformat.v4.new_code_cell("%load_ext mkl_notebook"),
        nbformat.v4.new_code_cell(
            "%%mkl run --id two --script data/refund.script.yaml --set ticket=broken\n" + machine
        ),
        nbformat.v4.new_code_cell("%mkl pending"),
        nbformat.v4.new_code_cell(
            'import mkl_notebook\n\nprint("answers so far:", len(mkl_notebook.get_run("two").result_object.answers))'
        ),
    ]
    nbformat.write(notebook, root / TWO_FORMS)


def _journaled_replies(root: Path) -> list[dict]:
    import sqlite3

    with sqlite3.connect(root / ".mkl" / "runs.sqlite") as db:
        rows = db.execute("SELECT body FROM records WHERE run_id = 'two' ORDER BY seq").fetchall()
    return [record for (body,) in rows if (record := json.loads(body))["t"] == "reply"]


def test_two_forms_of_one_run_are_one_view_of_its_state(jupyter_lab: tuple[str, Path]) -> None:
    """Answer one form: the other disables in place and says who answered; clicking it journals nothing."""
    from playwright.sync_api import expect, sync_playwright

    base, root = jupyter_lab
    _two_forms_notebook(root)
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=BROWSER_ARGS, headless=True)
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        try:
            _open_and_run_all(page, base, TWO_FORMS)

            cells = page.locator(".jp-Notebook .jp-CodeCell")
            run_cell, pending_cell = cells.nth(1), cells.nth(2)
            approve_in_run = run_cell.locator("button.jupyter-button:has-text('Approve')")
            approve_in_pending = pending_cell.locator("button.jupyter-button:has-text('Approve')")
            expect(approve_in_run).to_be_enabled(timeout=90_000)
            expect(approve_in_pending).to_be_enabled(timeout=30_000)
            page.screenshot(path=str(ARTIFACTS / "two-forms-1-both-live.png"), full_page=True)

            approve_in_pending.click()
            expect(
                pending_cell.locator(".jp-OutputArea-output:has-text('Send this reply to the customer now?')").first
            ).to_be_visible(timeout=60_000)
            # The run cell's form caught up in place: disabled, and it says who answered and how.
            expect(approve_in_run).to_be_disabled(timeout=30_000)
            expect(run_cell.locator(".jp-OutputArea-output:has-text(\"Answered 'approve'\")")).to_be_visible()
            expect(run_cell.locator(".jp-OutputArea-output:has-text('via form')")).to_be_visible()
            approve_in_run.scroll_into_view_if_needed()
            page.screenshot(path=str(ARTIFACTS / "two-forms-2-one-answered.png"), full_page=True)

            approve_in_run.click(force=True)  # a click on the stale form: the browser sends nothing
            # Run the last cell again: the kernel handles messages in order, so a click sent before this
            # cell's request would be handled before it prints.
            count_cell = cells.nth(3)
            count_cell.locator(".jp-InputArea-editor").click()
            page.keyboard.press("Shift+Enter")
            expect(count_cell.locator(".jp-OutputArea-output:has-text('answers so far: 1')")).to_be_visible(
                timeout=30_000
            )
            replies = _journaled_replies(root)
            assert [(reply["value"], reply["via"]) for reply in replies] == [("approve", "form")]
            page.screenshot(path=str(ARTIFACTS / "two-forms-3-stale-click.png"), full_page=True)
        finally:
            page.screenshot(path=str(ARTIFACTS / "two-forms-4-final.png"), full_page=True)
            browser.close()
