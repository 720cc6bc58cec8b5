"""Checkpoints say who made them: a seal (Ed25519) over the digest, judged against the keys this person trusts.

Alice runs the refund machine and shares its checkpoint; Bob takes it up. A digest anyone can recompute
says only that a file is intact, so a forger who edits the question and recomputes it must still be
caught: the seal no longer holds, and the forged question is never shown as the author's without a
mark, nor resumed without an explicit choice (``--trust-file``, or a button in the notebook).
"""

from __future__ import annotations

import base64
import copy
import html
import json
import os
import re
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import nbformat
import pexpect
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from IPython.core.error import UsageError
from IPython.core.interactiveshell import InteractiveShell

import mkl_notebook
from mkl_notebook.app.trust import Keyring, Untrusted, key_fingerprint
from mkl_notebook.checkpoints import envelope
from mkl_notebook.checkpoints.seals import Signer, signatures
from mkl_notebook.notebook.display import RunView
from mkl_notebook.notebook.forms import QuestionForm, TakeUpChoice

from support import REFUND, REFUND_ASK, REFUND_SCRIPT, RUN_MIME, env_without_models, mkl_cli, store_rows

FORGED_ASK = "Approve a 5 EUR goodwill voucher?"


def mkl(folder: Path, person: Path, *args: str) -> tuple[int, dict[str, Any], str, str]:
    """``mkl ARGS`` in ``folder`` as the person whose Jupyter data folder is ``person``."""
    return mkl_cli(folder, *args, env={"JUPYTER_DATA_DIR": str(person), "JUPYTERHUB_USER": person.name})


@pytest.fixture
def people(tmp_path: Path) -> tuple[Path, Path, Path]:
    """A shared folder, Alice's and Bob's own Jupyter data folders; Alice's run waits for approval in cp.json."""
    folder, alice, bob = tmp_path / "shared", tmp_path / "alice", tmp_path / "bob"
    folder.mkdir()
    (folder / "refund.mkl").write_text(REFUND, encoding="utf-8")
    run = ["run", "refund.mkl", "--id", "r", "--hitl", "--script", str(REFUND_SCRIPT), "--set", "ticket=broken"]
    code, status, _, err = mkl(folder, alice, *run, "--store", "alice.sqlite", "--checkpoint", "cp.json")
    assert (code, status.get("ask")) == (3, REFUND_ASK), err
    return folder, alice, bob


def _forge(path: Path, ask: str, *, signer: Signer | str | None = "keep") -> None:
    """Edit the question in a checkpoint and recompute its digest, as anyone can; keep its signatures (which
    no longer hold), drop them, or sign the forged history with ``signer``'s key."""
    data = json.loads(path.read_text(encoding="utf-8"))
    header, records, _ = envelope.verify_checkpoint(data)
    header = dict(header, ask=ask)
    records = copy.deepcopy(records)
    for record in records:
        if record.get("ask") == REFUND_ASK:
            record["ask"] = ask
    if signer != "keep":
        records = [record for record in records if record["t"] != "sign"]
        if isinstance(signer, Signer):
            records.append(json.loads(json.dumps(signer.endorse(records))))
    forged = envelope.build(header, records)
    assert forged["digest"] != data["digest"]
    path.write_text(json.dumps(forged), encoding="utf-8")
    assert envelope.read_file(path).header["ask"] == ask  # intact: the chain holds


def _signers(records: list[dict[str, Any]]) -> list[tuple[str, bool]]:
    """Who signed each stretch of a history, and whether the signature holds."""
    return [(s.seal.by, s.seal.holds) if s.seal else ("nobody", False) for s in signatures(records)]


def _notebook_with(folder: Path, *checkpoints: Path, name: str = "shared.ipynb") -> Path:
    """A notebook whose run cells' outputs carry ``checkpoints``, one each, as a kernel would have saved them."""
    cells = [nbformat.v4.new_code_cell("%load_ext mkl_notebook"), nbformat.v4.new_code_cell("%%mkl\n" + REFUND)]
    for checkpoint in checkpoints:
        data = json.loads(checkpoint.read_text(encoding="utf-8"))
        run_id = data["run_id"]
        cells.append(
            nbformat.v4.new_code_cell(
                f"%mkl run refund --id {run_id} --hitl --set ticket=broken",
                outputs=[nbformat.v4.new_output("display_data", data={RUN_MIME: data, "text/plain": f"run {run_id}"})],
            )
        )
    path = folder / name
    nbformat.write(nbformat.v4.new_notebook(cells=cells), path)
    return path


