"""Sharing the way two people really share, in two real JupyterLabs driven through Chromium: two HOMEs, both
servers run by the one OS account (as every ``jovyan`` is), Alice's kernel running throughout, and only the
.ipynb travelling (no script beside it, no model on Bob's side).
"""

from __future__ import annotations

import json
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import nbformat
import pytest
from browser_support import browser_pages, checkout_extension, lab_env, serve
from test_browser import ARTIFACTS, _open_and_run_all, _run_cell, _save, _save_once_outputs_refer, _wait_until_run
from test_kept_kernel import _errors
from test_one_history import GATE_A, GATE_B, SCRIPT, TWO_GATES

from mkl_notebook.checkpoints import envelope

from support import mkl_cli

pytestmark = pytest.mark.browser  # every test here drives Chromium
NAME = "flow.ipynb"


class Person:
    """One person: their folder, served by their own JupyterLab with their own HOME and Jupyter folders (their
    key), known to the OS by the account everyone shares."""

    def __init__(self, root: Path, name: str) -> None:
        self.name = name
        self.folder = root / name
        self.folder.mkdir()
        self.env = lab_env(root / f"{name}-lab")
        self.env["HOME"] = str(root / f"{name}-home")
        Path(self.env["HOME"]).mkdir()
        self.env.pop("JUPYTERHUB_USER", None)
        checkout_extension(self.env)
        self.log = root / f"{name}-jupyter.log"

    @property
    def notebook(self) -> Path:
        return self.folder / NAME

    def mkl(self, *args: str) -> tuple[int, dict[str, Any], str, str]:
        env = {key: self.env[key] for key in ("HOME", "JUPYTER_DATA_DIR")}
        return mkl_cli(self.folder, *args, env=env)

    def key(self) -> str:
        code, _, out, err = self.mkl("trust")
        assert code == 0, err
        return out.split()[6]  # "your key: xxxx xxxx xxxx xxxx  ed25519:…"


@pytest.fixture
def people(tmp_path: Path) -> Iterator[tuple[Person, Person]]:
    alice, bob = Person(tmp_path, "alice"), Person(tmp_path, "bob")
    (alice.folder / "twogates.script.json").write_text(json.dumps(SCRIPT), encoding="utf-8")
    cells = [
        nbformat.v4.new_code_cell("%load_ext mkl_notebook"),
        nbformat.v4.new_code_cell("%%mkl\n" + TWO_GATES),
        nbformat.v4.new_code_cell("%mkl run twogates --id r --hitl --script twogates.script.json"),
        nbformat.v4.new_code_cell("%mkl pending"),
    ]
    notebook = nbformat.v4.new_notebook(cells=cells)
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(notebook, alice.notebook)
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    yield alice, bob


def _cell(page: Any, index: int) -> Any:
    return page.locator(".jp-Notebook .jp-Cell").nth(index)


