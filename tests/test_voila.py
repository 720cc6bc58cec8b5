"""Voila draws a notebook's outputs once, then follows only its widgets: a form's click must redraw in the
widget itself. Voila 0.5 (a Jupyter server extension, offline) and Debian's Chromium, driven by Playwright."""

from __future__ import annotations

from pathlib import Path

import pytest
from browser_support import browser_page, lab_env, serve
from test_static_exports import waiting_notebook

ROOT = Path(__file__).resolve().parent.parent
ARTIFACTS = ROOT / "test-artifacts" / "voila"
FIRST = "The draft promises a refund. Approve it?"
SECOND = "Send this reply to the customer now?"


@pytest.mark.browser
def test_a_click_in_voila_redraws_the_form_in_place_until_the_result(tmp_path: Path) -> None:
    from playwright.sync_api import expect

    root = tmp_path / "site"
    root.mkdir()
    waiting_notebook(root / "refund.ipynb", "voila-demo")  # its run waits for a person twice
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    voila = serve(root, lab_env(tmp_path), tmp_path / "voila.log", app=("jupyter", "server"))
    with voila as base, browser_page() as page:
        try:
            page.goto(f"{base}/voila/render/refund.ipynb", timeout=120_000)
            expect(page.get_by_text(FIRST).first).to_be_visible(timeout=120_000)
            approve = page.locator("button.jupyter-button:has-text('Approve'):not([disabled])")
            expect(approve).to_have_count(1, timeout=60_000)
            page.screenshot(path=str(ARTIFACTS / "1-waiting.png"), full_page=True)
            url = page.url

            approve.click()
            # No reload: the form's widget shows what became of the question, then the next one.
            expect(page.locator(".jupyter-widgets").get_by_text(SECOND).filter(visible=True)).to_be_visible(
                timeout=60_000
            )
            expect(page.locator(".jupyter-widgets").get_by_text("Answered 'approve' (by ")).to_be_visible()
            expect(approve).to_have_count(1)
            page.screenshot(path=str(ARTIFACTS / "2-next-question.png"), full_page=True)

            approve.click()
            expect(page.locator(".jupyter-widgets").get_by_text("Sent to the customer.").first).to_be_visible(
                timeout=60_000
            )
            expect(page.locator("button.jupyter-button")).to_have_count(0)
            # The whole view follows, not only the form: no place still says the run waits, or how to answer it.
            expect(page.get_by_text("Pending (escalated)")).to_have_count(0)
            expect(page.get_by_text("--reply approve")).to_have_count(0)
            expect(page.get_by_text("· pending")).to_have_count(0)  # the diagram redrawn: nothing pending
            expect(page.get_by_text("Answered 'approve' (by ")).to_have_count(1)  # the last answer, said once
            assert page.url == url
            page.screenshot(path=str(ARTIFACTS / "3-result.png"), full_page=True)
        finally:
            page.screenshot(path=str(ARTIFACTS / "4-final.png"), full_page=True)