def _question_id(folder: Path, person: Path, notebook: Path) -> str:
    _, listing, _, _ = mkl(folder, person, "runs", notebook.name)
    return str(listing["runs"][0]["question_id"])


# -- intact is not trusted ------------------------------------------------------------------------------


def test_alices_checkpoint_is_hers_to_her_and_an_unknown_key_to_bob(people: tuple[Path, Path, Path]) -> None:
    folder, alice, bob = people
    notebook = _notebook_with(folder, folder / "cp.json")
    code, listing, out, _ = mkl(folder, alice, "runs", notebook.name)
    assert code == 0
    assert listing["runs"][0]["trusted"] is True and listing["runs"][0]["made_by"] == "made by you"
    assert "NOT TRUSTED" not in out
    _code, listing, out, _ = mkl(folder, bob, "runs", notebook.name)
    listed = listing["runs"][0]
    assert listed["trusted"] is False
    assert listed["made_by"].startswith("made by an unknown key ") and listed["made_by"].endswith("(signed as 'alice')")
    assert f"asks: [NOT TRUSTED] {REFUND_ASK}" in out
    assert f"not trusted: {listed['made_by']}; taken up only with --trust-file" in out


def test_bob_cannot_take_up_alices_run_until_he_chooses_to_then_his_answer_is_signed_as_his(
    people: tuple[Path, Path, Path],
) -> None:
    folder, alice, bob = people
    question = _question_id(folder, bob, _notebook_with(folder, folder / "cp.json"))
    answer = ("resume", "cp.json", "--question", question, "--reply", "approve", "--script", str(REFUND_SCRIPT))
    before = (folder / "cp.json").read_bytes()
    code, status, _, err = mkl(folder, bob, *answer, "--store", "bob.sqlite")
    assert code == 2 and err.count("\n") == 1
    assert "run 'r' is made by an unknown key" in err and "(signed as 'alice')" in err
    assert "`mkl trust ed25519:" in err and " --name alice`" in err and "--trust-file" in err
    assert store_rows(folder / "bob.sqlite") == [] and (folder / "cp.json").read_bytes() == before

    code, status, _, err = mkl(folder, bob, *answer, "--store", "bob.sqlite", "--trust-file")
    assert (code, status["status"]) == (0, "done"), err
    checkpoint = envelope.read_file(folder / "cp.json")
    assert checkpoint.seal is None  # no seal over the whole file: each stretch of the history is signed
    assert _signers(checkpoint.records) == [("alice", True), ("bob", True)]
    reply = next(n for n, r in enumerate(checkpoint.records) if r["t"] == "reply")
    [bobs] = [s for s in signatures(checkpoint.records) if s.seal and s.seal.by == "bob"]
    assert bobs.start <= reply < bobs.end  # the answer is in Bob's stretch, under his key
    alices = next(n for n, r in enumerate(checkpoint.records) if r["t"] == "sign")
    # For Alice, what Bob added is his: not trusted until she chooses to trust his key.
    verdict = Keyring(alice / "mkl").judge_history(checkpoint.records, None, alices + 1)
    assert not verdict.trusted and "made by an unknown key" in verdict.mark and "'bob'" in verdict.mark
    assert Keyring(alice / "mkl").judge_history(checkpoint.records[: alices + 1]).mark == "made by you"


