"""Where no widget draws (an HTML or PDF export, a Git host's viewer) a waiting run's question reads on its own:
the question, what it is about, who asks and the exact command, outside any widget state. Real tools:
``jupyter nbconvert --execute`` (where nobody can click, so no form is drawn into the file), nbconvert's HTML
exporter with its lab and classic templates, and Debian's Chromium (offline) for what a person sees and prints.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from browser_support import browser_page

from support import refund_notebook

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "notebooks" / "data"
ARTIFACTS = ROOT / "test-artifacts" / "exports"
ASK = "The draft promises a refund. Approve it?"
ABOUT = "We are sorry: your order A-1001 will be refunded in full."


def waiting_notebook(path: Path, run_id: str = "waiting") -> None:
    """A notebook whose last cell leaves a run waiting for a person (the tutorials' refund machine, scripted)."""
    refund_notebook(path, {run_id: "Parcel A-1001 arrived broken"})


def nbconvert(*args: str) -> None:
    command = [sys.executable, "-m", "jupyter", "nbconvert", *args]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-3000:]


@pytest.fixture(scope="module")
def executed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The waiting notebook as ``jupyter nbconvert --to notebook --execute`` leaves it."""
    folder = tmp_path_factory.mktemp("exports")
    waiting_notebook(folder / "waiting.ipynb")
    nbconvert("--to", "notebook", "--execute", str(folder / "waiting.ipynb"), "--output", "executed.ipynb")
    executed = folder / "executed.ipynb"
    assert "widgets" not in nbformat.read(executed, as_version=4).metadata  # no form where nobody can click
    return executed


def html_export(notebook: Path, template: str) -> Path:
    """``jupyter nbconvert --to html --template TEMPLATE`` of ``notebook``, beside it."""
    out = notebook.with_name(f"{notebook.stem}-{template}.html")
    nbconvert("--to", "html", "--template", template, str(notebook), "--output", out.name)
    return out


def without_scripts(page: str) -> str:
    """What a page says with every ``<script>`` block left out (widget state, widget views, the widget manager)."""
    return re.sub(r"<script\b.*?</script>", "", page, flags=re.DOTALL | re.IGNORECASE)


def readable(page: str) -> str:
    """The page's text outside scripts, its markup and entities gone, its spaces collapsed."""
    import html

    text = re.sub(r"<[^>]+>", " ", without_scripts(page))
    return " ".join(html.unescape(text).split())


@pytest.mark.parametrize("template", ["lab", "classic"])
def test_an_html_export_of_an_executed_notebook_shows_the_question_and_the_command(
    executed: Path, template: str
) -> None:
    said = readable(html_export(executed, template).read_text(encoding="utf-8"))
    assert ASK in said
    assert f"About this (the output the question is about): {ABOUT}" in said
    assert "The machine's author asks:" in said
    answer = r"mkl resume \S+ --run waiting (--script \S+ )?--question q-[0-9a-f]+ --reply approve"
    assert re.search(answer, said), said
    # printed once (besides the machine's source): the run's view leaves the question to its place above
    assert said.count(ASK) == 2 and said.count(f'ask: "{ASK}"') == 1


@pytest.mark.parametrize("name", ["02-human-approval", "07-batches"])
def test_the_shipped_tutorials_exported_to_html_show_their_questions_and_commands(tmp_path: Path, name: str) -> None:
    shipped = ROOT / "notebooks" / f"{name}.ipynb"
    copy = tmp_path / shipped.name
    shutil.copy(shipped, copy)
    said = readable(html_export(copy, "lab").read_text(encoding="utf-8"))
    saved = nbformat.read(copy, as_version=4)
    asked = [
        output
        for cell in saved.cells
        for output in cell.get("outputs", [])
        if "application/vnd.jupyter.widget-view+json" in output.get("data", {})
    ]
    assert asked, f"{name} ships no form"
    if name.startswith("02"):
        command = r"mkl resume 02-human-approval\.ipynb --run approval-demo (--script \S+ )?--question q-"
        assert ASK in said and re.search(command, said), said
    else:
        assert re.search(r"refund-\S+ asks: The draft promises a refund\. Approve it\?", said), said
        command = r"mkl resume 07-batches\.ipynb --run refund-\S+ (--script \S+ )?--question q-[0-9a-f]+"
        assert re.search(command, said), said


@pytest.mark.browser
def test_chromium_offline_shows_the_exported_question_and_prints_the_trace(executed: Path) -> None:
    from playwright.sync_api import expect

    page_file = html_export(executed, "lab")
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with browser_page() as page:
        page.route(re.compile(r"^https?://"), lambda route: route.abort())  # offline: no widget manager from a CDN
        page.goto(page_file.as_uri())
        question = page.locator("blockquote", has_text=ASK)
        expect(question).to_have_count(1)
        expect(question).to_be_visible()
        command = page.get_by_text(re.compile(r"mkl resume \S+ --run waiting (--script \S+ )?--question q-"))
        expect(command.first).to_be_visible()
        page.screenshot(path=str(ARTIFACTS / "executed-waiting-run.png"), full_page=True)
        page.emulate_media(media="print")  # as a printed page or a PDF: the run's trace is not folded away
        expect(page.get_by_text("Trace of waiting").first).to_be_visible()
        page.pdf(path=str(ARTIFACTS / "executed-waiting-run.pdf"))