def test_bob_answers_with_the_ipynb_alone_and_alices_open_page_and_running_kernel_go_on_from_his_answer(
    people: tuple[Person, Person],
) -> None:
    from playwright.sync_api import expect

    alice, bob = people
    with serve(alice.folder, alice.env, alice.log) as alices, browser_pages(2) as (page, bobs_page):
        try:
            _open_and_run_all(page, alices, NAME)
            expect(_cell(page, 2).locator("button.jupyter-button:has-text('Approve')")).to_have_count(1, timeout=90_000)
            _wait_until_run(page, alices, alice.notebook)
            _save_once_outputs_refer(page, alice.notebook)
            code, _, _, err = alice.mkl("trust", bob.key(), "--name", "bob")  # he gave her his key
            assert code == 0, err

            shutil.copy(alice.notebook, bob.notebook)  # the .ipynb alone
            with serve(bob.folder, bob.env, bob.log) as bobs:
                try:
                    _open_and_run_all(bobs_page, bobs, NAME)
                    run = _cell(bobs_page, 2)
                    expect(run).to_contain_text(GATE_A, timeout=90_000)
                    expect(run).to_contain_text("Not trusted:")
                    _wait_until_run(bobs_page, bobs, bob.notebook)
                    name = run.locator(".widget-text input")
                    expect(name).to_have_value(f"{_account(bob)}-{_fingerprint(alice)[:4]}")  # free here
                    run.screenshot(path=str(ARTIFACTS / "sharing-bob-trust.png"))
                    expect(run.locator("button:has-text('Run it here as a new run')")).to_have_count(0)  # no calls here
                    name.fill("alice")  # he knows whose key it is: he types her name
                    run.locator("button.jupyter-button:has-text('Trust key')").click()
                    approve = run.locator("button.jupyter-button:has-text('Approve'):not([disabled])")
                    expect(approve).to_have_count(1, timeout=60_000)
                    approve.click()
                    expect(run).to_contain_text("Run r needs a model to go on at review", timeout=60_000)
                    expect(run).not_to_contain_text("kept unchanged here")  # its view carries it now
                    _save(bobs_page)
                finally:
                    bobs_page.screenshot(path=str(ARTIFACTS / "sharing-bob.png"), full_page=True)
            assert (
                _errors(nbformat.read(bob.notebook, as_version=4)) == []
            )  # no "--script … cannot be read": nothing called for one
            held = envelope.verify_checkpoint(nbformat.read(bob.notebook, as_version=4).metadata["mkl"]["runs"]["r"])
            assert [r["value"] for r in held.records if r["t"] == "reply"] == ["approve"]

            shutil.copy(bob.notebook, alice.notebook)  # back over hers on disk, her page open, her kernel running
            _run_cell(page, 2)
            run = _cell(page, 2)
            expect(run).to_contain_text(GATE_B, timeout=60_000)
            expect(run.locator("button.jupyter-button:has-text('Approve'):not([disabled])")).to_have_count(1)
            expect(page.locator(f".jp-OutputArea-output:has-text('{GATE_A}') button.jupyter-button")).to_have_count(0)
            _run_cell(page, 3)  # %mkl pending: gate B's form, never gate A's
            expect(_cell(page, 3)).to_contain_text(GATE_B)
            expect(_cell(page, 3).locator("button.jupyter-button:has-text('Approve')")).to_have_count(1)
            expect(page.locator(f".jp-OutputArea-output:has-text('{GATE_A}') button.jupyter-button")).to_have_count(0)

            run.locator("button.jupyter-button:has-text('Approve'):not([disabled])").click()
            expect(run).to_contain_text("Done.", timeout=60_000)
            page.locator(".jp-InputPrompt").first.click()
            page.keyboard.press("Control+s")  # the file changed on disk since she saved: she keeps her page's
            page.locator(".jp-Dialog-button:has-text('Overwrite')").click()
            expect(page.locator(".jp-mod-dirty")).to_have_count(0, timeout=30_000)
        finally:
            page.screenshot(path=str(ARTIFACTS / "sharing-alice.png"), full_page=True)

    code, listing, _, err = alice.mkl("runs", NAME)
    assert code == 0, err
    [listed] = listing["runs"]
    assert listed["status"] == "done" and "stale" not in listed, listed
    assert [answer["value"] for answer in listed["answers"]] == ["approve", "approve"]
    code, _, out, err = alice.mkl("audit", NAME, "--json")
    assert code == 0, err
    assert [(row["value"], row["trusted_as"]) for row in json.loads(out)] == [("approve", "bob"), ("approve", "you")]
    shutil.copy(alice.notebook, bob.notebook)  # and to Bob: the first answer his, the second Alice's
    code, _, out, err = bob.mkl("audit", NAME, "--json")
    assert code == 0, err
    assert [(row["value"], row["trusted_as"]) for row in json.loads(out)] == [("approve", "you"), ("approve", "alice")]


def _account(person: Person) -> str:
    from mkl_notebook.app.replies import os_account

    return os_account() or "unknown"


def _fingerprint(person: Person) -> str:
    from mkl_notebook.checkpoints.seals import key_fingerprint

    return key_fingerprint(person.key()).replace(" ", "")


