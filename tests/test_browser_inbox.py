"""The inbox panel in JupyterLab (Chromium): the questions waiting in notebooks nobody has open, answered from the
left sidebar with no kernel started; the row leaves, the store says who answered and how, and a row's place opens
its notebook at the cell that asked."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from browser_support import browser_page, checkout_extension, get_json, lab_env, serve
from lab_client import run_all
from test_browser import ARTIFACTS

from mkl_notebook.app.replies import os_account

from support import mkl_cli, refund_notebook

pytestmark = pytest.mark.browser  # drives Chromium
ME = os_account() or "nobody"


@pytest.fixture
def desk(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """JupyterLab over a folder of two notebooks whose runs wait for approval, none of them open."""
    folder = tmp_path / "desk"
    (folder / "sales").mkdir(parents=True)
    (folder / "support").mkdir()
    refund_notebook(folder / "sales" / "north.ipynb", {"n1": "Parcel N-1 broke"})
    refund_notebook(folder / "support" / "south.ipynb", {"s1": "Parcel S-1 is late", "s2": "Parcel S-2 is wet"})
    run_all(folder / "sales" / "north.ipynb")
    run_all(folder / "support" / "south.ipynb")
    env = lab_env(tmp_path / "lab")
    checkout_extension(env)
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with serve(folder, env, tmp_path / "lab.log") as base:
        yield base, folder


def _rows(page: Any) -> dict[str, Any]:
    """The panel's rows by run id."""
    rows = page.locator("#mkl-inbox .mkl-inbox-row")
    return {rows.nth(i).get_attribute("data-run"): rows.nth(i) for i in range(rows.count())}


def test_the_inbox_panel_lists_questions_of_closed_notebooks_and_answers_one_with_no_kernel(
    desk: tuple[str, Path],
) -> None:
    from playwright.sync_api import expect

    base, folder = desk
    with browser_page() as page:
        try:
            page.goto(f"{base}/lab")
            page.locator(".lm-TabBar-tab[data-id='mkl-inbox']").click()
            rows = page.locator("#mkl-inbox .mkl-inbox-row")
            expect(rows).to_have_count(3, timeout=60_000)
            assert sorted(_rows(page)) == ["n1", "s1", "s2"]
            s1 = _rows(page)["s1"]
            expect(s1.locator(".mkl-inbox-ask")).to_have_text("The draft promises a refund. Approve it?")
            expect(s1.locator(".mkl-inbox-open")).to_have_text("Open support/south.ipynb, cell 3")
            assert get_json(f"{base}/api/kernels") == []  # nothing was started to list them
            # Reject with a note: the run goes on (to its end: a rejected refund is not sent) and its row leaves.
            s1.locator(".mkl-inbox-reply").fill("ask the warehouse first")
            s1.locator("button:text-is('Reject')").click()
            expect(page.locator("#mkl-inbox .mkl-inbox-row[data-run='s1']")).to_have_count(0, timeout=60_000)
            expect(rows).to_have_count(2)
            assert get_json(f"{base}/api/kernels") == []
            code, _, out, err = mkl_cli(folder / "support", "audit", "--json")
            assert code == 0, err
            [given] = [row for row in json.loads(out.strip().splitlines()[-1]) if row["run"] == "s1"]
            assert (given["value"], given["by"], given["via"], given["note"]) == (
                "reject",
                ME,
                "inbox",
                "ask the warehouse first",
            ), given
            # A row's place opens its notebook at the cell that asked.
            _rows(page)["n1"].locator(".mkl-inbox-open").click()
            active = page.locator(".jp-NotebookPanel .jp-Cell.jp-mod-active")
            expect(active).to_contain_text("--id n1", timeout=60_000)
            # A notification's link (MKL_INBOX_URL with the question named) opens the inbox at that question.
            [s2] = [row for row in get_json(f"{base}/mkl/inbox")["rows"] if row["run"] == "s2"]  # type: ignore[index]
            page.goto(f"{base}/lab?mkl-question={s2['question_id']}")
            asked = page.locator("#mkl-inbox .mkl-inbox-row.mkl-inbox-asked")
            expect(asked).to_have_count(1, timeout=60_000)
            assert asked.get_attribute("data-run") == "s2"
            expect(page.locator("#mkl-inbox")).to_be_visible()
        finally:
            page.screenshot(path=str(ARTIFACTS / "inbox-panel.png"))
