"""A signature proves who, not when: an older signed copy put back is recognised as stale where the newer is in reach.

Alice answers gate A of her run ("reject"); Bob, who trusts her key, runs her notebook, so his store holds
her answer. Then the older copy of the file, still waiting at gate A and signed by Alice just as well, is
put back (an old attachment, a restore). Bob must not be shown it as a current question: listing it says it
is stale and what the newer history holds, and gives no command; an answer to its question is refused; his
kernel shows the history as his store has it. Real components: two people as two Jupyter data folders, the
``mkl`` command, kernels driven by nbclient.
"""

from __future__ import annotations

from pathlib import Path

import test_one_history as one


def test_an_older_signed_copy_put_back_is_listed_stale_and_cannot_be_answered(tmp_path: Path) -> None:
    alice, bob = one.Person(tmp_path, "alice"), one.Person(tmp_path, "bob")
    one._notebook(alice.notebook)
    alice.run_all()
    older = alice.notebook.read_bytes()  # waiting at gate A, signed by Alice
    code, listing, _, err = alice.mkl("runs", alice.notebook.name)
    assert code == 0, err
    question = listing["runs"][0]["question_id"]
    assert alice.answer("a", "reject")["ask"] == one.GATE_B  # her answer, written back into her file

    bob.receive(alice)
    bob.trusts(alice)
    bob.run_all()  # Bob's store takes up Alice's history, her answer included
    bob.notebook.write_bytes(older)  # the older copy comes back

    code, listing, out, err = bob.mkl("runs", bob.notebook.name)
    assert code == 0, err
    [listed] = listing["runs"]
    assert "stale" in listed and f"'reject' by '{one.ACCOUNT} (OS account)'" in listed["stale"], listed
    assert "command" not in listed and "question_id" not in listed  # not answerable as a current question
    assert "STALE" in out and "asked " in out  # the printed listing says so, and when the question was asked

    code, listing, out, err = bob.mkl("runs", ".")  # the folder's waiting questions: not this one
    assert code == 0, err
    assert not [q for q in listing.get("questions", []) if q.get("question_id") == question], listing

    replies = [r for r in bob.store().read("r") if r["t"] == "reply"]
    code, _, _, err = bob.mkl(
        "resume", bob.notebook.name, "--run", "r", "--question", question, "--set", "a.answer=approve",
        "--script", "twogates.script.json",
    )  # fmt: skip
    assert code == 2 and err.count("\n") == 1, err
    assert [r for r in bob.store().read("r") if r["t"] == "reply"] == replies  # nothing was answered

    texts = one._texts(bob.run_all())  # Bob's kernel shows the run as his store holds it: at gate B
    assert one.GATE_B in texts and not [f for f in one._forms(bob.run_all()) if f.get("question_id") == question]


def test_an_older_copy_of_a_run_the_store_forgot_is_refused_naming_both(tmp_path: Path) -> None:
    """Alice answers gate A ("reject"), then forgets the run in her kernel: her store no longer holds it. The
    older copy of the file, waiting at gate A and signed by her, comes back (an attachment, a restore). Her store
    remembers the history it forgot, so the old question is not answerable again: listing says the copy is older
    than what the store forgot, and an answer to it is refused in one line naming the file and that history."""
    from lab_client import KeptKernel, run_all

    alice = one.Person(tmp_path, "alice")
    one._notebook(alice.notebook)
    alice.run_all()
    older = alice.notebook.read_bytes()
    code, listing, _, err = alice.mkl("runs", alice.notebook.name)
    assert code == 0, err
    question = listing["runs"][0]["question_id"]
    assert alice.answer("a", "reject")["ask"] == one.GATE_B

    kernel = KeptKernel(alice.notebook, env=alice.env)
    try:
        said = kernel.execute("%load_ext mkl_notebook\n%mkl forget r")
    finally:
        kernel.km.shutdown_kernel(now=True)
    assert "Traceback" not in said, said
    assert not alice.store().exists("r")
    alice.notebook.write_bytes(older)

    code, listing, out, err = alice.mkl("runs", alice.notebook.name)
    assert code == 0, err
    [listed] = listing["runs"]
    assert "forgot" in listed.get("stale", ""), listed
    assert "command" not in listed and "question_id" not in listed
    assert "STALE" in out

    code, _, _, err = alice.mkl(
        "resume", alice.notebook.name, "--run", "r", "--question", question, "--set", "a.answer=approve",
        "--script", "twogates.script.json",
    )  # fmt: skip
    assert code == 2 and err.count("\n") == 1, err
    assert alice.notebook.name in err and "forgot" in err, err
    assert not alice.store().exists("r")  # nothing was taken up, nothing answered

    texts = one._texts(run_all(alice.notebook, env=alice.env, allow_errors=True))  # nor her kernel, restarted
    assert "forgot" in texts and one.GATE_A not in texts, texts
