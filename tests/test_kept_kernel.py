"""Sharing the way two people really share: Alice's kernel keeps running while she waits for the approver, both
people are the same OS account (as every ``jovyan`` is), and only the .ipynb travels (no script, no model on
Bob's side).

Executed headless as JupyterLab would (each cell named to the kernel, the kernel knowing its notebook), with
Alice's one kernel kept alive across her Run Alls; Bob's notebook runs in a kernel of his own.
"""

from __future__ import annotations

import json
import shlex
import shutil
from pathlib import Path
from typing import Any

import nbformat
import pytest
from lab_client import KeptKernel, run_all
from test_one_history import ACCOUNT, GATE_A, GATE_B, Person, _forms, _notebook, _texts

from mkl_notebook.checkpoints import notebook_file as nbfile
from mkl_notebook.checkpoints.seals import key_fingerprint


def _same_account(root: Path, name: str) -> Person:
    """Someone with their own Jupyter data folder and folder, known to the OS by the account everyone shares."""
    person = Person(root, name)
    del person.env["JUPYTERHUB_USER"]  # no hub: the name a kernel or `mkl` signs with is the OS account's
    return person


@pytest.fixture
def pair(tmp_path: Path) -> tuple[Person, Person]:
    alice, bob = _same_account(tmp_path, "alice"), _same_account(tmp_path, "bob")
    (bob.folder / "twogates.script.json").unlink()  # only the .ipynb travels: Bob has no script, and no model
    _notebook(alice.notebook)
    return alice, bob


def _question(person: Person) -> str:
    code, listing, _, err = person.mkl("runs", person.notebook.name)
    assert code == 0, err
    [listed] = listing["runs"]
    return str(listed["question_id"])


def _errors(nb: Any) -> list[str]:
    return [
        f"{output.get('ename')}: {output.get('evalue')}"
        for cell in nb.cells
        for output in cell.get("outputs", [])
        if output.get("output_type") == "error"
    ]


def test_bob_answers_with_the_ipynb_alone_and_alices_running_kernel_takes_his_answer_up(
    pair: tuple[Person, Person],
) -> None:
    alice, bob = pair
    with KeptKernel(alice.notebook, alice.env) as kernel:
        ran = kernel.run_all()
        assert GATE_A in _texts(ran) and len(_forms(ran)) == 1
        alice.trusts(bob)  # she knows Bob's key (he gave it to her), under the name she knows him by

        bob.receive(alice)  # the .ipynb alone
        ran = run_all(bob.notebook, env=bob.env, allow_errors=True)
        assert _errors(ran) == []  # no "--script … cannot be read": showing a run replays, it calls nothing
        assert GATE_A in _texts(ran)
        code, _, _, err = bob.mkl("trust", bob.notebook.name, "--name", "alice")  # the one key it holds
        assert code == 0, err
        code, status, _, err = bob.mkl(
            "resume", bob.notebook.name, "--run", "r", "--question", _question(bob), "--reply", "approve"
        )
        assert code == 3, err  # answered: the run goes on where a model is (or the script), Alice's kernel
        assert status["error"].startswith("no model is configured"), status  # Bob has none: Alice goes on
        assert [answer["value"] for answer in status["answers"]] == ["approve"]

        shutil.copy(bob.notebook, alice.notebook)  # the file comes back over hers; her kernel still runs
        ran = kernel.run_all()
        text = _texts(ran)
        assert GATE_B in text, text
        [form] = _forms(ran)  # one question is asked, gate B's: never gate A's again
        assert GATE_A not in json.dumps(form)
        held = alice.store().read("r")
        assert [r["value"] for r in held if r["t"] == "reply"] == ["approve"]  # Bob's answer, taken up

        pending = kernel.execute(
            "import mkl_notebook.notebook.session as s\n"
            "waiting, untrusted = s.current_session().waiting()\n"
            "print([run.pending['ask'] for run in waiting], untrusted)"
        )
        assert pending.strip() == f"[{GATE_B!r}] []", pending

        said = kernel.execute(
            "import mkl_notebook.notebook.session as s\nprint(s.current_session().runs['r'].submit('yes').status)"
        )
        assert said.strip() == "done", said
        kernel.run_all()  # saved again

    code, listing, out, err = alice.mkl("runs", alice.notebook.name)
    assert code == 0, err
    assert "(trusted as bob)" in out  # whose key signed Bob's answer, as Alice knows it
    [listed] = listing["runs"]
    assert listed["status"] == "done" and "stale" not in listed
    assert [(answer["value"], answer["trusted_as"]) for answer in listed["answers"]] == [
        ("approve", "bob"),
        ("yes", "you"),
    ]
    assert nbfile.find_run(alice.notebook, "r").records == alice.store().read("r")  # one history
    nbformat.validate(nbformat.read(alice.notebook, as_version=4))
    code, _, out, err = alice.mkl("audit", alice.notebook.name, "--json")
    assert code == 0, err
    rows = json.loads(out)
    # Both answered as the one OS account; what tells them apart is whose key signed each, as Alice knows it
    assert [(row["value"], row["by"], row["trusted_as"]) for row in rows] == [
        ("approve", ACCOUNT, "bob"),
        ("yes", ACCOUNT, "you"),
    ]
    code, _, out, err = alice.mkl("audit", alice.notebook.name)
    assert code == 0 and "trusted as bob" in out and "trusted as you" in out, out + err


