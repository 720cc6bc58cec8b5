"""The approval flow in a real JupyterLab, driven through Debian's Chromium with Playwright.

Run All in 02-human-approval, click Approve on the rendered form, watch the second question
appear in the same output area, approve it, see the result, save, and read the saved file:
its embedded checkpoint must now say done. Screenshots land in test-artifacts/browser/.
"""

from __future__ import annotations

import itertools
import json
import os
import re
import shutil
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import nbformat
import pytest
import yaml
from browser_support import browser_page, checkout_extension, get_json, lab_env, serve

from mkl_notebook.app.replies import os_account
from mkl_notebook.checkpoints import envelope
from mkl_notebook.checkpoints import notebook_file as nbfile
from mkl_notebook.checkpoints.envelope import BATCH_MIME_TYPE, MIME_TYPE, REF_MIME_TYPE
from mkl_notebook.checkpoints.seals import key_fingerprint, signatures
from mkl_notebook.render.common import who_answered

from support import mkl_cli, store_rows

ROOT = Path(__file__).resolve().parent.parent
ARTIFACTS = ROOT / "test-artifacts" / "browser"
pytestmark = pytest.mark.browser  # every test here drives Chromium
NOTEBOOK = "02-human-approval.ipynb"
RUN_ID = "approval-demo"