def test_a_forged_question_with_a_recomputed_digest_is_marked_and_never_resumed_without_the_choice(
    people: tuple[Path, Path, Path],
) -> None:
    folder, _alice, bob = people
    code, _, out, err = mkl(folder, bob, "trust", "cp.json", "--name", "Alice")  # Bob trusts Alice's key
    assert code == 0 and "\ntrusted: " in out and "  Alice  " in out, err  # after the file's keys, listed
    _forge(folder / "cp.json", FORGED_ASK)  # Mallory edits the question and recomputes the digest
    notebook = _notebook_with(folder, folder / "cp.json")

    code, listing, out, _ = mkl(folder, bob, "runs", notebook.name)
    listed = listing["runs"][0]
    assert listed["ask"] == FORGED_ASK and listed["trusted"] is False
    assert listed["made_by"].startswith("changed after it was signed (the signature by key ")
    assert f"asks: [NOT TRUSTED] {FORGED_ASK}" in out  # never the forged text without the mark
    code, _found, out, _ = mkl(folder, bob, "runs", ".")
    assert f"[NOT TRUSTED: {listed['made_by']}] asks {FORGED_ASK!r}" in out

    question = listed["question_id"]
    for target in (["cp.json"], [notebook.name, "--run", "r"]):
        before = (folder / target[0]).read_bytes()
        code, status, _, err = mkl(
            folder, bob, "resume", *target, "--question", question, "--reply", "approve", "--script", str(REFUND_SCRIPT)
        )
        assert code == 2 and err.count("\n") == 1 and "changed after it was signed" in err, err
        assert (folder / target[0]).read_bytes() == before and store_rows(folder / ".mkl" / "runs.sqlite") == []

    code, status, _, err = mkl(
        folder, bob, "resume", "cp.json", "--question", question, "--reply", "approve", "--script",
        str(REFUND_SCRIPT), "--trust-file",
    )  # fmt: skip
    assert (code, status["status"]) == (0, "done"), err  # the explicit choice is Bob's to make


@pytest.mark.parametrize("how", ["unsigned", "mallory"])
def test_a_stripped_or_replaced_signature_is_not_alices(people: tuple[Path, Path, Path], how: str) -> None:
    folder, _alice, bob = people
    assert mkl(folder, bob, "trust", "cp.json", "--name", "Alice")[0] == 0
    mallory = Signer(Ed25519PrivateKey.generate(), "alice")  # Mallory's own key, claiming to be alice
    original = envelope.read_file(folder / "cp.json").records
    _forge(folder / "cp.json", FORGED_ASK, signer=mallory if how == "mallory" else None)
    assert all(r.get("key") != mallory.key for r in original)
    code, listing, _out, _ = mkl(folder, bob, "runs", _notebook_with(folder, folder / "cp.json").name)
    made_by = listing["runs"][0]["made_by"]
    if how == "unsigned":
        assert made_by == "unsigned: nothing says who made it"
    else:  # a name is only a claim: the key is what counts
        assert made_by.startswith("made by an unknown key ") and made_by.endswith("(signed as 'alice')")
    code, _, _, err = mkl(folder, bob, "resume", "cp.json", "--reply", "approve", "--script", str(REFUND_SCRIPT))
    assert code == 2 and made_by in err


def test_trusting_a_key_takes_up_its_runs_and_removing_it_stops(people: tuple[Path, Path, Path]) -> None:
    folder, alice, bob = people
    code, _, out, _ = mkl(folder, alice, "trust")
    alice_key = out.split()[6]  # "your key: xxxx xxxx xxxx xxxx  ed25519:…"
    assert alice_key.startswith("ed25519:")
    code, _, out, err = mkl(folder, bob, "trust", alice_key)
    assert code == 2 and "say whose key it is with --name NAME" in err
    assert mkl(folder, bob, "trust", alice_key, "--name", "Alice")[0] == 0
    code, _, out, _ = mkl(folder, bob, "trust")
    assert f"Alice  {alice_key}" in out
    assert oct(stat.S_IMODE(os.stat(bob / "mkl" / "trusted-keys.json").st_mode)) == "0o600"
    notebook = _notebook_with(folder, folder / "cp.json")
    _, listing, out, _ = mkl(folder, bob, "runs", notebook.name)
    assert listing["runs"][0]["trusted"] is True and listing["runs"][0]["made_by"].startswith("made by Alice (")
    assert "NOT TRUSTED" not in out

    code, _, out, _ = mkl(folder, bob, "trust", alice_key, "--remove")
    assert code == 0 and out.startswith("no longer trusted: ")
    _, listing, _, _ = mkl(folder, bob, "runs", notebook.name)
    assert listing["runs"][0]["trusted"] is False


# -- trusting a file's keys is a choice per key -----------------------------------------------------------


def _key_of(folder: Path, person: Path) -> str:
    code, _, out, err = mkl(folder, person, "trust")
    assert code == 0, err
    return out.split()[6]  # "your key: xxxx xxxx xxxx xxxx  ed25519:…"


