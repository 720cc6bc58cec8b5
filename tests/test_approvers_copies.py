"""Who may answer, on the way back: an answer that someone's copy of a run brings (a notebook sent back) stands
only when the run's approvers let its answerer answer, by the name their record establishes or the name the
reader trusts their signing key under. Anyone else's is kept aside in the file, marked, and told in one line;
every road that reads the file (a kernel's Run All, ``mkl resume NOTEBOOK``, ``mkl runs``, ``mkl audit``) says
the same.

Three people of one operating system account (as on a hub whose servers all run as ``jovyan``), each with a
home folder of their own (their own signing key): Alice starts a run that only carol may answer and sends the
notebook to Bob and to Carol. The OS account names neither, so what tells them apart is the name Alice trusts
each one's key under.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import nbformat
import pytest
from lab_client import run_all
from test_one_history import SCRIPT, TWO_GATES

from mkl_notebook.app.replies import os_account
from mkl_notebook.checkpoints import notebook_file as nbfile
from mkl_notebook.durable.stores import SQLiteStore

from support import env_without_models, mkl_cli

GATE_A, GATE_B = "Gate A: approve the draft?", "Gate B: send it?"
# Bob's mkl is one from before runs named their approvers (it reads the rule, as any mkl keeps options it does
# not know, and checks nothing): the one way a copy comes back holding a reply from someone the run does not let
# answer, short of editing the file and signing it again.
OLDER_MKL = (
    "import runpy, mkl_notebook.app.workspace as workspace\n"
    "workspace.check_approver = lambda *args: None\n"
    "runpy.run_module('mkl_notebook.cli', run_name='__main__')\n"
)


class Person:
    """Someone with a home folder of their own (their key, in their Jupyter data folder), logged in as the one
    OS account everyone here shares; a kernel of theirs is their hub user."""

    def __init__(self, root: Path, name: str) -> None:
        self.name = name
        self.home = root / name
        self.folder = self.home / "work"
        self.folder.mkdir(parents=True)
        (self.folder / "twogates.script.json").write_text(json.dumps(SCRIPT), encoding="utf-8")
        self.env = {"HOME": str(self.home), "JUPYTER_DATA_DIR": str(self.home / "jupyter"), "JUPYTERHUB_USER": name}

    @property
    def notebook(self) -> Path:
        return self.folder / "flow.ipynb"

    def mkl(self, *args: str) -> tuple[int, dict[str, Any], str, str]:
        return mkl_cli(self.folder, *args, env=self.env)

    def trusts(self, other: Person) -> None:
        code, _, out, err = other.mkl("trust")
        assert code == 0, err
        code, _, _, err = self.mkl("trust", out.split()[6], "--name", other.name)
        assert code == 0, err

    def receive(self, sender: Person) -> None:
        shutil.copy(sender.notebook, self.notebook)

    def question(self) -> str:
        """The question the notebook file's run waits on, as ``mkl runs`` lists it."""
        code, listing, _, err = self.mkl("runs", self.notebook.name)
        assert code == 0, err
        [listed] = listing["runs"]
        return str(listed["question_id"])

    def store(self) -> SQLiteStore:
        return SQLiteStore(self.folder / ".mkl" / "runs.sqlite")


def _cells(*sources: str) -> list[Any]:
    return [nbformat.v4.new_code_cell(source) for source in sources]


def _texts(nb: Any) -> str:
    return "\n".join(
        "".join(output.get("text", "")) + "".join(output.get("data", {}).get("text/plain", ""))
        for cell in nb.cells
        for output in cell.get("outputs", [])
    )


def _replies(records: list[dict[str, Any]]) -> list[tuple[Any, Any]]:
    return [(record.get("value"), record.get("by")) for record in records if record.get("t") == "reply"]


@pytest.fixture
def team(tmp_path: Path) -> tuple[Person, Person, Person]:
    """Alice's run, which only carol may answer, waits at gate A; Bob and Carol each have the notebook and trust
    her key; she trusts both of theirs, under their names."""
    assert os_account(), "these tests run as an account with a name"
    alice, bob, carol = (Person(tmp_path, name) for name in ("alice", "bob", "carol"))
    cells = _cells(
        "%load_ext mkl_notebook",
        "%%mkl\n" + TWO_GATES,
        "%mkl run twogates --id r --hitl --script twogates.script.json --approvers carol",
    )
    nbformat.write(nbformat.v4.new_notebook(cells=cells), alice.notebook)
    assert GATE_A in _texts(run_all(alice.notebook, env=alice.env))
    for other in (bob, carol):
        other.receive(alice)
        other.trusts(alice)
        alice.trusts(other)
    return alice, bob, carol


