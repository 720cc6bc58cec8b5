"""A team on one PostgreSQL store behind a real JupyterHub, driven in Chromium: Alice's run waits in her server,
Carol (not among its approvers) sees the question in her server and cannot answer it, Bob answers it in his own
server (his review queue, ``%mkl pending``), and Alice's cell redraws with the next question with no click in her
page; the audit says the answer is Bob's, as the Hub established it.

The Hub is configured as docs/howto/teams.md tells a deployment to (tests/hub_server.py runs the page's
example), with the test's PostgreSQL server as the store every server is given."""

from __future__ import annotations

import contextlib
import json
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import nbformat
import pytest
from browser_support import browser_pages
from hub_server import PASSWORD, home, jupyterhub, proxy_command
from postgres_server import PASSWORD as STORE_PASSWORD
from test_browser import ARTIFACTS
from test_one_history import GATE_A, GATE_B, SCRIPT, TWO_GATES

from support import mkl_cli

pytestmark = pytest.mark.browser  # drives Chromium
ALICES = "flow.ipynb"
PENDING = "review.ipynb"  # Bob's and Carol's: every run of the store that waits, each with its form


def _notebook(path: Path, *sources: str) -> None:
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(source) for source in sources])
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(notebook, path)


@pytest.fixture
def hub(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[tuple[str, str]]:
    """A JupyterHub for Alice, Bob and Carol, all on one new PostgreSQL database (the store): its address and
    the store's URL (with the password, for ``mkl audit``). The how-to's example names alice and bob approvers."""
    proxy_command()  # (skipped, or failed under CI, in one line before any server starts, when there is none)
    store = request.getfixturevalue("postgres").database()
    alice, bob, carol = (home(tmp_path, name) for name in ("alice", "bob", "carol"))
    for folder in (alice, bob, carol):
        folder.mkdir(parents=True)
    (alice / "twogates.script.json").write_text(json.dumps(SCRIPT), encoding="utf-8")
    _notebook(
        alice / ALICES,
        "%load_ext mkl_notebook",
        "%%mkl\n" + TWO_GATES,
        "%mkl run twogates --id r --hitl --script twogates.script.json",
    )
    for folder in (bob, carol):
        _notebook(folder / PENDING, "%load_ext mkl_notebook", "%mkl pending")
    without_password = store.replace(f":{STORE_PASSWORD}@", "@")
    assert without_password != store
    with jupyterhub(tmp_path, ["alice", "bob", "carol"], without_password, STORE_PASSWORD) as base:
        yield base, store


def _log_in(page: Any, base: str, name: str) -> None:
    """``name`` logs in at the Hub's own login form; the Hub spawns their server (not awaited here: three
    servers start at once)."""
    page.goto(f"{base}/hub/login")
    page.fill("input[name=username]", name)
    page.fill("input[name=password]", PASSWORD)
    page.click("input[type=submit], button[type=submit]")


def _open(page: Any, base: str, name: str, notebook: str) -> None:
    """Once ``name``'s server is up (the Hub takes their page there), open ``notebook`` in it; returns once the
    notebook's kernel is idle."""
    from playwright.sync_api import expect

    page.wait_for_url(re.compile(f"/user/{name}/lab"), timeout=90_000)  # spawned, as the Hub does at a login
    page.goto(f"{base}/user/{name}/lab/tree/{notebook}")
    expect(page.locator(".jp-NotebookPanel .jp-Notebook")).to_be_visible(timeout=90_000)
    kernels = f"{base}/user/{name}/api/kernels"
    deadline = time.monotonic() + 60
    while True:  # polled: the page connects to its kernel once the kernel has started
        listed = page.request.get(kernels)
        states = listed.json() if listed.ok else []
        if any(k.get("execution_state") == "idle" and k.get("connections", 0) > 0 for k in states):
            return
        assert time.monotonic() < deadline, f"{name}'s kernel never became idle: {states}"
        page.wait_for_timeout(200)


def _run_all(page: Any) -> None:
    page.click(".lm-MenuBar-itemLabel:text-is('Run')")
    page.click("li.lm-Menu-item[data-command='runmenu:run-all']")


def test_bob_answers_alices_question_in_his_own_server_and_her_cell_moves_on_with_no_click(
    hub: tuple[str, str], tmp_path: Path
) -> None:
    from playwright.sync_api import expect

    base, store = hub
    approve = "button.jupyter-button:has-text('Approve'):not([disabled])"
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    with browser_pages(3) as (alice, bob, carol):
        run_cell = alice.locator(".jp-Notebook .jp-Cell").nth(2)
        try:
            for page, name in ((alice, "alice"), (carol, "carol"), (bob, "bob")):
                _log_in(page, base, name)
            _open(alice, base, "alice", ALICES)
            _run_all(alice)
            expect(run_cell.locator(f".jp-OutputArea-output:has-text('{GATE_A}')").first).to_be_visible(timeout=60_000)
            expect(run_cell.locator(approve)).to_have_count(1, timeout=30_000)

            # Carol sees the question in her own server, its form read-only: she is not among the approvers
            _open(carol, base, "carol", PENDING)
            _run_all(carol)
            seen = carol.locator(".jp-Notebook .jp-Cell").nth(1)
            expect(seen.locator(f".jp-OutputArea-output:has-text('{GATE_A}')").first).to_be_visible(timeout=60_000)
            expect(seen).to_contain_text("may be answered only by alice, bob", timeout=30_000)
            expect(seen).to_contain_text("you are carol (jupyterhub)")
            expect(seen.locator("button.jupyter-button:has-text('Approve')")).to_be_disabled()

            _open(bob, base, "bob", PENDING)
            _run_all(bob)
            queue = bob.locator(".jp-Notebook .jp-Cell").nth(1)
            expect(queue.locator(f".jp-OutputArea-output:has-text('{GATE_A}')").first).to_be_visible(timeout=60_000)
            expect(queue.locator(approve)).to_have_count(1, timeout=30_000)
            queue.locator(approve).click()
            clicked = time.monotonic()

            # Alice's page is not touched: her kernel hears of the answer from the store, and her cell redraws
            expect(run_cell.locator(f".jp-OutputArea-output:has-text('{GATE_B}')").first).to_be_visible(timeout=30_000)
            redrawn = time.monotonic() - clicked
            expect(run_cell).to_contain_text("Answered 'approve' (by bob", timeout=30_000)
            expect(run_cell.locator(approve)).to_have_count(1, timeout=30_000)
            # and Carol's page, not touched either, says the question was answered, by whom, and where the run is:
            # waiting at send, said in words when her kernel read the run between Bob's answer and Alice's kernel
            # going on, or its next question drawn (read-only for her) when it read the run after
            expect(seen).to_contain_text("answered 'approve' (by bob", ignore_case=True, timeout=30_000)
            now = re.compile(r"it is now waiting \(escalated\) at send|" + re.escape(GATE_B))
            expect(seen).to_contain_text(now, timeout=30_000)
        finally:
            with contextlib.suppress(Exception):  # (a page that never drew its notebook is taken as it is)
                run_cell.scroll_into_view_if_needed(timeout=5_000)
            for name, page in (("alice", alice), ("bob", bob), ("carol", carol)):
                page.screenshot(path=str(ARTIFACTS / f"hub-{name}.png"), full_page=True)
    took = time.monotonic() - started
    print(f"hub test: {took:.1f} s in the browser; from Bob's click to gate B in Alice's page {redrawn:.2f} s")

    # The audit, as a person reads it: the answer is Bob's, established by the Hub, under the approvers rule
    code, _, out, err = mkl_cli(tmp_path, "audit", "--store", store)
    assert code == 0, err
    [row] = [line for line in out.splitlines() if GATE_A in line]
    assert "bob (JupyterHub)" in row and "approvers: alice, bob" in row, out
    assert STORE_PASSWORD not in out + err
    code, _, out, err = mkl_cli(tmp_path, "audit", "--store", store, "--json")
    assert code == 0, err
    answers = [(row["by"], row["established"]) for row in json.loads(out)]
    assert answers == [("bob", "jupyterhub")], out