@pytest.fixture
def hidden_key(people: tuple[Path, Path, Path]) -> tuple[Path, Path, Path, str, str]:
    """Alice's notebook, with one extra run in it signed by Mallory's own key, which signs as "alice": the
    shared folder, Alice's and Bob's data folders, the notebook's name, and Mallory's key."""
    folder, alice, bob = people
    mallory = folder.parent / "mallory"
    env = {"JUPYTER_DATA_DIR": str(mallory), "JUPYTERHUB_USER": "alice"}  # her key; the name she claims
    run = ["run", "refund.mkl", "--id", "m", "--hitl", "--script", str(REFUND_SCRIPT), "--set", "ticket=x"]
    code, _, _, err = mkl_cli(folder, *run, "--store", "mallory.sqlite", "--checkpoint", "m.json", env=env)
    assert code == 3, err
    notebook = _notebook_with(folder, folder / "cp.json", folder / "m.json")
    return folder, alice, bob, notebook.name, _key_of(folder, mallory)


def _trusted_keys(person: Path) -> dict[str, str]:
    path = person / "mkl" / "trusted-keys.json"
    keys = json.loads(path.read_text(encoding="utf-8"))["keys"] if path.exists() else {}
    return {key: entry["name"] for key, entry in keys.items()}


@pytest.mark.parametrize("bob_trusts_alice", [False, True])
def test_a_notebook_with_a_hidden_key_claiming_alice_never_gets_it_trusted_as_alice(
    hidden_key: tuple[Path, Path, Path, str, str], bob_trusts_alice: bool
) -> None:
    folder, alice, bob, notebook, mallory_key = hidden_key
    alice_key = _key_of(folder, alice)
    alice_fp, mallory_fp = key_fingerprint(alice_key), key_fingerprint(mallory_key)
    if bob_trusts_alice:
        assert mkl(folder, bob, "trust", alice_key, "--name", "alice")[0] == 0
    before = _trusted_keys(bob)

    code, _, out, err = mkl(folder, bob, "trust", notebook)  # no terminal, no choice: nothing is trusted
    assert code == 2 and err.count("\n") == 1 and "nothing trusted" in err, err
    assert f"key {mallory_fp}  NOT TRUSTED  signs as 'alice'  {mallory_key}" in out
    assert "    signed run 'm' records 1–" in out
    if bob_trusts_alice:
        assert f"key {alice_fp}  trusted as 'alice'  signs as 'alice'" in out
        assert f"beware: 'alice' is already the name of key {alice_fp} that you trust" in out
    else:
        assert f"key {alice_fp}  NOT TRUSTED  signs as 'alice'" in out
    assert _trusted_keys(bob) == before

    code, _, out, err = mkl(folder, bob, "trust", notebook, "--name", "alice")
    assert code == 2 and err.count("\n") == 1, err
    if bob_trusts_alice:  # the one unknown key is Mallory's, and the name is Alice's key's
        assert f"'alice' is already the name of key {alice_fp} that you trust" in err
        assert f"trust key {mallory_fp} under another name" in err
    else:
        assert "holds 2 keys you do not trust; say which with --key FINGERPRINT" in err
    assert _trusted_keys(bob) == before

    if not bob_trusts_alice:  # Bob picks Alice's key by the fingerprint she gave him
        code, _, out, err = mkl(folder, bob, "trust", notebook, "--key", alice_fp, "--name", "alice")
        assert code == 0 and f"trusted: {alice_fp}  alice  {alice_key}" in out, err
    code, _, _, err = mkl(folder, bob, "trust", notebook, "--key", mallory_fp.replace(" ", ""), "--name", "Alice")
    assert code == 2 and f"'Alice' is already the name of key {alice_fp}" in err, err
    assert _trusted_keys(bob) == {alice_key: "alice"}
    _, listing, _, _ = mkl(folder, bob, "runs", notebook)
    assert {run["run"]: run["trusted"] for run in listing["runs"]} == {"r": True, "m": False}

    code, _, out, err = mkl(folder, bob, "trust", notebook, "--key", mallory_fp, "--name", "mallory")
    assert code == 0 and f"trusted: {mallory_fp}  mallory  {mallory_key}" in out, err  # under her own name: fine


