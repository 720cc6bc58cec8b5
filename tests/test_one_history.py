"""A run has one history wherever its notebook goes: copies that extend it are taken up, copies that part
are both kept, and every answer is signed by whoever gave it.

Two people, two Jupyter data folders (each with their own signing key) and two folders (each with its own
run store): Alice runs a notebook whose run waits at gate A and sends the file to Bob; Bob answers gate A;
the file comes back. Executed headless as JupyterLab would (nbclient, the kernel knowing its path).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import nbformat
import pytest
from lab_client import run_all

from mkl_notebook.app.replies import os_account
from mkl_notebook.checkpoints import notebook_file as nbfile
from mkl_notebook.checkpoints.seals import key_fingerprint, signatures
from mkl_notebook.durable.stores import SQLiteStore

from support import mkl_cli

TWO_GATES = """\
mklang: "0.4"
machine: twogates
entry: draft
budget: 10
result: final
states:
  draft:
    structure: A short reply.
    prompt: "Write the reply"
    output: draft
    gates:
      - { when: the draft is ready, escalate: true, to: review, ask: "Gate A: approve the draft?", reply_to: a.answer }
      - { when: otherwise, then: ok, to: review }
  review:
    structure: The reviewed reply.
    prompt: "Review {{draft}} given {{a.answer}}"
    output: reviewed
    gates:
      - { when: the review is ready, escalate: true, to: send, ask: "Gate B: send it?", reply_to: b.answer }
      - { when: otherwise, then: ok, to: send }
  send:
    structure: Final.
    prompt: "Send out {{reviewed}} after {{b.answer}}"
    output: final
    gates:
      - { when: otherwise, then: ok, to: END }
"""
SCRIPT = {
    "llm": {
        "produce": {"Write the reply": "Dear customer.", "Review": "Reviewed.", "Send out": "Sent."},
        "judge": [0],
    }
}
GATE_A = "Gate A: approve the draft?"
ACCOUNT = os_account()  # who answers on the command line, as the operating system establishes it
GATE_B = "Gate B: send it?"
FORM_MIME = nbfile.FORM_MIME
RUN_MIME = "application/vnd.mkl.run+json"


class Person:
    """Someone with their own Jupyter data folder (their key) and their own folder (their run store)."""

    def __init__(self, root: Path, name: str) -> None:
        self.name = name
        self.data = root / f"{name}-jupyter"
        self.folder = root / name
        self.folder.mkdir(parents=True)
        (self.folder / "twogates.script.json").write_text(json.dumps(SCRIPT), encoding="utf-8")
        self.env = {"JUPYTER_DATA_DIR": str(self.data), "JUPYTERHUB_USER": name}

    @property
    def notebook(self) -> Path:
        return self.folder / "flow.ipynb"

    def mkl(self, *args: str) -> tuple[int, dict[str, Any], str, str]:
        return mkl_cli(self.folder, *args, env=self.env)

    def key(self) -> str:
        code, _, out, err = self.mkl("trust")
        assert code == 0, err
        return out.split()[6]  # "your key: xxxx xxxx xxxx xxxx  ed25519:…"

    def trusts(self, other: Person) -> None:
        code, _, _, err = self.mkl("trust", other.key(), "--name", other.name)
        assert code == 0, err

    def run_all(self) -> nbformat.NotebookNode:
        return run_all(self.notebook, env=self.env)

    def store(self) -> SQLiteStore:
        return SQLiteStore(self.folder / ".mkl" / "runs.sqlite")

    def receive(self, sender: Person) -> None:
        shutil.copy(sender.notebook, self.notebook)

    def answer(self, gate: str, value: str) -> dict[str, Any]:
        """Answer the question the notebook file's run waits on, from the command line."""
        code, listing, _, err = self.mkl("runs", self.notebook.name)
        assert code == 0, err
        [listed] = listing["runs"]
        question = listed["question_id"]
        code, status, _, err = self.mkl(
            "resume", self.notebook.name, "--run", "r", "--question", question,
            "--set", f"{gate}.answer={value}", "--script", "twogates.script.json",
        )  # fmt: skip
        assert code in (0, 3), err
        return status


