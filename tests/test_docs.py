"""The documentation: the site builds with warnings as errors, every link inside it leads somewhere, the command
and magic reference says what the real parsers parse, and the README is a front page whose example runs.

The site is built as the README says to build it (``sphinx-build -W --keep-going -n``), once for this module;
nothing in the build reaches the network (no intersphinx, and the notebooks are rendered, never executed).
"""

from __future__ import annotations

import argparse
import html
import re
import shutil
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

import nbformat
import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
README = ROOT / "README.md"
sys.path.insert(0, str(DOCS / "_ext"))

import mkl_reference  # noqa: E402  (docs/_ext: the extension that writes the reference pages)


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The site, built as the README says: warnings are errors, references nitpicky."""
    out = tmp_path_factory.mktemp("site")
    sources_before = sorted(path.relative_to(DOCS) for path in DOCS.rglob("*") if "_build" not in path.parts)
    built = subprocess.run(
        [sys.executable, "-m", "sphinx", "-W", "--keep-going", "-n", "-q", "-b", "html", str(DOCS), str(out / "html")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
    )
    assert built.returncode == 0, built.stdout[-4000:] + built.stderr[-6000:]
    assert "WARNING" not in built.stderr, built.stderr[-6000:]
    sources_after = sorted(path.relative_to(DOCS) for path in DOCS.rglob("*") if "_build" not in path.parts)
    assert sources_after == sources_before  # the build writes nothing into docs/
    return out / "html"


class _Links(HTMLParser):
    """The ids a page defines and the local addresses it refers to (links, images, scripts, styles)."""

    def __init__(self) -> None:
        super().__init__()
        self.ids: set[str] = set()
        self.refs: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        given = dict(attrs)
        if given.get("id"):
            self.ids.add(str(given["id"]))
        for name in ("href", "src"):
            value = given.get(name)
            if value and not urlsplit(value).scheme and not value.startswith("//"):
                self.refs.append(value)


def _pages(site: Path) -> dict[Path, _Links]:
    pages = {}
    for page in site.rglob("*.html"):
        if "_static" in page.relative_to(site).parts:  # the theme's template fragments, copied as they are
            continue
        links = _Links()
        links.feed(page.read_text(encoding="utf-8"))
        pages[page.resolve()] = links
    return pages


def test_the_site_builds_with_warnings_as_errors_and_every_page_in_it(site: Path) -> None:
    for page in ("index", "tutorials/02-human-approval", "howto/teams", "reference/commands", "reference/magics"):
        assert (site / f"{page}.html").is_file(), page
    for page in ("reference/python", "explain/trust", "language", "notebooks", "architecture"):
        assert (site / f"{page}.html").is_file(), page
    assert (site / "_static" / "approval-form.png").is_file()


def test_every_local_link_of_the_site_leads_to_a_file_and_anchor_that_exist(site: Path) -> None:
    pages = _pages(site)
    broken = []
    checked = 0
    for page, links in pages.items():
        for ref in links.refs:
            parts = urlsplit(ref)
            target = (page.parent / unquote(parts.path)).resolve() if parts.path else page
            checked += 1
            if not target.exists():
                broken.append(f"{page.relative_to(site.resolve())}: {ref} (no such file)")
            elif parts.fragment and target.suffix == ".html" and unquote(parts.fragment) not in pages[target].ids:
                broken.append(f"{page.relative_to(site.resolve())}: {ref} (no such anchor)")
    assert checked > 500 and not broken, "\n".join(broken)


def _section_text(page: Path, section_id: str) -> str:
    """The text of the section with ``section_id`` on ``page``, tags dropped and whitespace made single."""
    found = re.search(rf'<section id="{re.escape(section_id)}">(.*?)</section>', page.read_text(encoding="utf-8"), re.S)
    assert found is not None, f"no section {section_id} in {page.name}"
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", found.group(1))).split())


def _said(action: argparse.Action) -> tuple[list[str], str]:
    """How an argument is written (its option strings, or a positional's name) and its help, whitespace single."""
    names = list(action.option_strings) or [str(action.metavar or action.dest)]
    return names, " ".join((action.help or "").split())


def _arguments(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    return [action for action in parser._actions if not isinstance(action, argparse._HelpAction)]


def test_the_command_reference_lists_every_flag_of_every_mkl_command_with_its_help(site: Path) -> None:
    from mkl_notebook.cli import build_parser

    parser = build_parser()
    commands = next(action for action in parser._actions if isinstance(action, argparse._SubParsersAction))
    assert {"run", "resume", "map", "runs", "audit", "trust", "keep"} <= set(commands.choices)
    page = site / "reference" / "commands.html"
    for name, sub in commands.choices.items():
        text = _section_text(page, f"command-{name}")
        assert f"usage: mkl {name}" in text, name
        assert " ".join((sub.description or "").split()) in text, name  # what --help says above the arguments
        for action in _arguments(sub):
            names, meaning = _said(action)
            assert all(spelled in text for spelled in names), (name, names)
            assert meaning in text, (name, names, meaning)


def test_the_magic_reference_lists_every_magic_its_help_and_every_flag(site: Path) -> None:
    from mkl_notebook.notebook.magic_args import HELP, SUBCOMMANDS, parsers

    page = site / "reference" / "magics.html"
    parsed = parsers()
    entries = mkl_reference.help_entries(HELP)
    shown = [line for lines in entries.values() for line in lines]
    assert len(shown) == len([line for line in HELP.splitlines() if line.strip()])  # every line of %mkl help
    for name in SUBCOMMANDS:
        text = _section_text(page, f"magic-{name}")
        assert f"usage: %mkl {name}" in text, name
        for line in entries[name]:
            assert " ".join(line.split()) in text, (name, line)
        for action in _arguments(parsed[name]) if name in parsed else []:
            names, meaning = _said(action)
            assert all(spelled in text for spelled in names), (name, names)
            assert meaning in text, (name, names, meaning)
    assert "define (or redefine) the machine" in _section_text(page, "magic-mkl")  # the cell magic, %%mkl


def test_a_flag_changed_in_the_one_table_reaches_both_references_with_no_page_edited(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The reference is written from the parsers, and the parsers from the table: a flag renamed and given a new
    meaning there is documented under ``mkl run`` and ``%mkl run`` alike, and its old spelling nowhere."""
    from mkl_notebook.app import flags

    renamed = flags.FLAGS["ask_human"].replaced(option="--ask-a-person", help="a meaning written only in the table")
    monkeypatch.setitem(flags.FLAGS, "ask_human", renamed)
    for commands in (mkl_reference.cli_commands(), mkl_reference.magic_commands()):
        run = next(command for command in commands if command.key == "run")
        options = {option.spelling: option.help for option in run.options}
        assert options["--ask-a-person"] == "a meaning written only in the table"
        assert "--ask-human" not in options and "--ask-a-person" in run.usage


def test_the_readme_is_a_front_page_whose_links_lead_to_the_docs() -> None:
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 150
    links = re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", text)
    local = [link for link in links if not urlsplit(link).scheme]
    assert {"docs/reference/commands.md", "docs/howto/share-for-approval.md", "docs/language.md"} <= set(local)
    missing = [link for link in local if not (ROOT / link).exists()]
    assert not missing, missing
    screenshot = ROOT / "docs" / "_static" / "approval-form.png"
    assert "docs/_static/approval-form.png" in local and screenshot.stat().st_size < 200_000


def _readme_notebook_cells() -> list[str]:
    part = README.read_text(encoding="utf-8").split("## In a notebook", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```python\n(.*?)```", part, re.S)


def test_the_readmes_notebook_example_runs_and_ends_as_it_says(tmp_path: Path) -> None:
    """The README's cells, run as JupyterLab runs them in a folder holding the checkout's examples: the run waits
    at its question, ``r.submit("approve")`` answers it, and the last cell shows what its comment says."""
    from lab_client import run_all

    cells = _readme_notebook_cells()
    assert len(cells) == 3 and sum(len(cell.strip().splitlines()) for cell in cells) <= 10
    shutil.copytree(ROOT / "examples", tmp_path / "examples")
    path = tmp_path / "example.ipynb"
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(cell.strip()) for cell in cells]), path)
    ran = run_all(path)
    printed = "".join(
        "".join(output.get("text", "")) + str(output.get("data", {}).get("text/plain", ""))
        for output in ran.cells[1].outputs
    )
    assert "The draft promises a refund. Approve sending it?" in printed, printed[-3000:]
    said = re.search(r"# (\(.*\))$", cells[2].strip(), re.M)
    assert said is not None
    last = [output for output in ran.cells[2].outputs if output.get("output_type") == "execute_result"]
    assert [" ".join(output["data"]["text/plain"].split()) for output in last] == [said.group(1)]  # (pprint wraps)


def test_the_hub_example_sets_only_variables_a_kernel_reads() -> None:
    """The `jupyterhub_config.py` example of the teams how-to names the variables the package reads, spelled so."""
    import ast

    from mkl_notebook.app.settings import APPROVERS_ENV
    from mkl_notebook.durable.store_names import STORE_ENV

    page = (ROOT / "docs" / "howto" / "teams.md").read_text(encoding="utf-8")
    [example] = re.findall(r"```python\n(# jupyterhub_config\.py\n.*?)```", page, flags=re.S)
    tree = ast.parse(example)
    [assigned] = [node for node in ast.walk(tree) if isinstance(node, ast.Assign)]
    assert ast.unparse(assigned.targets[0]) == "c.Spawner.environment"
    assert isinstance(assigned.value, ast.Dict)
    names = {key.value for key in assigned.value.keys if isinstance(key, ast.Constant)}
    assert names == {STORE_ENV, APPROVERS_ENV}