def test_a_name_is_one_keys_and_never_your_own(people: tuple[Path, Path, Path]) -> None:
    folder, alice, bob = people
    alice_key, bob_key = _key_of(folder, alice), _key_of(folder, bob)
    other = Signer(Ed25519PrivateKey.generate(), "x").key
    assert mkl(folder, bob, "trust", alice_key, "--name", "Alice")[0] == 0
    code, _, _, err = mkl(folder, bob, "trust", other, "--name", " alice ")
    assert code == 2 and err.count("\n") == 1
    assert f"' alice ' is already the name of key {key_fingerprint(alice_key)} that you trust (as 'Alice'" in err
    code, _, _, err = mkl(folder, bob, "trust", other, "--name", "Bob")
    assert code == 2 and "'Bob' is your own name (your runs are signed as 'bob')" in err
    assert _trusted_keys(bob) == {alice_key: "Alice"}
    code, _, out, _ = mkl(folder, bob, "trust", bob_key, "--name", "bob")  # your own key needs no trust
    assert code == 0 and out.startswith("already trusted: ")


def test_on_a_terminal_each_unknown_key_is_asked_about_and_only_a_yes_trusts_it(
    hidden_key: tuple[Path, Path, Path, str, str],
) -> None:
    folder, alice, bob, notebook, mallory_key = hidden_key
    alice_key = _key_of(folder, alice)
    env = {**env_without_models(), "JUPYTER_DATA_DIR": str(bob), "JUPYTERHUB_USER": "bob"}
    child = pexpect.spawn(
        sys.executable, ["-m", "mkl_notebook.cli", "trust", notebook], cwd=folder, env=env, encoding="utf-8"
    )
    child.expect(rf"Trust key {key_fingerprint(alice_key)} as 'alice's\? \[y/N\] ", timeout=120)
    child.sendline("y")
    child.expect(rf"trusted: {key_fingerprint(alice_key)}  alice", timeout=60)
    # Alice's key has the name now, so Mallory's, claiming it too, is not even asked about.
    child.expect(rf"not asked: 'alice' is already the name of key {key_fingerprint(alice_key)}", timeout=60)
    child.expect(pexpect.EOF, timeout=60)
    child.close()
    assert child.exitstatus == 0
    assert _trusted_keys(bob) == {alice_key: "alice"}

    bob2 = folder.parent / "bob2"  # someone who trusts no one yet says no to both
    env = {**env, "JUPYTER_DATA_DIR": str(bob2)}
    child = pexpect.spawn(
        sys.executable, ["-m", "mkl_notebook.cli", "trust", notebook], cwd=folder, env=env, encoding="utf-8"
    )
    for _ in range(2):
        child.expect(r"as 'alice's\? \[y/N\] ", timeout=120)
        child.sendline("")
    child.expect(pexpect.EOF, timeout=60)
    child.close()
    assert child.exitstatus == 0 and _trusted_keys(bob2) == {}
    assert mallory_key not in _trusted_keys(bob)


# -- what a file says is shown, never obeyed by the terminal ----------------------------------------------

EVIL_ASK = "Approve a refund?\x1b[2K\r\x1b[1A\x1b[32mall is fine\x08\x08\x7f\x9b2K\u202eevil\nok  refund  done"
CONTROLS = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")  # all but a line break


def test_a_questions_escape_sequences_are_shown_and_the_not_trusted_mark_stays_on_its_line(
    people: tuple[Path, Path, Path],
) -> None:
    folder, _alice, bob = people
    _forge(folder / "cp.json", EVIL_ASK)  # Mallory's question: it would erase the line and the one above
    notebook = _notebook_with(folder, folder / "cp.json")
    shown_as = EVIL_ASK.encode("unicode_escape").decode("ascii")  # "\\x1b[2K\\r…": what a person sees
    expected = {notebook.name: f"asks: [NOT TRUSTED] {shown_as}", ".": "[NOT TRUSTED: changed after it was signed"}
    for target in (notebook.name, "."):
        code, status, out, err = mkl(folder, bob, "runs", target)
        assert code == 0, err
        assert "\x1b" not in out and "\r" not in out and "\x08" not in out  # not even in the JSON line
        *shown, last = out.rstrip("\n").split("\n")
        assert json.loads(last) == status and not CONTROLS.search("\n".join(shown)), shown
        [line] = [line for line in shown if "Approve a refund?" in line]
        assert expected[target] in line and shown_as in line
        assert not any(line.startswith("ok  refund") for line in shown)  # no line of the file's making