def test_the_trust_step_offered_to_someone_of_the_same_account_works_as_printed(pair: tuple[Person, Person]) -> None:
    """Both people sign as the one OS account's name: the step offered names a name free for Alice (not her own),
    and pasted as printed it trusts Bob's key, after which his answer is taken up."""
    alice, bob = pair
    with KeptKernel(alice.notebook, alice.env) as kernel:
        kernel.run_all()
        bob.receive(alice)
        bob.mkl("trust", bob.notebook.name, "--name", "alice")
        code, _, _, err = bob.mkl(
            "resume", bob.notebook.name, "--run", "r", "--question", _question(bob), "--reply", "approve"
        )
        assert code == 3, err
        shutil.copy(bob.notebook, alice.notebook)
        text = _texts(kernel.run_all())
        assert "NOT TRUSTED" in text and _forms(nbformat.read(alice.notebook, as_version=4)) == []
        [offered] = {line.strip().strip("`") for line in text.splitlines() if line.strip().startswith("mkl trust ")}
        fingerprint = key_fingerprint(bob.key()).replace(" ", "")
        assert offered == f"mkl trust flow.ipynb --key {fingerprint} --name {ACCOUNT}-{fingerprint[:4]}", offered
        code, _, _, err = alice.mkl(*shlex.split(offered)[1:])
        assert code == 0, err  # pasted as printed, it works
        assert GATE_B in _texts(kernel.run_all())  # and the next Run All takes his answer up


CLICK = """
import mkl_notebook.notebook.session as s
session = s.current_session()
run = session.runs["r"]
try:
    session.answer(run, "approve", run.question_id, form_of="clicked")
    print("ANSWERED", run.status)
except Exception as problem:
    print(type(problem).__name__, problem)
"""


@pytest.mark.parametrize("trusted", [True, False], ids=["bob trusted", "bob not trusted"])
def test_a_click_on_a_form_whose_question_was_answered_in_the_file_records_nothing(
    pair: tuple[Person, Person], trusted: bool
) -> None:
    """Alice's form for gate A is still drawn when the file comes back answered by Bob: her click is not a second
    answer to that question. Trusted, his answer is taken up and the form says who answered; not trusted, the
    click is refused, since going on from her older copy would fork the run."""
    alice, bob = pair
    shutil.copy(alice.folder / "twogates.script.json", bob.folder / "twogates.script.json")
    with KeptKernel(alice.notebook, alice.env) as kernel:
        kernel.run_all()
        if trusted:
            alice.trusts(bob)
        bob.receive(alice)
        bob.mkl("trust", bob.notebook.name, "--name", "alice")
        assert bob.answer("a", "reject")["ask"] == GATE_B
        shutil.copy(bob.notebook, alice.notebook)  # back, while her form for gate A is still drawn

        said = kernel.execute(CLICK)
        held = alice.store().read("r")
        if trusted:
            assert said.startswith("Superseded Answered 'reject'"), said
            assert [r["value"] for r in held if r["t"] == "reply"] == ["reject"]  # Bob's, and only his
        else:
            assert said.startswith("UsageProblem flow.ipynb: run 'r' goes on past the copy you hold"), said
            assert "nothing was recorded here" in said
            assert [r for r in held if r["t"] == "reply"] == []