def test_bob_not_trusting_alice_runs_all_answers_his_own_run_and_saves_and_her_runs_stay_byte_for_byte(
    people: tuple[Person, Person],
) -> None:
    """Bob does not trust Alice's key: his Run All makes runs of his own beside hers (his script answers them),
    he answers one and saves. Her runs stay in the file's metadata byte for byte, and a git merge of his file
    with hers after she approved one of her runs (nbdime's driver) leaves every run resumable."""
    from playwright.sync_api import expect
    from test_one_history import _git

    alice, bob = people
    cells = nbformat.read(alice.notebook, as_version=4)
    cells.cells[2:] = [
        nbformat.v4.new_code_cell(f"%mkl run twogates --id {run} --hitl --script twogates.script.json")
        for run in ("r1", "r2")
    ]
    nbformat.write(cells, alice.notebook)
    with serve(alice.folder, alice.env, alice.log) as alices, browser_pages(1) as [page]:
        _open_and_run_all(page, alices, NAME)
        expect(page.locator("button.jupyter-button:has-text('Approve')")).to_have_count(2, timeout=90_000)
        _wait_until_run(page, alices, alice.notebook)
        _save_once_outputs_refer(page, alice.notebook)
    hers = nbformat.read(alice.notebook, as_version=4).metadata["mkl"]["runs"]
    assert sorted(hers) == ["r1", "r2"]
    assert _git(alice.folder, "init").returncode == 0
    _git(alice.folder, "add", NAME, "twogates.script.json")
    assert _git(alice.folder, "commit", "-m", "two runs wait").returncode == 0
    shutil.rmtree(bob.folder)
    assert _git(alice.folder.parent, "clone", str(alice.folder), str(bob.folder)).returncode == 0

    with serve(bob.folder, bob.env, bob.log) as bobs, browser_pages(1) as [page]:
        try:
            _open_and_run_all(page, bobs, NAME)
            expect(page.locator("button.jupyter-button:has-text('Approve')")).to_have_count(2, timeout=90_000)
            _wait_until_run(page, bobs, bob.notebook)
            first = _cell(page, 2)
            expect(first).to_contain_text("Not the run saved in flow.ipynb")
            first.locator("button.jupyter-button:has-text('Approve'):not([disabled])").click()
            expect(first).to_contain_text(GATE_B, timeout=60_000)
            _save_once_outputs_refer(page, bob.notebook)
        finally:
            page.screenshot(path=str(ARTIFACTS / "sharing-untrusting-bob.png"), full_page=True)
    his = nbformat.read(bob.notebook, as_version=4).metadata["mkl"]["runs"]
    assert {run: his[run] for run in hers} == hers  # hers, byte for byte
    own = sorted(set(his) - set(hers))
    assert [run.split(":")[0] for run in own] == ["r1", "r2"], own  # his own runs, beside hers
    answered = envelope.verify_checkpoint(his[own[0]])
    assert [r["value"] for r in answered.records if r["t"] == "reply"] == ["approve"]
    assert _git(bob.folder, "commit", "-am", "bob's own runs").returncode == 0

    code, listing, _, err = alice.mkl("runs", NAME)  # meanwhile Alice approves r2 in her copy
    question = next(run["question_id"] for run in listing["runs"] if run["run"] == "r2")
    code, _, _, err = alice.mkl(
        "resume", NAME, "--run", "r2", "--question", question, "--reply", "approve", "--script", "twogates.script.json"
    )
    assert code == 3, err
    assert _git(alice.folder, "commit", "-am", "alice approves r2").returncode == 0
    driver = f"{Path(sys.executable).parent / 'git-nbmergedriver'} merge %O %A %B %L %P"
    _git(alice.folder, "config", "merge.jupyternotebook.driver", driver)
    (alice.folder / ".git" / "info" / "attributes").write_text("*.ipynb merge=jupyternotebook\n", encoding="utf-8")
    _git(alice.folder, "pull", "--no-rebase", "--no-edit", str(bob.folder), "main")
    merged = nbformat.read(alice.notebook, as_version=4)  # both ran the cells: their outputs may conflict, ...
    assert "nbdime-conflicts" not in merged.metadata  # ... the runs, in the metadata, do not
    assert sorted(merged.metadata["mkl"]["runs"]) == sorted([*hers, *own])

    code, listing, out, err = alice.mkl("runs", NAME)
    assert code == 0 and "damaged" not in out, out + err
    runs = {run["run"]: run for run in listing["runs"]}
    assert set(runs) == {"r1", "r2", *own}
    assert (runs["r1"]["ask"], runs["r2"]["ask"]) == (GATE_A, GATE_B)  # hers: r2 as she approved it
    for run_id, listed in runs.items():  # and every run goes on (Bob's, by Alice's choice: she does not know him)
        trusting = [] if run_id in hers else ["--trust-file"]
        code, status, _, err = alice.mkl(
            "resume", NAME, "--run", run_id, "--question", listed["question_id"], "--reply", "approve",
            "--script", "twogates.script.json", *trusting,
        )  # fmt: skip
        assert code in (0, 3) and status["status"] in ("done", "suspended"), err