def test_a_models_escape_sequences_are_shown_not_obeyed_by_mkl_run_and_mkl_trace(tmp_path: Path) -> None:
    evil = "Hello!\x1b[2J\x1b[H\rAll approved.\x9b31m\ttab\nsecond line"
    script = {"llm": {"produce": {"Write the reply": evil, "Final reply": evil}, "judge": [2]}, "tools": {}}
    script["tools"] = {"order_lookup": ['{"order": "A-1001", "refundable": true}']}
    (tmp_path / "refund.mkl").write_text(REFUND, encoding="utf-8")
    (tmp_path / "s.json").write_text(json.dumps(script), encoding="utf-8")
    person = tmp_path / "carol"
    code, status, out, err = mkl(
        tmp_path, person, "run", "refund.mkl", "--id", "e", "--script", "s.json", "--set", "t=x"
    )
    assert code == 0 and status["result"] == evil, err
    _, _, traced, _ = mkl(tmp_path, person, "trace", "--id", "e")
    for shown in (out, traced):
        human = shown.rstrip("\n").rsplit("\n", 1)[0]  # all but the JSON status line; a block keeps its tabs
        assert "Hello!\\x1b[2J\\x1b[H\\rAll approved.\\x9b31m" in human and not CONTROLS.search(
            human.replace("\t", "")
        ), human


def test_a_run_id_with_a_newline_is_named_on_one_line(people: tuple[Path, Path, Path]) -> None:
    folder, _alice, bob = people
    notebook = _notebook_with(folder, folder / "cp.json")
    for target in (["--id", "r\nx\x1b[1A"], [notebook.name, "--run", "r\nx\x1b[1A"]):
        code, status, _, err = mkl(folder, bob, "resume", *target, "--reply", "approve")
        assert code == 2 and err.count("\n") == 1 and "'r\\nx\\x1b[1A'" in err, err
        assert "r\nx\x1b[1A" in status["error"]  # the status line is JSON: it says it as it is


def test_a_key_is_made_once_readable_by_its_owner_only_even_when_many_ask_at_once(tmp_path: Path) -> None:
    person = tmp_path / "carol"
    env = {**env_without_models(), "JUPYTER_DATA_DIR": str(person)}
    command = [sys.executable, "-m", "mkl_notebook.cli", "trust"]
    started = [subprocess.Popen(command, env=env, stdout=subprocess.PIPE, text=True) for _ in range(8)]
    keys = {process.communicate(timeout=120)[0].split()[6] for process in started}
    assert len(keys) == 1 and all(process.returncode == 0 for process in started)
    assert oct(stat.S_IMODE(os.stat(person / "mkl").st_mode)) == "0o700"
    assert oct(stat.S_IMODE(os.stat(person / "mkl" / "signing-key.pem").st_mode)) == "0o600"
    assert [path.name for path in (person / "mkl").iterdir()] == ["signing-key.pem"]  # no temp file left


def test_a_broken_key_file_is_one_line(tmp_path: Path) -> None:
    person = tmp_path / "dave"
    (person / "mkl").mkdir(parents=True)
    (person / "mkl" / "signing-key.pem").write_text("not a key", encoding="utf-8")
    code, _, _, err = mkl(tmp_path, person, "trust")
    assert code == 2 and err.count("\n") == 1 and "your signing key cannot be read" in err
    (person / "mkl" / "trusted-keys.json").write_text("[1, 2", encoding="utf-8")
    (person / "mkl" / "signing-key.pem").unlink()
    code, _, _, err = mkl(tmp_path, person, "trust")
    assert code == 2 and err.count("\n") == 1 and "your trusted keys cannot be read" in err


SEAL_MUTATIONS: list[tuple[str, Any]] = [
    ("a list", ["key", "by", "signature"]),
    ("no signature", {"key": "K", "by": "alice"}),
    ("an extra field", {"key": "K", "by": "alice", "signature": "S", "trusted": True}),
    ("a number key", {"key": 7, "by": "alice", "signature": "S"}),
    ("an RSA key", {"key": "rsa:AAAA", "by": "alice", "signature": "S"}),
    ("a short key", {"key": "ed25519:" + base64.b64encode(b"x" * 31).decode(), "by": "alice", "signature": "S"}),
    ("a damaged key", {"key": "ed25519:!!!!", "by": "alice", "signature": "S"}),
    ("a huge key", {"key": "ed25519:" + "A" * 10_000, "by": "alice", "signature": "S"}),
    ("a number name", {"key": "K", "by": 5, "signature": "S"}),
    ("a huge name", {"key": "K", "by": "a" * 10_000, "signature": "S"}),
    ("a null signature", {"key": "K", "by": "alice", "signature": None}),
    ("a damaged signature", {"key": "K", "by": "alice", "signature": "%%%"}),
    ("a huge signature", {"key": "K", "by": "alice", "signature": "A" * 10_000}),
]


