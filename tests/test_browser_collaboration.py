"""Real-time collaboration (jupyter-collaboration): people's pages of one notebook on one server, sharing its
kernel, each known to the server by name. A page open before the run and one opened after it both draw the form,
a click in either answers once, and every page shows the same view of the run, in the same order, afterwards."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import nbformat
import pytest
from browser_support import browser_pages, checkout_extension, lab_env, serve
from test_browser import ARTIFACTS, _open, _save, _watch_prompts
from test_one_history import GATE_A, GATE_B, SCRIPT, TWO_GATES

from support import mkl_cli

pytestmark = pytest.mark.browser  # every test here drives Chromium
NAME = "flow.ipynb"
RUN_CELL = 2


@pytest.fixture
def shared(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """One JupyterLab shared in real time, its users named by their browsers' cookies: its address and folder."""
    folder = tmp_path / "shared"
    folder.mkdir()
    (folder / "twogates.script.json").write_text(json.dumps(SCRIPT), encoding="utf-8")
    cells = [
        nbformat.v4.new_code_cell("%load_ext mkl_notebook"),
        nbformat.v4.new_code_cell("%%mkl\n" + TWO_GATES),
        nbformat.v4.new_code_cell("%mkl run twogates --id r --hitl --script twogates.script.json"),
    ]
    notebook = nbformat.v4.new_notebook(cells=cells)
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(notebook, folder / NAME)
    env = lab_env(tmp_path / "lab")
    checkout_extension(env)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(Path(__file__).parent), env.get("PYTHONPATH")]))
    options = [
        "--YDocExtension.disable_rtc=False",
        "--ServerApp.identity_provider_class=named_identity.CookieNamedUsers",
        "--CookieNamedUsers.token=",
    ]
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with serve(folder, env, tmp_path / "lab.log", options=options) as base:
        yield base, folder


def _as(page: Any, base: str, name: str) -> Any:
    page.context.add_cookies([{"name": "mkl_test_user", "value": name, "url": base}])
    return page


def _outputs(page: Any) -> list[tuple[str, str]]:
    """The run cell's outputs as this page draws them: each one's kind and its text."""
    outputs = page.locator(".jp-Notebook .jp-Cell").nth(RUN_CELL).locator(".jp-OutputArea-output")
    return [
        (outputs.nth(i).get_attribute("data-mime-type") or "widget", outputs.nth(i).inner_text())
        for i in range(outputs.count())
    ]


def _alike(pages: list[Any], *texts: str) -> list[tuple[str, str]]:
    """Poll until every page draws the run cell's outputs alike (each a widget, HTML or a drawing, never a text
    in their place for want of trust), with ``texts`` in them in that order, one each: those outputs."""
    import time

    deadline = time.monotonic() + 60
    while True:
        drawn = [_outputs(page) for page in pages]
        as_text = [text for kind, text in drawn[0] if kind == "text/plain" and text.strip()]
        said = "\n".join(text for _, text in drawn[0])
        places = [said.find(text) for text in texts]
        if (
            all(other == drawn[0] for other in drawn)
            and not as_text  # (an emptied place is drawn as empty text)
            and all(said.count(text) == 1 for text in texts)
            and places == sorted(places)
        ):
            return drawn[0]
        assert time.monotonic() < deadline, f"the pages draw the run differently: {drawn}"
        pages[0].wait_for_timeout(300)


def test_collaborators_open_before_and_after_the_run_draw_the_form_and_one_click_redraws_every_page(
    shared: tuple[str, Path],
) -> None:
    """Alice runs the notebook while Bob has it open; Carol opens it once the question waits. Each page draws the
    form (Bob's too, though his page read the cell before it ran); Alice and Bob click gate A at once and one
    answer is recorded, Carol answers gate B; each answer is its clicker's, and every page shows each step the
    same, in the cell's order."""
    from playwright.sync_api import expect

    base, folder = shared
    with browser_pages(3) as pages:
        alice, bob, carol = (_as(page, base, name) for page, name in zip(pages, ("alice", "bob", "carol"), strict=True))
        try:
            _open(bob, base, NAME)  # before the run
            _open(alice, base, NAME)
            _watch_prompts(alice)
            alice.click(".lm-MenuBar-itemLabel:text-is('Run')")
            alice.click("li.lm-Menu-item[data-command='runmenu:run-all']")
            approve = "button.jupyter-button:has-text('Approve'):not([disabled])"
            expect(alice.locator(approve)).to_have_count(1, timeout=90_000)
            _open(carol, base, NAME)  # after it
            asked = _alike([alice, bob, carol], GATE_A, "resumes at review")
            assert [kind for kind, _ in asked] == ["text/html", "widget", "text/html", "image/svg+xml"]

            # Alice and Bob click Approve at once: the first click the kernel reads answers, the other finds the
            # question answered and records nothing
            both = [page.locator(approve).element_handle() for page in (alice, bob)]
            for button in both:
                button.evaluate("button => button.click()")
            _alike([alice, bob, carol], "Answered 'approve' (by ", GATE_B, "resumes at send")
            carol.locator(approve).click()
            _alike([alice, bob, carol], "Answered 'approve' (by ", "then 'approve' (by ", "Done.")
            for page in (alice, bob, carol):
                expect(page.locator(approve)).to_have_count(0)  # no question is left to click

            _save(alice)
        finally:
            for name, page in (("alice", alice), ("bob", bob), ("carol", carol)):
                page.screenshot(path=str(ARTIFACTS / f"collaboration-{name}.png"), full_page=True)
    code, _, out, err = mkl_cli(folder, "audit", NAME, "--json")
    assert code == 0, err
    # one answer per question, each with the name its clicker's page reports (a claim: the kernel cannot check a
    # page's word), beside the account the kernel runs as
    answers = [(row["established"], row["claimed"]) for row in json.loads(out)]
    assert [established for established, _ in answers] == ["os-account", "os-account"], answers
    assert answers[0][1] in ("alice", "bob") and answers[1][1] == "carol", answers