def _notebook(path: Path) -> None:
    cells = [
        nbformat.v4.new_code_cell("%load_ext mkl_notebook"),
        nbformat.v4.new_code_cell("%%mkl\n" + TWO_GATES),
        nbformat.v4.new_code_cell("%mkl run twogates --id r --hitl --script twogates.script.json"),
    ]
    nbformat.write(nbformat.v4.new_notebook(cells=cells), path)


def _texts(nb: Any) -> str:
    return "\n".join(
        "".join(output.get("text", "")) + "".join(output.get("data", {}).get("text/plain", ""))
        for cell in nb.cells
        for output in cell.get("outputs", [])
    )


def _forms(nb: Any) -> list[dict[str, Any]]:
    return [o["data"][FORM_MIME] for c in nb.cells for o in c.get("outputs", []) if FORM_MIME in o.get("data", {})]


def _carried(nb: Any) -> list[dict[str, Any]]:
    """The checkpoints the notebook's outputs carry (where no extension keeps them in its metadata)."""
    return [o["data"][RUN_MIME] for c in nb.cells for o in c.get("outputs", []) if RUN_MIME in o.get("data", {})]


def _answers(records: list[dict[str, Any]]) -> list[str]:
    return [json.dumps(record, sort_keys=True) for record in records if record["t"] == "answer"]


@pytest.fixture
def returned(tmp_path: Path) -> tuple[Person, Person]:
    """Alice's run waits at gate A; Bob, who trusts her key, answers it in his copy of her file; the file comes
    back to Alice, whose store still holds the run waiting at gate A."""
    alice, bob = Person(tmp_path, "alice"), Person(tmp_path, "bob")
    _notebook(alice.notebook)
    ran = alice.run_all()
    assert GATE_A in _texts(ran) and len(_forms(ran)) == 1
    bob.receive(alice)
    bob.trusts(alice)
    assert bob.answer("a", "approve")["ask"] == GATE_B
    alice.receive(bob)
    return alice, bob


def test_alice_takes_up_bobs_answer_once_she_trusts_his_key_and_is_asked_gate_b(
    returned: tuple[Person, Person],
) -> None:
    alice, bob = returned
    [carried] = nbfile.embedded_runs(alice.notebook)
    assert [s.seal.by if s.seal else None for s in signatures(carried.records)] == ["alice", "bob"]
    alice.trusts(bob)

    ran = alice.run_all()
    text = _texts(ran)
    assert GATE_B in text and "NOT TRUSTED" not in text
    [form] = _forms(ran)  # one question is asked, and it is gate B's
    held = alice.store().read("r")
    assert [r["value"] for r in held if r["t"] == "reply"] == ["approve"]
    # bob answered on the command line: his OS account is what is established (JUPYTERHUB_USER is a kernel's)
    assert [(r.get("by"), r.get("established")) for r in held if r["t"] == "reply"] == [(ACCOUNT, "os-account")]
    assert form["question_id"] and GATE_A not in json.dumps(form)
    assert _answers(held) == _answers(carried.records)  # taken up with no call: every answer is the file's
    assert held == nbfile.find_run(alice.notebook, "r").records  # the file and the store hold one history