def _legacy_sealed(path: Path, person: Path) -> None:
    """The checkpoint as a release before journaled signatures wrote it: no ``sign`` records, one seal over the
    whole envelope, made with ``person``'s key."""
    header, records, _ = envelope.read_file(path)
    unsigned = [record for record in records if record["t"] != "sign"]
    signer = Keyring(person / "mkl").signer()
    path.write_text(json.dumps(envelope.build(header, unsigned, signer=signer)), encoding="utf-8")
    assert envelope.read_file(path).seal is not None


@pytest.mark.parametrize("where", ["sign record", "envelope seal"])
@pytest.mark.parametrize(("label", "seal"), SEAL_MUTATIONS, ids=[label for label, _ in SEAL_MUTATIONS])
def test_a_misshapen_signature_is_one_line_and_leaves_the_store_untouched(
    people: tuple[Path, Path, Path], label: str, seal: Any, where: str
) -> None:
    folder, alice, _bob = people
    if where == "envelope seal":
        _legacy_sealed(folder / "cp.json", alice)
        data = json.loads((folder / "cp.json").read_text(encoding="utf-8"))
        real = data["seal"]
        if isinstance(seal, dict):
            seal = {name: (real[name] if value in ("K", "S") else value) for name, value in seal.items()}
        data["seal"] = seal
    else:  # the same damage to the sign record that ends Alice's history, its digest recomputed as anyone can
        header, records, _ = envelope.read_file(folder / "cp.json")
        real = records[-1]
        assert real["t"] == "sign"
        if isinstance(seal, dict):
            named = {"key": "key", "by": "by", "signature": "sig"}
            fields = {
                named.get(name, name): (real[named[name]] if value in ("K", "S") else value)
                for name, value in seal.items()
            }
            records[-1] = {"t": "sign", **fields, "time": real["time"]}
        else:
            records[-1] = {"t": "sign", "key": seal}
        data = envelope.build(header, records)
    (folder / "cp.json").write_text(json.dumps(data), encoding="utf-8")
    code, _, _, err = mkl(folder, alice, "resume", "cp.json", "--reply", "approve", "--store", "s.sqlite")
    assert code == 2 and err.count("\n") == 1 and "Traceback" not in err, (label, err)
    assert "misshapen" in err or "signature" in err, (label, err)
    assert store_rows(folder / "s.sqlite") == []


# -- in the notebook -----------------------------------------------------------------------------------


@pytest.fixture
def bobs_kernel(
    people: tuple[Path, Path, Path], shell: InteractiveShell, load_mkl: Any, monkeypatch: pytest.MonkeyPatch
) -> tuple[Path, list[RunView]]:
    """Bob's kernel, with Alice's notebook (saved after a run with her model) as its own file."""
    folder, _alice, bob = people
    notebook = _notebook_with(folder, folder / "cp.json")
    monkeypatch.setenv("JUPYTER_DATA_DIR", str(bob))
    monkeypatch.setenv("JPY_SESSION_NAME", str(notebook))
    monkeypatch.chdir(folder)
    magics = load_mkl(lambda *args, **kwargs: None)
    monkeypatch.chdir(folder)
    made: list[RunView] = []
    view = magics._view

    def recording_view(run_id: str, machine: Any) -> RunView:
        made.append(view(run_id, machine))
        return made[-1]

    monkeypatch.setattr(magics, "_view", recording_view)
    assert shell.run_cell("%%mkl\n" + REFUND).success
    return notebook, made