def test_a_page_reloaded_on_a_running_kernel_answers_reads_the_next_questions_commands_and_saves_the_run(
    people: tuple[Person, Person],
) -> None:
    """Alice reloads her page (her kernel runs on): a click there is sent back where the page can see it (the
    next question with the commands that answer it, in the form's place), the whole view of the run is redrawn
    there (what was answered, the status, the trace), and the run as it stands reaches the metadata the page
    saves, though the kernel opened its link to the page that is gone."""
    from playwright.sync_api import expect

    alice, _bob = people
    with serve(alice.folder, alice.env, alice.log) as alices, browser_pages(1) as [page]:
        try:
            _open_and_run_all(page, alices, NAME)
            expect(_cell(page, 2).locator("button.jupyter-button:has-text('Approve')")).to_have_count(1, timeout=90_000)
            _wait_until_run(page, alices, alice.notebook)
            _save_once_outputs_refer(page, alice.notebook)

            page.reload()
            page.wait_for_selector(".jp-NotebookPanel .jp-Notebook", timeout=60_000)
            run = _cell(page, 2)
            approve = run.locator("button.jupyter-button:has-text('Approve'):not([disabled])")
            expect(approve).to_have_count(1, timeout=60_000)  # the kernel that drew the form holds it: still live
            approve.click()
            commands = run.locator(".jupyter-widgets", has_text="mkl resume flow.ipynb --run r")
            expect(commands.filter(has_text=GATE_B).first).to_be_visible(timeout=60_000)
            # The whole view moved on in this page too, not the form alone: what gate A's place says, the status.
            printed = run.locator(".jp-OutputArea-output:not(:has(.jupyter-widgets))")
            expect(printed.filter(has_text="Answered 'approve'")).to_have_count(1)
            expect(printed.filter(has_text="resumes at send")).to_have_count(1)
            expect(printed.filter(has_text="resumes at review")).to_have_count(0)
            assert _saved_after_click(page, alice.notebook) == GATE_B
        finally:
            page.screenshot(path=str(ARTIFACTS / "sharing-reloaded.png"), full_page=True)


def _saved_after_click(page: Any, path: Path) -> str | None:
    """What the metadata saved holds of run r once the click has reached the page: each time the page has
    something new to save (the kernel puts the run into its metadata), save it and read the question it holds."""
    import time

    deadline = time.monotonic() + 30
    ask = None
    while ask != GATE_B and time.monotonic() < deadline:
        if page.locator(".jp-mod-dirty").count():
            _save(page)  # (waits until the page says it is saved: the file is whole)
            runs = nbformat.read(path, as_version=4).metadata.get("mkl", {}).get("runs", {})
            ask = envelope.verify_checkpoint(runs["r"]).header.get("ask") if "r" in runs else None
        else:
            page.wait_for_timeout(200)
    return ask