@pytest.fixture
def jupyter_lab(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    root = tmp_path / "lab"
    root.mkdir()
    for tutorial in (ROOT / "notebooks").glob("0*.ipynb"):
        shutil.copy(tutorial, root / tutorial.name)
    shutil.copytree(ROOT / "notebooks" / "data", root / "data", ignore=shutil.ignore_patterns(".mkl"))
    env = lab_env(tmp_path)  # a newcomer: their own key, trusting no one (the tutorials ship no signed run)
    with serve(root, env, tmp_path / "jupyter.log") as base:
        yield base, root


def _kernel_ready(base: str) -> bool:
    try:
        kernels = get_json(f"{base}/api/kernels")
    except OSError:  # the server may answer 500 while a kernel restarts
        return False
    return any(k.get("execution_state") == "idle" and k.get("connections", 0) > 0 for k in kernels)  # type: ignore


def _wait_for_kernel(page: Any, base: str) -> None:
    deadline = time.monotonic() + 60
    while not _kernel_ready(base):
        assert time.monotonic() < deadline, "the kernel never became idle"
        page.wait_for_timeout(300)


def _open(page: Any, base: str, name: str) -> None:
    """Open notebook ``name`` and wait until its kernel is attached and idle."""
    page.goto(f"{base}/lab/tree/{name}")
    page.wait_for_selector(".jp-NotebookPanel .jp-Notebook", timeout=60_000)
    _wait_for_kernel(page, base)


def _open_and_run_all(page: Any, base: str, name: str) -> None:
    """Open notebook ``name``, wait until its kernel is attached and idle, and run all its cells."""
    _open(page, base, name)
    _watch_prompts(page)
    page.click(".lm-MenuBar-itemLabel:text-is('Run')")
    page.click("li.lm-Menu-item[data-command='runmenu:run-all']")


def _run_checkpoint(path: Path) -> dict:
    """The header of the run's checkpoint as the saved notebook holds it (metadata, or an output)."""
    return nbfile.find_run(path, RUN_ID).header


def test_approve_in_jupyterlab_resumes_the_run_in_place(jupyter_lab: tuple[str, Path]) -> None:
    from playwright.sync_api import expect

    base, root = jupyter_lab
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with browser_page() as page:
        try:
            _open_and_run_all(page, base, NOTEBOOK)

            first_ask = page.locator(".jp-OutputArea-output:has-text('The draft promises a refund. Approve it?')")
            expect(first_ask.first).to_be_visible(timeout=90_000)
            approve = page.locator(".jp-OutputArea-output button.jupyter-button:has-text('Approve')")
            expect(approve).to_have_count(1, timeout=30_000)
            run_cell = page.locator(".jp-CodeCell:has(.jp-InputArea:has-text('--id approval-demo'))")
            expect(run_cell).to_have_count(1)
            # The question comes first in the run cell's outputs, printed (it reads where no widget draws), its
            # form right below, above the run's view and its diagram.
            first_output = run_cell.locator(".jp-OutputArea-output").first
            expect(first_output).to_contain_text("The draft promises a refund. Approve it?")
            form = run_cell.locator(".jp-OutputArea-output").nth(1)
            expect(form.locator("button.jupyter-button:has-text('Approve')")).to_have_count(1)
            # Run All again in the same kernel: the form is made anew with the same widget ids (the earlier
            # one closed first), and JupyterLab draws it and sends its click as before.
            prompt = run_cell.locator(".jp-InputPrompt")
            before = prompt.inner_text()
            _watch_prompts(page)
            page.click(".lm-MenuBar-itemLabel:text-is('Run')")
            page.click("li.lm-Menu-item[data-command='runmenu:run-all']")
            expect(prompt).not_to_have_text(before, timeout=60_000)
            _wait_until_run(page, base, root / NOTEBOOK)
            expect(form.locator("button.jupyter-button:has-text('Approve')")).to_have_count(1, timeout=30_000)
            # The last cell ran after the run cell returned: the run waits, nothing blocks.
            expect(page.locator(".jp-OutputArea-output:has-text('done - Sent to the customer.')")).to_be_visible()
            run_cell.scroll_into_view_if_needed()
            page.screenshot(path=str(ARTIFACTS / "1-before-approve.png"), full_page=True)
            run_cell.screenshot(path=str(ARTIFACTS / "1-run-cell-waiting.png"))

            approve.click()
            second_ask = page.locator(".jp-OutputArea-output:has-text('Send this reply to the customer now?')")
            expect(second_ask.first).to_be_visible(timeout=60_000)
            page.screenshot(path=str(ARTIFACTS / "2-second-gate.png"), full_page=True)
            # The second form replaced the first in the same place.
            expect(run_cell.locator("button.jupyter-button:has-text('Approve'):not([disabled])")).to_have_count(1)
            run_cell.locator("button.jupyter-button:has-text('Approve'):not([disabled])").click()

            expect(run_cell.locator(".jp-OutputArea-output:has-text('Sent to the customer.')").first).to_be_visible(
                timeout=60_000
            )
            # Where the form was, what was answered, by whom and how; no button is left.
            expect(first_output).to_contain_text("Answered 'approve' (by ")
            expect(first_output).to_contain_text("via form")
            expect(run_cell.locator("button.jupyter-button")).to_have_count(0)
            page.screenshot(path=str(ARTIFACTS / "3-after-approve.png"), full_page=True)
            run_cell.screenshot(path=str(ARTIFACTS / "3-run-cell-answered.png"))

            page.locator(".jp-InputPrompt").first.click()
            page.keyboard.press("Control+s")
            expect(page.locator(".jp-mod-dirty")).to_have_count(0, timeout=30_000)
        finally:
            page.screenshot(path=str(ARTIFACTS / "4-final.png"), full_page=True)

    header = _run_checkpoint(root / NOTEBOOK)
    assert header["status"] == "done"
    assert header["machine"] == "refund"


TWO_FORMS = "two-forms.ipynb"


REFUND_MACHINE = ROOT / "notebooks" / "data" / "refund.mkl"
SCRIPT = "data/refund.script.yaml"  # the refund machine's scripted answers, beside the test notebooks


def _write_notebook(path: Path, *cells: nbformat.NotebookNode) -> None:
    """A Python notebook at ``path`` whose first cell loads mkl_notebook, then ``cells``."""
    notebook = nbformat.v4.new_notebook()
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    notebook.cells = [nbformat.v4.new_code_cell("%load_ext mkl_notebook"), *cells]
    nbformat.write(notebook, path)


def _two_forms_notebook(root: Path) -> None:
    """A run cell (its form) and a `%mkl pending` cell (a second form) for the same waiting run."""
    machine = REFUND_MACHINE.read_text(encoding="utf-8")
    _write_notebook(
        root / TWO_FORMS,
        nbformat.v4.new_code_cell(
            "%%mkl run --id two --script data/refund.script.yaml --set ticket=broken\n" + machine
        ),
        nbformat.v4.new_code_cell("%mkl pending"),
        nbformat.v4.new_code_cell(
            'import mkl_notebook\n\nprint("answers so far:", len(mkl_notebook.get_run("two").run_result.answers))'
        ),
    )


def _journaled_replies(root: Path) -> list[dict]:
    import sqlite3

    with sqlite3.connect(root / ".mkl" / "runs.sqlite") as db:
        rows = db.execute("SELECT body FROM records WHERE run_id = 'two' ORDER BY seq").fetchall()
    return [record for (body,) in rows if (record := json.loads(body))["t"] == "reply"]


def test_two_forms_of_one_run_are_one_view_of_its_state(jupyter_lab: tuple[str, Path]) -> None:
    """Answer one form: the other disables in place and says who answered; clicking it journals nothing."""
    from playwright.sync_api import expect

    base, root = jupyter_lab
    _two_forms_notebook(root)
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with browser_page() as page:
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
            # The run cell's form caught up in place: in its place, who answered and how; no button is left.
            answered = run_cell.locator(".jp-OutputArea-output").first  # the form's place, above the run's view
            expect(answered).to_contain_text("Answered 'approve' (by ", timeout=30_000)
            expect(answered).to_contain_text("via form")
            expect(approve_in_run).to_have_count(0)
            expect(
                run_cell.locator(".jp-OutputArea-output:has-text('The run went on after this cell')")
            ).to_be_visible()
            answered.scroll_into_view_if_needed()
            page.screenshot(path=str(ARTIFACTS / "two-forms-2-one-answered.png"), full_page=True)

            # Run the last cell again: the kernel handles messages in order, so any click sent before this
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

            # The second question, answered in the pending cell's form too: the run is done.
            pending_cell.locator("button.jupyter-button:has-text('Approve'):not([disabled])").click()
            expect(pending_cell.locator(".jp-OutputArea-output").first).to_contain_text(
                "then 'approve'", timeout=60_000
            )
            assert len(_journaled_replies(root)) == 2

            # Restart & Run All: each cell shows the run as it left it; the answers replay in the pending cell.
            _save(page)
            _restart_and_run_all(page, base, root / TWO_FORMS)
            answered_here = pending_cell.locator(".jp-OutputArea-output").first
            expect(answered_here).to_contain_text("Answered 'approve' (by ", timeout=30_000)
            expect(answered_here).to_contain_text("then 'approve'")
            expect(
                pending_cell.locator(".jp-OutputArea-output:has-text('Sent to the customer.')").first
            ).to_be_visible()
            expect(run_cell.locator(".jp-OutputArea-output").first).to_contain_text("Answered 'approve' (by ")
            expect(count_cell.locator(".jp-OutputArea-output:has-text('answers so far: 2')")).to_be_visible()
            page.screenshot(path=str(ARTIFACTS / "two-forms-5-restart-run-all.png"), full_page=True)
            assert len(_journaled_replies(root)) == 2  # nothing was answered twice
        finally:
            page.screenshot(path=str(ARTIFACTS / "two-forms-4-final.png"), full_page=True)


# -- every tutorial: click through, then Restart & Run All ------------------------------------------

TUTORIALS = sorted(path.name for path in (ROOT / "notebooks").glob("0*.ipynb"))
_CLOCK = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC")
_SCRATCH = re.compile(r"/tmp/tmp\w+|\"time\": [\d.]+")  # 03's headless demo answers a new scratch copy each time


# Marks each code cell's prompt once it has shown anything but an execution count ("[*]:" while queued or
# running, " " when cleared) after the mark was set: such a prompt that shows a count again has run since.
_WATCH_PROMPTS = """() => {
    for (const prompt of document.querySelectorAll('.jp-CodeCell .jp-InputPrompt')) {
        delete prompt.dataset.mklLeft;
    }
    window.__mklPrompts?.disconnect();
    window.__mklPrompts = new MutationObserver((changes) => {
        for (const change of changes) {
            const node = change.target.nodeType === 1 ? change.target : change.target.parentElement;
            const prompt = node?.closest('.jp-InputPrompt');
            if (prompt && !/^\\[\\d+\\]:$/.test(prompt.textContent.trim())) prompt.dataset.mklLeft = '1';
        }
    });
    window.__mklPrompts.observe(document.body, {childList: true, characterData: true, subtree: true});
}"""


def _watch_prompts(page: Any) -> None:
    """From now on, note which prompts leave their execution count (see ``_WATCH_PROMPTS``)."""
    page.evaluate(_WATCH_PROMPTS)


def _all_cells_ran(page: Any, base: str, count: int) -> bool:
    """Whether ``count`` cells ran since :func:`_watch_prompts` (each shows an execution count again after it
    showed none), none is queued or running, and the kernel is idle."""
    prompts = page.locator(".jp-CodeCell .jp-InputPrompt")
    left = page.locator(".jp-CodeCell .jp-InputPrompt[data-mkl-left]").all_text_contents()
    ran = [text for text in left if re.fullmatch(r"\[\d+\]:", text.strip())]
    waiting = [text for text in prompts.all_text_contents() if text.strip() == "[*]:"]
    return len(ran) >= count and not waiting and _kernel_ready(base)


def _wait_until_run(page: Any, base: str, path: Path) -> None:
    """Poll until every code cell of ``path`` ran since :func:`_watch_prompts` and the kernel is idle."""
    cells = nbformat.read(path, as_version=4).cells
    count = sum(1 for cell in cells if cell.cell_type == "code" and cell.source.strip())
    deadline = time.monotonic() + 120
    while not _all_cells_ran(page, base, count):
        prompts = page.locator(".jp-CodeCell .jp-InputPrompt").all_text_contents()
        assert time.monotonic() < deadline, f"{path.name}: not every cell ran ({count} cells; prompts {prompts})"
        page.wait_for_timeout(300)


def _restart_and_run_all(page: Any, base: str, path: Path) -> None:
    """Kernel → Restart Kernel and Run All Cells…, confirmed, until every cell ran again."""
    _watch_prompts(page)
    page.click(".lm-MenuBar-itemLabel:text-is('Kernel')")
    page.click("li.lm-Menu-item[data-command$='restart-and-run-all']")
    page.click(".jp-Dialog-button.jp-mod-accept")
    _wait_until_run(page, base, path)


def _save(page: Any) -> None:
    from playwright.sync_api import expect

    page.locator(".jp-InputPrompt").first.click()
    page.keyboard.press("Control+s")
    expect(page.locator(".jp-mod-dirty")).to_have_count(0, timeout=30_000)


def _save_once_outputs_refer(page: Any, path: Path) -> None:
    """Save when no output carries a checkpoint any more: Run All queues every cell ahead of the extension's
    answer to the kernel, which then redraws the outputs drawn before it to refer to the metadata."""
    deadline = time.monotonic() + 30
    _save(page)
    while _copies(path)[0]:
        assert time.monotonic() < deadline, f"outputs still carry checkpoints: {_copies(path)}"
        page.wait_for_timeout(300)
        _save(page)


def _what_a_person_reads(path: Path) -> list[str]:
    """Each output's text as saved, without the clock and the replay facts (which say a replay is one)."""
    texts = []
    for cell in nbformat.read(path, as_version=4).cells:
        for output in cell.get("outputs", []):
            if output["output_type"] == "error":
                texts.append(f"ERROR {output['ename']}: {output['evalue']}")
                continue
            text = output.get("text") or output.get("data", {}).get("text/plain", "")
            text = _SCRATCH.sub("SCRATCH", _CLOCK.sub("TIME", text))
            texts.append(text)  # a replayed cell shows what it showed the first time
    return texts


def _printed_calls(path: Path) -> int:
    """Model (here: scripted) calls the cells printed as made (``run.calls``)."""
    made = 0
    for cell in nbformat.read(path, as_version=4).cells:
        for output in cell.get("outputs", []):
            for printed in re.findall(r"\{'made': (\d+), 'replayed': \d+\}", output.get("text") or ""):
                made += int(printed)
    return made


def _answers(root: Path) -> list[str]:
    """The answers journaled in the server's run store: a replay adds none, a call made anew adds one."""
    rows = store_rows(root / ".mkl" / "runs.sqlite")
    return sorted(body for _run, _seq, body in rows if json.loads(body).get("t") == "answer")


def _copies(path: Path) -> tuple[list[str], list[str], list[str]]:
    """The runs whose checkpoint a saved notebook's outputs carry, those its outputs refer to, and those its
    metadata holds."""
    saved = nbformat.read(path, as_version=4)
    carried, referred = [], []
    for cell in saved.cells:
        for output in cell.get("outputs", []):
            data = output.get("data", {})
            if MIME_TYPE in data:
                carried.append(data[MIME_TYPE]["run_id"])
            if REF_MIME_TYPE in data:
                referred.append(data[REF_MIME_TYPE]["run"])
            for entry in data.get(BATCH_MIME_TYPE, []):  # a batch's rows: references, or checkpoints
                (referred.append(entry["run"]) if set(entry) == {"run", "records"} else carried.append(entry["run_id"]))
    return carried, referred, sorted(saved.metadata.get("mkl", {}).get("runs", {}))


def _click_through(page: Any) -> int:
    """Answer every form the notebook shows, Approve each time, until none is left; how many were answered."""
    answered = 0
    approve = page.locator(".jp-OutputArea-output button.jupyter-button:has-text('Approve'):not([disabled])")
    while approve.count():
        answered += 1
        button = approve.first.element_handle()
        button.click()
        # Answered: the form leaves its place (to the next question's form, or to what was answered).
        page.wait_for_function("(button) => !button.isConnected", arg=button, timeout=60_000)
        page.wait_for_timeout(500)  # the next form, if any, is drawn by the same reply
        _settle(page)
    return answered


def _settle(page: Any) -> None:
    """Wait until the kernel is idle again (a form's reply runs the machine on)."""
    deadline = time.monotonic() + 60
    while page.locator(".jp-Notebook-ExecutionIndicator[data-status='busy']").count():
        assert time.monotonic() < deadline, "the kernel stayed busy"
        page.wait_for_timeout(200)


def _opened_quietly(page: Any, base: str, path: Path) -> None:
    """Open the notebook at ``path``; once its last output is drawn and its kernel is idle, it is not marked
    modified: nothing rewrote an output or its metadata on open (JupyterLab's mermaid renderer wrote its own
    drawing into each diagram's output; a kernelspec other than the kernel's was rewritten)."""
    from playwright.sync_api import expect

    shown = [
        "".join(output.get("text") or output.get("data", {}).get("text/plain", "")).strip()
        for cell in nbformat.read(path, as_version=4).cells
        for output in cell.get("outputs", [])
    ]
    last = next(text.splitlines()[0] for text in reversed(shown) if text)
    _open(page, base, path.name)
    expect(page.locator(".jp-OutputArea-output", has_text=last).first).to_be_attached(timeout=60_000)
    expect(page.locator(".jp-RenderedMermaid")).to_have_count(0)
    assert page.locator(".jp-mod-dirty").count() == 0, f"{path.name} is marked modified on open"


def _keys_named(page: Any) -> list[str]:
    """Whose keys the notebook's outputs name ("signed as '…'"), as the page shows them."""
    shown = "\n".join(page.locator(".jp-OutputArea-output").all_inner_texts())
    return re.findall(r"signed as '([^']*)'", shown) + re.findall(r"Not the run saved in", shown)


@pytest.mark.parametrize("name", TUTORIALS)
def test_each_tutorial_clicked_through_then_restart_and_run_all_reads_the_same(
    jupyter_lab: tuple[str, Path], name: str
) -> None:
    """Opened, each tutorial stays unmodified; a newcomer's first Run All says nothing about keys they cannot
    know (03 names Alice's, its lesson); clicked through, Restart & Run All reads the same; and saved, it is at
    most twice its shipped size."""
    base, root = jupyter_lab
    path = root / name
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with browser_page() as page:
        try:
            _opened_quietly(page, base, path)
            _watch_prompts(page)
            page.click(".lm-MenuBar-itemLabel:text-is('Run')")
            page.click("li.lm-Menu-item[data-command='runmenu:run-all']")
            _wait_until_run(page, base, path)
            assert set(_keys_named(page)) <= ({"alice"} if name.startswith("03") else set()), _keys_named(page)
            answered = _click_through(page)
            _save(page)
            clicked = _what_a_person_reads(path)
            made = _answers(root)
            page.screenshot(path=str(ARTIFACTS / f"{path.stem}-1-clicked-through.png"), full_page=True)

            _restart_and_run_all(page, base, path)
            _save_once_outputs_refer(page, path)
            saved = path.read_bytes()
            shutil.copy(path, ARTIFACTS / f"{path.stem}-3-saved.ipynb")
            if name.startswith("01"):  # unchanged cells run again leave the file as it was, byte for byte
                _restart_and_run_all(page, base, path)
                _save_once_outputs_refer(page, path)
                assert path.read_bytes() == saved
        finally:
            page.screenshot(path=str(ARTIFACTS / f"{path.stem}-2-restart-run-all.png"), full_page=True)
    again = _what_a_person_reads(path)
    assert [text for text in again if text.startswith("ERROR") or "Traceback" in text] == []
    assert again == clicked
    assert _answers(root) == made and _printed_calls(path) == 0  # every answer came from the journal
    carried, referred, held = _copies(path)
    assert carried == []  # one copy, not two: with the extension, outputs refer to the metadata's copy
    assert set(referred) <= set(held)  # and runs made from Python, which no output shows, are held as well
    sizes = ARTIFACTS / "notebook-sizes.json"
    known = json.loads(sizes.read_text()) if sizes.exists() else {}
    shipped = (ROOT / "notebooks" / name).stat().st_size
    known[name] = {"as_shipped": shipped, "after_run_all": len(saved)}
    sizes.write_text(json.dumps(known, indent=1, sort_keys=True))
    assert len(saved) <= 2 * shipped, f"{name}: {shipped:,} bytes as shipped, {len(saved):,} after Run All and save"
    if name.startswith("02"):
        assert answered == 2  # both questions of the refund run were answered through the form
        assert set(held) == {"approval-demo", "approval-api", "approval-rejected"}  # mkl_notebook.run()'s too
        assert any(text.startswith("Answered 'approve' (by ") for text in again)


def test_a_shared_notebook_opened_without_running_reads_the_question_and_the_command(
    jupyter_lab: tuple[str, Path],
) -> None:
    """Someone else's notebook is untrusted: no widget renders, so the form's place must read on its own."""
    from playwright.sync_api import expect

    base, root = jupyter_lab
    saved = nbformat.read(root / NOTEBOOK, as_version=4)
    run_index = next(i for i, cell in enumerate(saved.cells) if "--id approval-demo" in cell.source)
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with browser_page() as page:
        page.goto(f"{base}/lab/tree/{NOTEBOOK}")
        page.wait_for_selector(".jp-NotebookPanel .jp-Notebook", timeout=60_000)
        run_cell = page.locator(".jp-CodeCell:has(.jp-InputArea:has-text('--id approval-demo'))")
        place = run_cell.locator(".jp-OutputArea-output").first
        expect(place).to_contain_text("The draft promises a refund. Approve it?", timeout=30_000)
        command = rf"mkl resume {re.escape(NOTEBOOK)} --run approval-demo (--script \S+ )?--question q-"
        expect(place).to_contain_text(re.compile(command))
        expect(page.locator(".jp-OutputArea-output:has-text('VBox(')")).to_have_count(0)
        expect(run_cell.locator("button.jupyter-button")).to_have_count(0)
        run_cell.scroll_into_view_if_needed()
        run_cell.screenshot(path=str(ARTIFACTS / "shared-unrun-run-cell.png"))
    assert run_index > 0


def test_a_notebook_reopened_with_a_new_kernel_shows_no_broken_form_below_its_question(tmp_path: Path) -> None:
    """Run All, save, close (the kernel shut down), open it again: a new kernel holds none of the forms' models,
    so where a form stood ipywidgets would say "Error displaying widget: model not found" below the question.
    The extension hides those views; the question and its commands read as printed, and running the cell
    draws a live form again."""
    from playwright.sync_api import expect

    root = tmp_path / "lab"
    root.mkdir()
    shutil.copy(ROOT / "notebooks" / NOTEBOOK, root / NOTEBOOK)
    shutil.copytree(ROOT / "notebooks" / "data", root / "data", ignore=shutil.ignore_patterns(".mkl"))
    env = lab_env(tmp_path)
    checkout_extension(env)
    path = root / NOTEBOOK
    no_xsrf = ["--ServerApp.disable_check_xsrf=True"]  # the test shuts the kernel down through the REST API
    with serve(root, env, tmp_path / "jupyter.log", options=no_xsrf) as base, browser_page() as page:
        _open_and_run_all(page, base, NOTEBOOK)
        _wait_until_run(page, base, path)
        run_cell = page.locator(".jp-CodeCell:has(.jp-InputArea:has-text('--id approval-demo'))")
        expect(run_cell.locator("button.jupyter-button:has-text('Approve')")).to_have_count(1, timeout=60_000)
        _save_once_outputs_refer(page, path)
        saved = nbformat.read(path, as_version=4)
        forms = [  # the saved form views of waiting runs: a widget view right below a question's printed place
            output
            for cell in saved.cells
            for before, output in itertools.pairwise(cell.get("outputs", []))
            if "application/vnd.mkl.form+json" in before.get("data", {})
            and "application/vnd.jupyter.widget-view+json" in output.get("data", {})
        ]
        assert forms, "the saved notebook holds a waiting run's form"

        page.reload()  # the page again, on the kernel that drew the forms: they stay live
        page.wait_for_selector(".jp-NotebookPanel .jp-Notebook", timeout=60_000)
        _wait_for_kernel(page, base)
        run_cell = page.locator(".jp-CodeCell:has(.jp-InputArea:has-text('--id approval-demo'))")
        page.wait_for_selector(".jp-NotebookPanel[data-mkl-forms-checked='true']", timeout=60_000)
        approve = run_cell.locator("button.jupyter-button:has-text('Approve'):not([disabled]):visible")
        expect(approve).to_have_count(1, timeout=60_000)
        expect(run_cell.locator(".jp-OutputArea-output").nth(1)).not_to_have_class(re.compile(r"\blm-mod-hidden\b"))

        page.goto("about:blank")
        for session in get_json(f"{base}/api/sessions"):  # type: ignore[union-attr]
            request = urllib.request.Request(f"{base}/api/sessions/{session['id']}", method="DELETE")
            urllib.request.urlopen(request, timeout=10).close()
        deadline = time.monotonic() + 30
        while get_json(f"{base}/api/kernels"):
            assert time.monotonic() < deadline, "the kernel was not shut down"
            time.sleep(0.2)

        _open(page, base, NOTEBOOK)  # the next day: a new kernel, none of yesterday's widgets
        page.wait_for_selector(".jp-NotebookPanel[data-mkl-forms-checked='true']", timeout=60_000)
        run_cell = page.locator(".jp-CodeCell:has(.jp-InputArea:has-text('--id approval-demo'))")
        expect(run_cell).to_contain_text("The draft promises a refund. Approve it?", timeout=30_000)
        expect(run_cell).to_contain_text(re.compile(r"mkl resume \S+ --run approval-demo"))
        form = run_cell.locator(".jp-OutputArea-output").nth(1)  # where the form stood, below the question
        expect(form).to_have_class(re.compile(r"\blm-mod-hidden\b"), timeout=60_000)  # not "model not found"
        expect(page.get_by_text("Error displaying widget")).to_have_count(0)
        expect(run_cell.locator(".jp-OutputArea-output:not(.lm-mod-hidden)")).to_have_count(3)  # the rest reads
        assert page.locator(".jp-mod-dirty").count() == 0, "hiding the dead forms marked the notebook modified"
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        run_cell.screenshot(path=str(ARTIFACTS / "reopened-dead-form-hidden.png"))

        _watch_prompts(page)  # Run All in the new kernel: the run's live form again
        page.click(".lm-MenuBar-itemLabel:text-is('Run')")
        page.click("li.lm-Menu-item[data-command='runmenu:run-all']")
        expect(run_cell.locator("button.jupyter-button:has-text('Approve'):not([disabled])")).to_have_count(
            1, timeout=60_000
        )


ALICES = "from-alice.ipynb"


def _alices_notebook(root: Path, alice: Path) -> None:
    """The notebook Alice saved after running the refund machine with her model: its run waits for
    approval, sealed with her key, which is unknown to the person who opens it here."""
    machine = REFUND_MACHINE.read_text(encoding="utf-8")
    alice.mkdir()
    env = {"PATH": os.environ.get("PATH", ""), "JUPYTER_DATA_DIR": str(alice), "JUPYTERHUB_USER": "alice"}
    command = [sys.executable, "-m", "mkl_notebook.cli", "run", str(root / "data" / "refund.mkl"), "--quiet"]
    command += ["--id", "from-alice", "--hitl", "--script", str(root / "data" / "refund.script.yaml")]
    command += ["--set", "ticket=broken", "--store", str(alice / "runs.sqlite"), "--checkpoint", str(alice / "cp.json")]
    assert subprocess.run(command, env=env, capture_output=True, check=False).returncode == 3
    saved = json.loads((alice / "cp.json").read_text(encoding="utf-8"))
    _write_notebook(
        root / ALICES,
        nbformat.v4.new_code_cell("%%mkl\n" + machine),
        nbformat.v4.new_code_cell(
            "%mkl run refund --id from-alice --set ticket=broken",
            outputs=[nbformat.v4.new_output("display_data", data={MIME_TYPE: saved, "text/plain": "from-alice"})],
        ),
    )


def test_someone_elses_run_is_marked_and_taken_up_only_by_a_click(
    jupyter_lab: tuple[str, Path], tmp_path: Path
) -> None:
    """Run All in a notebook from an unknown key: the run cell says whose the run is and waits; a click on
    "Take up the file's run" brings Alice's run, waiting at her question, with its form."""
    from playwright.sync_api import expect

    base, root = jupyter_lab
    _alices_notebook(root, tmp_path / "alice")
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with browser_page() as page:
        _open_and_run_all(page, base, ALICES)
        run_cell = page.locator(".jp-CodeCell:has(.jp-InputArea:has-text('--id from-alice'))")
        place = run_cell.locator(".jp-OutputArea-output").first
        expect(place).to_contain_text("Not trusted:", timeout=90_000)
        expect(place).to_contain_text("made by an unknown key")
        expect(place).to_contain_text("(signed as 'alice')")
        expect(place).to_contain_text("The file says it asks: “The draft promises a refund. Approve it?”")
        expect(run_cell.locator("button.jupyter-button:has-text('Approve')")).to_have_count(0)
        run_cell.screenshot(path=str(ARTIFACTS / "untrusted-1-marked.png"))

        run_cell.locator('button.jupyter-button:has-text("Take up the file\'s run")').click()
        expect(run_cell.locator("button.jupyter-button:has-text('Approve'):not([disabled])")).to_have_count(
            1, timeout=60_000
        )
        expect(place).to_contain_text("The file says its machine's author asks:")  # the choice stays marked
        expect(place).to_contain_text("taken up from from-alice.ipynb by your choice")
        expect(place).not_to_contain_text("Run it here afresh")
        run_cell.screenshot(path=str(ARTIFACTS / "untrusted-2-taken-up.png"))


METADATA_NB = "kept-in-metadata.ipynb"


def _metadata_notebook(root: Path) -> None:
    _write_notebook(
        root / METADATA_NB,
        nbformat.v4.new_code_cell("%%mkl\n" + REFUND_MACHINE.read_text(encoding="utf-8")),
        nbformat.v4.new_code_cell("%mkl run refund --id kept --script data/refund.script.yaml --set ticket=broken"),
        nbformat.v4.new_code_cell(
            'import mkl_notebook\n\nrun = mkl_notebook.get_run("kept", script="data/refund.script.yaml")'
        ),
        nbformat.v4.new_code_cell("%mkl pending"),
    )


def _run_cell(page: Any, index: int) -> None:
    """Select cell ``index``, Shift+Enter, and wait until it has run (its prompt shows a number)."""
    from playwright.sync_api import expect

    cell = page.locator(".jp-Notebook .jp-Cell").nth(index)
    cell.locator(".jp-InputArea-editor").click()
    page.keyboard.press("Shift+Enter")
    expect(cell.locator(".jp-InputPrompt")).to_have_text(re.compile(r"\[\d+\]:"), timeout=90_000)
    _settle(page)


def _saved_runs(path: Path) -> dict[str, Any]:
    return dict(nbformat.read(path, as_version=4).metadata.get("mkl", {}).get("runs", {}))


def test_a_run_survives_clear_all_outputs_and_a_new_kernel_through_the_notebooks_metadata(
    jupyter_lab: tuple[str, Path],
) -> None:
    """The extension keeps each run's checkpoint in the notebook's metadata: after Clear All Outputs, a new
    kernel and no store, `%mkl pending` shows the form again, and the approvals finish the run."""
    from playwright.sync_api import expect

    base, root = jupyter_lab
    _metadata_notebook(root)
    path = root / METADATA_NB
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with browser_page() as page:
        _open(page, base, METADATA_NB)
        for index in (0, 1, 2):
            _run_cell(page, index)
        run_cell = page.locator(".jp-Notebook .jp-Cell").nth(2)
        expect(run_cell.locator("button.jupyter-button:has-text('Approve')")).to_have_count(1, timeout=60_000)
        _save(page)
        held = _saved_runs(path)
        assert list(held) == ["kept"], "the extension wrote the run into the notebook's metadata"
        assert envelope.verify_checkpoint(held["kept"]).header["status"] == "suspended"
        assert _copies(path) == ([], ["kept"], ["kept"])  # one copy: the output refers to the metadata's

        page.click(".lm-MenuBar-itemLabel:text-is('Edit')")
        page.click("li.lm-Menu-item[data-command='editmenu:clear-all']")  # Clear Outputs of All Cells
        _save(page)
        cleared = nbformat.read(path, as_version=4)
        assert all(not cell.get("outputs") for cell in cleared.cells if cell.cell_type == "code")
        assert list(_saved_runs(path)) == ["kept"]  # outputs gone, the run kept

        page.click(".lm-MenuBar-itemLabel:text-is('Kernel')")
        page.click("li.lm-Menu-item[data-command='kernelmenu:restart']")
        page.click(".jp-Dialog-button.jp-mod-accept")
        shutil.rmtree(root / ".mkl")  # a new kernel, and no store: the notebook alone carries the run
        page.wait_for_timeout(1000)  # the kernel restarts: it is not ready before it went away
        _wait_for_kernel(page, base)
        for index in (0, 3, 4):
            _run_cell(page, index)
        pending = page.locator(".jp-Notebook .jp-Cell").nth(4)
        expect(pending).to_contain_text("The draft promises a refund. Approve it?", timeout=60_000)
        page.screenshot(path=str(ARTIFACTS / "metadata-1-pending-after-clear.png"), full_page=True)
        for _ in range(2):  # both questions of the refund run
            approve = pending.locator("button.jupyter-button:has-text('Approve'):not([disabled])")
            expect(approve).to_have_count(1, timeout=60_000)
            approve.click()
            _settle(page)
        expect(pending).to_contain_text("Sent to the customer.", timeout=60_000)
        _save(page)
        page.screenshot(path=str(ARTIFACTS / "metadata-2-finished.png"), full_page=True)
    finished = envelope.verify_checkpoint(_saved_runs(path)["kept"])
    assert finished.header["status"] == "done"
    assert [r["value"] for r in finished.records if r["t"] == "reply"] == ["approve", "approve"]
    answered = [str(r["pos"]) for r in finished.records if r["t"] == "answer"]
    assert len(answered) == len(set(answered))  # every call was made once: nothing before the gate again
    assert answered.count("root/0:draft#1/produce") == 1  # the draft, made before the outputs were cleared


STREAMING_NB = "streaming.ipynb"
STORY = (ROOT / "notebooks" / "data" / "story.mkl").read_text(encoding="utf-8")


def test_a_streamed_answer_is_seen_half_written_in_jupyterlab(jupyter_lab: tuple[str, Path]) -> None:
    """The live line shows the answer growing in the run's own cell, then the finished run replaces it."""
    from playwright.sync_api import expect

    base, root = jupyter_lab
    story = yaml.safe_load((root / "data" / "story.script.yaml").read_text(encoding="utf-8"))
    answer = " ".join(story["llm"]["produce"][0].split())
    (root / "data" / "slow-story.yaml").write_text(
        yaml.safe_dump({"llm": {**story["llm"], "stream": 0.2}}), encoding="utf-8"
    )
    _write_notebook(
        root / STREAMING_NB,
        nbformat.v4.new_code_cell("%%mkl\n" + STORY),
        nbformat.v4.new_code_cell("%mkl run story --script data/slow-story.yaml"),
    )
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with browser_page() as page:
        _open(page, base, STREAMING_NB)
        for index in (0, 1):  # %load_ext, then the machine
            _run_cell(page, index)
        run_cell = page.locator(".jp-Notebook .jp-Cell").nth(2)
        run_cell.locator(".jp-InputArea-editor").click()
        page.keyboard.press("Shift+Enter")
        live = run_cell.locator(".jp-OutputArea-output blockquote pre")
        expect(live).to_contain_text(" ".join(answer.split()[:8]), timeout=60_000)  # some words are written
        written = " ".join(live.inner_text().split())
        page.screenshot(path=str(ARTIFACTS / "streaming-1-half-written.png"), full_page=True)
        run_cell.screenshot(path=str(ARTIFACTS / "streaming-1-run-cell-half-written.png"))
        assert answer.startswith(written) and len(written) < len(answer), written  # seen half-written
        outputs = run_cell.locator(".jp-OutputArea")
        expect(outputs).to_contain_text("Done.", timeout=60_000)
        expect(outputs).to_contain_text("someone out there had been counting too.")  # the whole answer
        expect(outputs.locator("blockquote pre")).to_have_count(0)  # the live text gave way to the run
        expect(outputs).not_to_contain_text("running —")
        run_cell.screenshot(path=str(ARTIFACTS / "streaming-2-run-cell-done.png"))


def test_a_notebook_goes_to_bob_who_approves_gate_a_in_jupyterlab_and_comes_back_to_alice(
    jupyter_lab: tuple[str, Path], tmp_path: Path
) -> None:
    """Two people, two JupyterLabs (each with their own Jupyter data folder: their key) and two stores. Alice's
    run waits at gate A; Bob, the person of the first JupyterLab, opens her file, approves gate A with a click
    and saves; the file goes back to Alice. Not knowing Bob's key, her notebook shows what Bob answered and the
    step that trusts him, and no form for gate A (headless); knowing it, her own JupyterLab takes his answer up
    and shows the form for gate B, and none for gate A."""
    from lab_client import run_all
    from playwright.sync_api import expect
    from test_one_history import GATE_A, GATE_B, Person, _forms, _notebook, _texts

    base, root = jupyter_lab
    bob_data = root.parent / "jupyter_data_dir"  # the data folder this JupyterLab's kernels sign with
    alices_lab = lab_env(tmp_path / "alice-lab")
    alice = Person(tmp_path / "people", "alice")
    alice.env["JUPYTER_DATA_DIR"] = alices_lab["JUPYTER_DATA_DIR"]  # one key for her kernels and her `mkl`
    _notebook(alice.notebook)
    assert GATE_A in _texts(alice.run_all())
    shutil.copy(alice.notebook, root / "flow.ipynb")
    shutil.copy(alice.folder / "twogates.script.json", root / "twogates.script.json")
    bobs_cli = {"JUPYTER_DATA_DIR": str(bob_data), "JUPYTERHUB_USER": "bob"}
    code, _, out, err = mkl_cli(root, "trust", alice.key(), "--name", "alice", env=bobs_cli)
    assert code == 0, err
    code, _, out, err = mkl_cli(root, "trust", env=bobs_cli)
    bobs_key = out.split()[6]

    with browser_page() as page:
        try:
            _open_and_run_all(page, base, "flow.ipynb")
            run_cell = page.locator(".jp-CodeCell:has(.jp-InputArea:has-text('--id r'))")
            expect(run_cell.locator(f".jp-OutputArea-output:has-text('{GATE_A}')").first).to_be_visible(timeout=90_000)
            run_cell.locator("button.jupyter-button:has-text('Approve'):not([disabled])").click()
            expect(run_cell.locator(f".jp-OutputArea-output:has-text('{GATE_B}')").first).to_be_visible(timeout=60_000)
            _save_once_outputs_refer(page, root / "flow.ipynb")
        finally:
            page.screenshot(path=str(ARTIFACTS / "round-trip-bob.png"), full_page=True)

    returned = nbfile.find_run(root / "flow.ipynb", "r")
    [reply] = [(n, r) for n, r in enumerate(returned.records) if r["t"] == "reply"]
    assert reply[1]["value"] == "approve" and reply[1]["via"] == "form"
    [signed] = [s for s in signatures(returned.records) if s.start <= reply[0] < s.end]
    assert signed.seal is not None and signed.seal.holds and signed.seal.key == bobs_key  # Bob's answer, his key
    # A server that knows only its token makes up an anonymous user: the click is the kernel's OS account.
    assert reply[1].get("established") == "os-account", reply[1]
    answered = f"answered 'approve' by {who_answered(reply[1]['by'], 'os-account')!r}"

    shutil.copy(root / "flow.ipynb", alice.notebook)  # back to Alice, who does not know Bob's key yet
    ran = run_all(alice.notebook, env=alice.env)
    text = _texts(ran)
    assert f"goes on past the copy you hold ({answered})" in text
    assert f"mkl trust flow.ipynb --key {key_fingerprint(bobs_key).replace(' ', '')} --name {signed.seal.by}" in text
    assert _forms(ran) == []  # gate A is not asked again

    shutil.copy(root / "flow.ipynb", alice.notebook)  # the file as Bob saved it, opened in her JupyterLab
    code, _, _, err = alice.mkl("trust", bobs_key, "--name", "bob")
    assert code == 0, err
    with serve(alice.folder, alices_lab, tmp_path / "alice-jupyter.log") as alices, browser_page() as page:
        try:
            _open_and_run_all(page, alices, "flow.ipynb")
            run_cell = page.locator(".jp-CodeCell:has(.jp-InputArea:has-text('--id r'))")
            expect(run_cell.locator(f".jp-OutputArea-output:has-text('{GATE_B}')").first).to_be_visible(timeout=90_000)
            _wait_until_run(page, alices, alice.notebook)
            expect(run_cell.locator("button.jupyter-button:has-text('Approve'):not([disabled])")).to_have_count(1)
            expect(page.locator(f".jp-OutputArea-output:has-text('{GATE_A}') button.jupyter-button")).to_have_count(0)
            expect(page.locator(".jp-OutputArea-output:has-text('NOT TRUSTED')")).to_have_count(0)
            _save(page)
        finally:
            page.screenshot(path=str(ARTIFACTS / "round-trip-alice.png"), full_page=True)
    held = alice.store().read("r")
    assert [r for r in held if r["t"] == "reply"] == [reply[1]]  # Bob's answer, taken up as he gave it
    code, listing, _, err = alice.mkl("runs", alice.notebook.name)
    [listed] = listing["runs"]
    assert listed["ask"] == GATE_B and listed["trusted"] is True, err
    assert listed["made_by"].startswith("made by you, bob (trusted key ")  # who signed each stretch


QUEUE = "review-queue.ipynb"
QUEUE_ROWS = 200


def _queue_notebook(root: Path) -> None:
    """A batch of 200 tickets over the one-gate refund machine (a scripted answer for every row), at --hitl."""
    shutil.copy(ROOT / "examples" / "refund.script.yaml", root / "queue.script.yaml")
    tickets = [{"id": f"T{n:03d}", "ticket": f"Parcel A-{1000 + n} arrived broken"} for n in range(QUEUE_ROWS)]
    _write_notebook(
        root / QUEUE,
        nbformat.v4.new_code_cell("%%mkl\n" + (ROOT / "examples" / "refund.mkl").read_text(encoding="utf-8")),
        nbformat.v4.new_code_cell(f"tickets = {json.dumps(tickets)}"),
        nbformat.v4.new_code_cell(
            "b = %mkl map refund --over $tickets --key id --script queue.script.yaml --hitl --concurrency 4"
        ),
        nbformat.v4.new_code_cell("print('answers:', sum(len(r.run_result.answers) for r in b.runs.values()))"),
    )


def _queue_answers(root: Path) -> list[dict]:
    import sqlite3

    with sqlite3.connect(root / ".mkl" / "runs.sqlite") as db:
        rows = db.execute("SELECT run_id, body FROM records ORDER BY seq").fetchall()
    return [{"run": run_id, **record} for run_id, body in rows if (record := json.loads(body))["t"] == "reply"]


def test_a_batch_of_200_rows_in_the_review_queue(jupyter_lab: tuple[str, Path]) -> None:
    """200 questions in the review queue: answering one row changes the count and drops the row; a filter
    then 'Approve the N shown' journals exactly N answers, one per run shown, each with the note."""
    from playwright.sync_api import expect

    base, root = jupyter_lab
    _queue_notebook(root)
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with browser_page() as page:
        try:
            _open_and_run_all(page, base, QUEUE)
            cell = page.locator(".jp-Notebook .jp-CodeCell").nth(3)
            header = cell.locator(".jp-OutputArea-output :text('questions wait for a person')")
            expect(header).to_contain_text("200 questions wait for a person", timeout=180_000)
            started = time.monotonic()
            approve = cell.locator("button.jupyter-button:text-is('Approve')")
            expect(approve).to_have_count(25, timeout=60_000)  # one page of rows has controls
            drawn = time.monotonic() - started
            print(f"the queue's first page drew in {drawn:.2f}s after its header")
            bulk = cell.locator("button.jupyter-button:has-text('Approve the')")
            expect(bulk).to_have_text("Approve the 25 shown")
            page.screenshot(path=str(ARTIFACTS / "queue-1-200-rows.png"), full_page=True)

            approve.first.click()  # refund-T000
            expect(header).to_contain_text("199 questions wait for a person", timeout=60_000)
            expect(cell.locator(".widget-gridbox code:text-is('refund-T000')")).to_have_count(0)

            search = cell.locator("input[placeholder^='Filter']")
            search.fill("T01")  # T010 … T019
            search.press("Enter")
            expect(bulk).to_have_text("Approve the 10 shown", timeout=30_000)
            shown = sorted(cell.locator(".widget-gridbox code").all_inner_texts())
            assert shown == [f"refund-T01{n}" for n in range(10)]
            cell.locator("input[placeholder^='Note for every row']").fill("looked at each draft")
            page.screenshot(path=str(ARTIFACTS / "queue-2-filtered.png"), full_page=True)
            bulk.click()
            expect(header).to_contain_text("189 questions wait for a person; 0 match the filter", timeout=90_000)
            page.screenshot(path=str(ARTIFACTS / "queue-3-approved.png"), full_page=True)
        finally:
            page.screenshot(path=str(ARTIFACTS / "queue-4-final.png"), full_page=True)

    answers = _queue_answers(root)
    assert [(a["run"], a["value"], a.get("note"), a["via"]) for a in answers if a["run"] == "refund-T000"] == [
        ("refund-T000", "approve", None, "queue")
    ]
    bulk_answers = [a for a in answers if a["run"] != "refund-T000"]
    assert sorted(a["run"] for a in bulk_answers) == [f"refund-T01{n}" for n in range(10)]  # one per run shown
    assert {(a["value"], a.get("note"), a["via"]) for a in bulk_answers} == {
        ("approve", "looked at each draft", "queue")
    }
    assert len({(a["by"], a.get("established")) for a in answers}) == 1  # one identity for every row's answer
    code, _, out, err = mkl_cli(root, "audit", "--store", str(root / ".mkl" / "runs.sqlite"), "--json")
    assert code == 0, err
    audited = {row["run"]: row for row in json.loads(out)}
    assert sorted(audited) == sorted(a["run"] for a in answers)  # each answer signed, and the signature holds
    assert {(row["signature"], row["problem"]) for row in audited.values()} == {("verifies", None)}


def test_a_click_on_approve_in_a_lab_with_a_named_user_journals_that_user_established_by_the_server(
    tmp_path: Path,
) -> None:
    """A Lab whose server says every request is erin (its identity provider, as behind a real login): the click
    on Approve journals erin, established by the Jupyter server as the page reported it."""
    from named_identity import NAME
    from playwright.sync_api import expect

    root = tmp_path / "lab"
    root.mkdir()
    shutil.copy(ROOT / "notebooks" / NOTEBOOK, root / NOTEBOOK)
    shutil.copytree(ROOT / "notebooks" / "data", root / "data", ignore=shutil.ignore_patterns(".mkl"))
    env = lab_env(tmp_path)
    env.pop("JUPYTERHUB_USER", None)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT / "tests"), env.get("PYTHONPATH")]))
    checkout_extension(env)
    identity = "--ServerApp.identity_provider_class=named_identity.NamedUser"
    with serve(root, env, tmp_path / "jupyter.log", options=[identity]) as base, browser_page() as page:
        assert get_json(f"{base}/api/me")["identity"]["username"] == NAME  # type: ignore[index]
        _open_and_run_all(page, base, NOTEBOOK)
        run_cell = page.locator(".jp-CodeCell:has(.jp-InputArea:has-text('--id approval-demo'))")
        approve = run_cell.locator("button.jupyter-button:has-text('Approve'):not([disabled])")
        expect(approve).to_have_count(1, timeout=90_000)
        approve.click()
        expect(
            run_cell.locator(".jp-OutputArea-output:has-text('Send this reply to the customer now?')").first
        ).to_be_visible(timeout=60_000)
        expect(run_cell).to_contain_text(f" (OS account; claims {NAME}) · ", timeout=30_000)
        expect(run_cell).to_contain_text(" · via form · key ", timeout=30_000)  # the kernel's key signed it
        expect(run_cell.get_by_text("Answered 'approve'")).to_have_count(1)  # said once: above the next question
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        run_cell.screenshot(path=str(ARTIFACTS / "identity-approved-by-erin.png"))
    rows = store_rows(root / ".mkl" / "runs.sqlite")
    replies = [body for run_id, _, text in rows if run_id == RUN_ID and (body := json.loads(text))["t"] == "reply"]
    assert [(r["value"], r["by"], r["established"], r.get("claimed"), r["via"]) for r in replies] == [
        ("approve", os_account(), "os-account", NAME, "form")
    ], replies