def test_a_run_cell_shows_whose_the_files_run_is_and_takes_it_up_only_on_a_click(
    bobs_kernel: tuple[Path, list[RunView]], shell: InteractiveShell
) -> None:
    _notebook, made = bobs_kernel
    session = mkl_notebook.notebook.session.current_session()
    result = shell.run_cell("%mkl run refund --id r --hitl --set ticket=broken")  # Bob has no model: none needed
    assert result.success, result.error_in_exec
    view = made[-1]
    choice = view.choice
    assert isinstance(choice, TakeUpChoice)
    assert "Not trusted:" in choice.header.value and "made by an unknown key" in choice.header.value
    assert html.escape(REFUND_ASK) in choice.header.value and "(signed as &#x27;alice&#x27;)" in choice.header.value
    labels = [button.description for button in choice.buttons]
    # no "Run it here as a new run": Bob has neither a script nor a model, so a run of his own could call nothing
    assert labels[1:] == ["Take up the file's run"]
    assert labels[0].startswith("Trust key ") and labels[0].endswith(" under that name, take it up")
    assert choice.name is not None and choice.name.value == "alice"  # the name its signatures claim: free here
    assert not session.store.exists("r") and view.current_form is None  # nothing of it runs before the click

    choice.buttons[1].click()
    assert all(button.disabled for button in choice.buttons)
    assert session.store.exists("r")
    form = view.current_form
    assert isinstance(form, QuestionForm) and form.pending["ask"] == REFUND_ASK
    # Taken up by choice, still not trusted: the form says so, and whose word the question is.
    assert "Not trusted:</strong> taken up from shared.ipynb by your choice; it is made by an unknown key" in (
        form.question_html
    )
    assert "The file says its machine's author asks:" in form.question_html
    run = mkl_notebook.get_run("r")
    assert (run.status, run.calls["made"]) == ("suspended", 0)  # Alice's run, replayed: no model called


def test_the_trust_button_refuses_a_name_another_trusted_key_has_and_takes_nothing_up(
    bobs_kernel: tuple[Path, list[RunView]], shell: InteractiveShell, tmp_path: Path
) -> None:
    _notebook, made = bobs_kernel
    bob = tmp_path / "bob"
    someone = Signer(Ed25519PrivateKey.generate(), "alice").key  # Bob knows another key as alice's already
    assert mkl(tmp_path / "shared", bob, "trust", someone, "--name", "alice")[0] == 0
    session = mkl_notebook.notebook.session.current_session()
    assert shell.run_cell("%mkl run refund --id r --hitl --set ticket=broken").success
    choice = made[-1].choice
    assert isinstance(choice, TakeUpChoice) and choice.name is not None
    alices = key_fingerprint(_key_of(tmp_path / "shared", tmp_path / "alice"))
    assert choice.name.value == f"alice-{alices.replace(' ', '')[:4]}"  # the claimed name is taken: a free one
    choice.name.value = "alice"  # typed over: someone else's name here
    choice.buttons[0].click()
    assert "Could not go on:</strong> &#x27;alice&#x27; is already the name of key " in choice.status.value
    assert key_fingerprint(someone) in choice.status.value
    assert _trusted_keys(bob) == {someone: "alice"} and not session.store.exists("r")
    assert not any(button.disabled for button in choice.buttons)  # nothing was done: choose again
    choice.name.value = "alice at the office"
    choice.buttons[0].click()  # trusted under the name typed, and taken up
    assert _trusted_keys(bob) == {
        someone: "alice",
        _key_of(tmp_path / "shared", tmp_path / "alice"): ("alice at the office"),
    }
    assert session.store.exists("r")


def test_get_run_and_resume_refuse_an_untrusted_run_in_one_line_until_told(
    bobs_kernel: tuple[Path, list[RunView]], shell: InteractiveShell
) -> None:
    with pytest.raises(Untrusted, match=r"shared\.ipynb: run 'r' is made by an unknown key .* --trust-file"):
        mkl_notebook.get_run("r")
    result = shell.run_cell("%mkl resume r --reply approve")
    assert isinstance(result.error_in_exec, UsageError)
    assert "made by an unknown key" in str(result.error_in_exec) and "--trust-file" in str(result.error_in_exec)
    run = mkl_notebook.get_run("r", trust_file=True)
    assert (run.status, run.pending and run.pending["ask"]) == ("suspended", REFUND_ASK)
    # Alice's run names her script file in its start record: a run taken up untrusted names none of her paths
    # in the commands shown here (a tools file there would be code that pasting the command runs).
    assert run.run_result.started_with == {}
    assert str(REFUND_SCRIPT) not in run._repr_mimebundle_()["text/plain"]