@pytest.mark.parametrize("where", ["metadata and outputs", "outputs only"])
def test_bobs_answer_signed_by_a_key_alice_does_not_know_is_shown_not_used(
    returned: tuple[Person, Person], where: str
) -> None:
    alice, bob = returned
    before = alice.store().read("r")
    saved = nbformat.read(alice.notebook, as_version=4)
    if where == "outputs only":  # as a tool that drops custom metadata leaves it: the outputs hold the only copy
        del saved.metadata["mkl"]
    saved.cells.append(nbformat.v4.new_code_cell("%mkl pending"))  # what waits for Alice? Not gate A.
    nbformat.write(saved, alice.notebook)

    ran = alice.run_all()
    text = _texts(ran)
    past = "NOT TRUSTED: run r in flow.ipynb goes on past the copy you hold"
    assert f"{past} (answered 'approve' by '{ACCOUNT} (OS account)')" in text
    fingerprint = key_fingerprint(bob.key()).replace(" ", "")
    assert f"mkl trust flow.ipynb --key {fingerprint} --name bob" in text  # the one step that trusts him
    assert text.count("goes on past the copy you hold") == 2  # the run cell, and %mkl pending
    assert _forms(ran) == []  # gate A is not asked again: no live form anywhere
    assert alice.store().read("r") == before  # nothing of Bob's was taken, nothing ran
    carried = nbfile.find_run(alice.notebook, "r")  # and the file still carries Bob's answer
    assert [r["value"] for r in carried.records if r["t"] == "reply"] == ["approve"]

    alice.trusts(bob)  # the step the view named: the next Run All takes it up
    assert GATE_B in _texts(alice.run_all())
    assert [r["value"] for r in alice.store().read("r") if r["t"] == "reply"] == ["approve"]


def test_a_history_nobody_changed_is_written_byte_for_byte_by_whoever_runs_it(returned: tuple[Person, Person]) -> None:
    alice, bob = returned
    alice.trusts(bob)
    first = _carried(alice.run_all())
    assert first and all("seal" not in checkpoint for checkpoint in first)  # no seal of the writer's own
    bob.receive(alice)
    bob.trusts(alice)
    again = _carried(bob.run_all())  # Bob's Restart & Run All of the run as Alice left it: nothing changes
    assert json.dumps(again) == json.dumps(first)  # signatures and all, as Alice wrote them


def test_two_people_answering_gate_a_differently_keep_both_histories(tmp_path: Path) -> None:
    alice, bob = Person(tmp_path, "alice"), Person(tmp_path, "bob")
    _notebook(alice.notebook)
    alice.run_all()
    bob.receive(alice)
    bob.trusts(alice)
    alice.trusts(bob)
    assert alice.answer("a", "approve")["ask"] == GATE_B  # in her own copy
    assert bob.answer("a", "reject")["ask"] == GATE_B  # in his

    shutil.copy(bob.notebook, alice.folder / "from-bob.ipynb")
    code, _, _, err = alice.mkl("resume", "from-bob.ipynb", "--run", "r", "--reply", "x")
    assert code == 2 and err.count("\n") == 1, err
    assert "holds another history of run 'r', which parts from this one after record" in err
    assert f"answered 'reject' by '{ACCOUNT} (OS account)'" in err and "Nothing was resumed" in err
    branch = err.split("Both are kept: that one as run '")[1].split("'")[0]
    assert branch.startswith("r:bob-")
    mine, theirs = alice.store().read("r"), alice.store().read(branch)
    assert [r["value"] for r in mine if r["t"] == "reply"] == ["approve"]
    assert [r["value"] for r in theirs if r["t"] == "reply"] == ["reject"]
    assert theirs == nbfile.find_run(alice.folder / "from-bob.ipynb", "r").records  # as Bob's file has it

    code, listing, _, err = alice.mkl("runs")
    assert code == 0, err
    assert {run["run"] for run in listing["runs"]} >= {"r", branch}  # listed side by side
    for run_id in ("r", branch):  # and each goes on
        code, status, _, err = alice.mkl(
            "resume", "--id", run_id, "--set", "b.answer=yes", "--question",
            _question(alice, run_id), "--script", "twogates.script.json",
        )  # fmt: skip
        assert (code, status["status"]) == (0, "done"), err


def _question(person: Person, run_id: str) -> str:
    code, listing, _, err = person.mkl("runs")
    assert code == 0, err
    return str(next(run["question_id"] for run in listing["runs"] if run["run"] == run_id))