def _answers_with_an_older_mkl(person: Person) -> None:
    """``person`` answers gate A in their copy on the command line, with an mkl from before the approvers rule:
    what is established is the OS account, the one all share."""
    question = person.question()
    args = ["resume", person.notebook.name, "--run", "r", "--question", question, "--set", "a.answer=approve"]
    done = subprocess.run(
        [sys.executable, "-c", OLDER_MKL, *args, "--script", "twogates.script.json"],
        cwd=person.folder,
        env={**env_without_models(), **person.env},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode in (0, 3), done.stdout + done.stderr
    [carried] = [run for run in nbfile.embedded_runs(person.notebook) if run.run_id == "r"]
    assert _replies(carried.records) == [("approve", os_account())]


def test_bobs_answer_in_his_copy_is_refused_on_the_way_back_on_every_road(
    team: tuple[Person, Person, Person],
) -> None:
    alice, bob, _ = team
    _answers_with_an_older_mkl(bob)
    alice.receive(bob)
    held = alice.store().read("r")

    # mkl resume NOTEBOOK: refused in one line saying who answered and who may; nothing is taken up
    for trust_file in ((), ("--trust-file",)):
        code, _, out, err = alice.mkl("resume", alice.notebook.name, "--run", "r", *trust_file)
        assert code == 2, out + err
        [line] = err.strip().splitlines()
        assert "is not taken up" in line and "only carol may answer it" in line, line
        assert f"by {os_account()} (OS account)" in line and "the key you trust as 'bob'" in line, line
        assert "--trust-file does not take it up" in line, line
    assert alice.store().read("r") == held

    # mkl runs NOTEBOOK: the file's run is marked refused, with no command that would answer it
    code, listing, out, err = alice.mkl("runs", alice.notebook.name)
    assert code == 0, err
    [listed] = listing["runs"]
    assert "only carol may answer it" in listed["refused"] and "command" not in listed, listed
    assert "REFUSED:" in out and "only carol may answer it" in out, out
    code, under, out, err = alice.mkl("runs", ".")  # every question waiting under the folder: not that one
    assert code == 0 and "flow.ipynb: r REFUSED" in out, out + err
    assert [kept["run"] for kept in under["refused"]] == ["r"], under

    # mkl audit NOTEBOOK: Bob's answer is marked, never shown as accepted
    code, _, out, err = alice.mkl("audit", alice.notebook.name, "--json")
    assert code in (0, 1), err
    [row] = [row for row in json.loads(out) if row["value"] == "approve"]
    assert row["accepted_under"] == "not accepted" and "only carol may answer it" in row["problem"], row

    # A kernel's Run All: the file's run is shown refused, the store still waits at gate A, the file keeps Bob's
    ran = run_all(alice.notebook, env=alice.env)
    text = _texts(ran)
    assert "REFUSED: run r" in text and "only carol may answer it" in text, text
    assert alice.store().read("r") == held and _replies(held) == []
    assert any(_replies(run.records) == [("approve", os_account())] for run in nbfile.embedded_runs(alice.notebook)), (
        "the file no longer holds Bob's answer"
    )


def test_carols_answer_in_her_copy_is_taken_up_and_the_run_goes_on(team: tuple[Person, Person, Person]) -> None:
    alice, _, carol = team
    question = carol.question()
    nb = nbformat.read(carol.notebook, as_version=4)
    nb.cells += _cells(f"%mkl resume r --question {question} --set a.answer=approve --script twogates.script.json")
    nbformat.write(nb, carol.notebook)
    assert GATE_B in _texts(run_all(carol.notebook, env=carol.env))  # her kernel: the hub's user, established
    alice.receive(carol)

    ran = run_all(alice.notebook, env=alice.env)
    text = _texts(ran)
    assert GATE_B in text and "REFUSED" not in text and "NOT TRUSTED" not in text, text
    held = alice.store().read("r")
    assert _replies(held) == [("approve", "carol")]
    code, _, out, err = alice.mkl("audit", "--store", str(alice.folder / ".mkl" / "runs.sqlite"), "--json")
    assert code == 0, err
    [row] = json.loads(out)
    assert (row["by"], row["established"], row["accepted_under"], row["problem"]) == (
        "carol",
        "jupyterhub",
        "approvers: carol",
        None,
    ), row


def test_carols_answer_counts_by_the_name_alice_trusts_her_key_under(team: tuple[Person, Person, Person]) -> None:
    """Carol's answer from the command line establishes only the OS account everyone shares; the key that signed
    it, which Alice trusts as carol's, is what lets it stand."""
    alice, _, carol = team
    _answers_with_an_older_mkl(carol)
    alice.receive(carol)
    code, status, out, err = alice.mkl("resume", alice.notebook.name, "--run", "r", "--script", "twogates.script.json")
    assert code == 3 and status["ask"] == GATE_B, out + err
    assert _replies(alice.store().read("r")) == [("approve", os_account())]