def _nbconvert_inplace(person: Person) -> nbformat.NotebookNode:
    """``jupyter nbconvert --to notebook --execute --inplace``, as a person types it in their folder: the client
    names neither the notebook nor its cells to the kernel."""
    command = [sys.executable, "-m", "jupyter", "nbconvert", "--to", "notebook", "--execute", "--inplace"]
    completed = subprocess.run(
        [*command, person.notebook.name],
        cwd=person.folder,
        env={**os.environ, **person.env},
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    assert completed.returncode == 0, completed.stderr
    return nbformat.read(person.notebook, as_version=4)


def test_nbconvert_inplace_twice_without_the_store_takes_the_run_up_and_it_goes_on(tmp_path: Path) -> None:
    alice = Person(tmp_path, "alice")
    _notebook(alice.notebook)
    assert GATE_A in _texts(_nbconvert_inplace(alice))
    assert alice.answer("a", "approve")["ask"] == GATE_B  # written into the file's metadata and outputs
    carried = nbfile.find_run(alice.notebook, "r")
    shutil.rmtree(alice.folder / ".mkl")  # another machine, or a clean checkout: no run store

    ran = _nbconvert_inplace(alice)
    assert GATE_B in _texts(ran)
    held = alice.store().read("r")
    assert held == carried.records  # taken up as the file had it: no call made, nothing re-run
    code, listing, out, err = alice.mkl("runs", alice.notebook.name)
    assert code == 0 and "damaged" not in out, out + err
    [listed] = listing["runs"]
    assert listed["ask"] == GATE_B
    assert _texts(_nbconvert_inplace(alice)) == _texts(ran)  # and again: the same

    done = alice.answer("b", "yes")
    assert done["status"] == "done" and done["calls"]["replayed"] >= 2


def _git(folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    who = ["-c", "user.name=someone", "-c", "user.email=someone@example.org", "-c", "init.defaultBranch=main"]
    return subprocess.run(["git", *who, *args], cwd=folder, capture_output=True, text=True, check=False)


def test_two_people_approving_different_runs_merge_with_nbdime_and_both_go_on(tmp_path: Path) -> None:
    alice, bob = Person(tmp_path, "alice"), Person(tmp_path, "bob")
    cells = [
        nbformat.v4.new_code_cell("%load_ext mkl_notebook"),
        nbformat.v4.new_code_cell("%%mkl\n" + TWO_GATES),
        nbformat.v4.new_code_cell("%mkl run twogates --id r1 --hitl --script twogates.script.json"),
        nbformat.v4.new_code_cell("%mkl run twogates --id r2 --hitl --script twogates.script.json"),
    ]
    nbformat.write(nbformat.v4.new_notebook(cells=cells), alice.notebook)
    ran = alice.run_all()
    # Saved as JupyterLab saves it with the mkl-notebook extension: the metadata keeps each run's checkpoint.
    ran.metadata["mkl"] = {"runs": {run.run_id: run.raw for run in nbfile.embedded_runs(alice.notebook)}}
    nbformat.write(ran, alice.notebook)
    assert _git(alice.folder, "init").returncode == 0
    _git(alice.folder, "add", "flow.ipynb", "twogates.script.json")
    assert _git(alice.folder, "commit", "-m", "two runs wait").returncode == 0
    shutil.rmtree(bob.folder)
    assert _git(tmp_path, "clone", str(alice.folder), str(bob.folder)).returncode == 0
    bob.trusts(alice)
    alice.trusts(bob)

    for person, run_id, value in ((alice, "r1", "approve"), (bob, "r2", "approve too")):
        code, status, _, err = person.mkl(
            "resume", "flow.ipynb", "--run", run_id, "--question", _waiting(person, run_id),
            "--set", f"a.answer={value}", "--script", "twogates.script.json",
        )  # fmt: skip
        assert code == 3 and status["ask"] == GATE_B, err
        assert _git(person.folder, "commit", "-am", f"{person.name} answers {run_id}").returncode == 0

    driver = f"{Path(sys.executable).parent / 'git-nbmergedriver'} merge %O %A %B %L %P"
    _git(alice.folder, "config", "merge.jupyternotebook.driver", driver)
    (alice.folder / ".git" / "info" / "attributes").write_text("*.ipynb merge=jupyternotebook\n", encoding="utf-8")
    merged = _git(alice.folder, "pull", "--no-rebase", "--no-edit", str(bob.folder), "main")
    assert merged.returncode == 0, merged.stdout + merged.stderr
    text = alice.notebook.read_text(encoding="utf-8")
    assert "<<<<<<<" not in text and ">>>>>>>" not in text
    nbformat.validate(nbformat.reads(text, as_version=4))
    runs, damaged = nbfile.scan(alice.notebook)
    assert damaged == [] and sorted(run.run_id for run in runs) == ["r1", "r2"]
    replies = {run.run_id: [r["value"] for r in run.records if r["t"] == "reply"] for run in runs}
    assert replies == {"r1": ["approve"], "r2": ["approve too"]}  # each person's answer, both in one file
    signed = {run.run_id: [s.seal.by for s in signatures(run.records) if s.seal and s.seal.holds] for run in runs}
    assert signed == {"r1": ["alice", "alice"], "r2": ["alice", "bob"]}  # and each still verifies as theirs

    for run_id in ("r1", "r2"):  # both go on
        code, status, _, err = alice.mkl(
            "resume", "flow.ipynb", "--run", run_id, "--question", _waiting(alice, run_id),
            "--set", "b.answer=yes", "--script", "twogates.script.json",
        )  # fmt: skip
        assert (code, status["status"]) == (0, "done"), err


def _waiting(person: Person, run_id: str) -> str:
    code, listing, _, err = person.mkl("runs", person.notebook.name)
    assert code == 0, err
    return str(next(run["question_id"] for run in listing["runs"] if run["run"] == run_id))


def test_a_notebook_whose_copy_parts_from_the_kernels_run_shows_both_and_carries_both(tmp_path: Path) -> None:
    alice, bob = Person(tmp_path, "alice"), Person(tmp_path, "bob")
    _notebook(alice.notebook)
    alice.run_all()
    bob.receive(alice)
    bob.trusts(alice)
    alice.trusts(bob)
    assert bob.answer("a", "reject")["ask"] == GATE_B  # Bob's answer, in his copy
    code, _, _, err = alice.mkl(  # Alice's, to the same question, in her store only
        "resume", "--id", "r", "--question", _question(alice, "r"), "--set", "a.answer=approve",
        "--script", "twogates.script.json",
    )  # fmt: skip
    assert code == 3, err
    alice.receive(bob)  # Bob's file comes back over hers

    text = _texts(alice.run_all())
    assert "flow.ipynb holds another history of run 'r', which parts from this one after record" in text
    branch = text.split("Both are kept: that one as run '")[1].split("'")[0]
    assert branch.startswith("r:bob-")
    assert [r["value"] for r in alice.store().read("r") if r["t"] == "reply"] == ["approve"]  # hers goes on
    assert [r["value"] for r in alice.store().read(branch) if r["t"] == "reply"] == ["reject"]  # his is kept
    carried = {run.run_id: run for run in nbfile.embedded_runs(alice.notebook)}
    assert set(carried) >= {"r", branch}  # and the saved file carries both
    assert [r["value"] for r in carried[branch].records if r["t"] == "reply"] == ["reject"]


def test_a_run_nobody_changed_renders_the_same_for_every_reader(returned: tuple[Person, Person]) -> None:
    """Alice and Bob each run the returned notebook (each trusting the other): the run cell shows the same thing
    byte for byte, whoever renders it; what the history says of who asked the question Bob's answer brought is
    a fact of the history (signed as, by key), not the reader's judgement of it. (Outputs that differed by
    reader made every merge of two people's runs conflict.)"""
    alice, bob = returned
    alice.trusts(bob)  # (Bob trusts Alice already)
    mine = alice.run_all()
    bob.receive(alice)
    theirs = bob.run_all()
    run_cell = next(index for index, cell in enumerate(mine.cells) if "--id r" in cell.source)
    assert json.dumps(mine.cells[run_cell].outputs, sort_keys=True) == json.dumps(
        theirs.cells[run_cell].outputs, sort_keys=True
    )
    assert "signed as " in _texts(mine) and "trusted key" not in _texts(mine)
