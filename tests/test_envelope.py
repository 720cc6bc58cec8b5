"""The checkpoint envelope: written privately and atomically, and never half-trusted.

A run's envelope must round-trip exactly; anything damaged or edited (a flipped byte, a
truncated file, an edited field) is refused with :class:`EnvelopeError` — never another
exception, never accepted with different content — and ``mkl resume`` then exits 2
with one line and leaves the file as it was.
"""

from __future__ import annotations

import base64
import copy
import json
import os
import stat
import subprocess
import sys
import zlib
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from mkl_notebook.checkpoints import envelope, seals
from mkl_notebook.checkpoints import notebook_file as nbfile
from mkl_notebook.checkpoints.envelope import EnvelopeError
from mkl_notebook.checkpoints.journal_words import WORDS
from mkl_notebook.durable import runs
from mkl_notebook.durable.stores import MemoryStore
from mkl_notebook.engine.options import RunOptions
from mkl_notebook.lang.loader import load
from mkl_notebook.providers.scripted import ScriptedOracle

LOOP = """
machine: grower
entry: grow
budget: 40
result: notes
states:
  grow:
    structure: one more note
    prompt: "add a note to {{notes}}"
    output: notes
    accumulate: true
    gates:
      - { when: the notes are complete, then: ok, to: END }
      - { when: otherwise, then: ok, to: check }
  check:
    tool: count_notes
    input: { notes: "{{notes}}" }
    output: counted
    gates:
      - { when: otherwise, then: ok, to: grow }
"""


def _finished_run(note: str = "note", rounds: int = 10) -> runs.Outcome:
    """A finished run of about 20 steps (10 produce + 9 tool states, 10 judge calls)."""
    oracle = ScriptedOracle(
        {"produce": [f"{note} {i}" for i in range(rounds)], "judge": ["none"] * (rounds - 1) + [0], "tokens": [11, 13]},
        tools={"count_notes": [str(i) for i in range(1, rounds)]},
    )
    outcome = runs.start(
        load(LOOP),
        oracle,
        store=MemoryStore(),
        run_id="env-run",
        input={"topic": "privacy"},
        options=RunOptions(secret=b"envelope-secret!"),
    )
    assert outcome.result.status == "done"
    return outcome


PLAIN_RUN = _finished_run()
PLAIN = envelope.build(
    envelope.outcome_header(PLAIN_RUN), PLAIN_RUN.records, compress=False
)  # byte flips in plain JSON
PLAIN_BYTES = envelope.dumps(PLAIN).encode("utf-8")
BIG_RUN = _finished_run(note="x" * 3000)
BIG = envelope.checkpoint_of(BIG_RUN)
BIG_BYTES = envelope.dumps(BIG).encode("utf-8")
ORIGINAL = {"plain": envelope.loads(PLAIN_BYTES), "big": envelope.loads(BIG_BYTES)}
DATA = {"plain": PLAIN_BYTES, "big": BIG_BYTES}


def test_the_envelopes_under_test_are_what_they_claim() -> None:
    assert len(PLAIN_RUN.result.trace) == 19
    assert PLAIN["journal"]["encoding"] == "json"
    assert BIG["journal"]["encoding"] == envelope.PACKED == "zlib+words1+base85"


def test_a_checkpoint_is_built_once_while_its_run_stands_and_anew_when_it_moves() -> None:
    """A click puts a run's checkpoint in the notebook's metadata and draws its view with it: one build serves both
    (the same object), and the kernel reading back the one it put is not made to check its own work. A change of
    where the run stands, or of who seals it, builds another; one built here and edited since is checked again."""
    run = _finished_run(rounds=3)
    first = envelope.checkpoint_of(run)
    assert envelope.checkpoint_of(run) is first
    assert envelope.verify_checkpoint(first).records == run.records
    signer = seals.Signer(Ed25519PrivateKey.generate(), "ann")
    assert envelope.checkpoint_of(run, signer) is not first  # sealed by ann now: the records' last are unsigned
    run.result.status = "halt"
    moved = envelope.checkpoint_of(run)
    assert moved is not first and moved["status"] == "halt" and first["status"] == "done"
    moved["status"] = "done"  # edited in place after it was built: its digest no longer holds
    with pytest.raises(EnvelopeError, match="digest"):
        envelope.verify_checkpoint(moved)


# -- files ----------------------------------------------------------------------------------


def test_write_then_read_round_trips_owner_only(tmp_path: Path) -> None:
    path = tmp_path / "run.mkl-run.json"
    old_umask = os.umask(0)  # the mode must not depend on a permissive umask
    try:
        envelope.write_file(path, PLAIN)
    finally:
        os.umask(old_umask)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    header, records, _ = envelope.read_file(path)
    assert records == PLAIN_RUN.records
    assert header["run_id"] == "env-run" and header["status"] == "done"
    assert header["machines"][0]["name"] == "grower"
    assert header["machines"][0]["sha256"] == load(LOOP).sha256
    assert header == envelope.outcome_header(PLAIN_RUN) | {"format": "mkl-run/1", "package": header["package"]}


def test_write_over_an_existing_file_replaces_it_atomically(tmp_path: Path) -> None:
    path = tmp_path / "cp.json"
    path.write_text("an older checkpoint", encoding="utf-8")
    os.chmod(path, 0o644)
    inode = path.stat().st_ino
    envelope.write_file(path, BIG)
    assert path.read_bytes() == BIG_BYTES
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert path.stat().st_ino != inode  # a new file renamed over the old one, not rewritten in place
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cp.json"]  # no temp files left


def test_a_failed_write_keeps_the_old_file_and_leaves_no_temp_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "cp.json"
    envelope.write_file(path, PLAIN)

    def refuse(*args: Any, **kwargs: Any) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", refuse)
    with pytest.raises(OSError):
        envelope.write_file(path, BIG)
    assert path.read_bytes() == PLAIN_BYTES
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cp.json"]


def test_a_large_journal_is_compressed_and_still_verifies(tmp_path: Path) -> None:
    journal = BIG["journal"]
    assert journal["encoding"] == envelope.PACKED and "records" not in journal
    assert journal["count"] == len(BIG_RUN.records)
    plain_size = len(json.dumps(BIG_RUN.records, ensure_ascii=False, separators=(",", ":")))
    assert len(BIG_BYTES) < plain_size / 3
    path = tmp_path / "big.json"
    envelope.write_file(path, BIG)
    header, records, _ = envelope.read_file(path)
    assert records == BIG_RUN.records and header["status"] == "done"


def test_unreadable_or_foreign_files_are_refused_with_envelope_error(tmp_path: Path) -> None:
    with pytest.raises(EnvelopeError, match="cannot be read"):
        envelope.read_file(tmp_path / "missing.json")
    (tmp_path / "list.json").write_text("[1, 2]", encoding="utf-8")
    with pytest.raises(EnvelopeError, match="not an mkl run checkpoint"):
        envelope.read_file(tmp_path / "list.json")
    (tmp_path / "nb.ipynb").write_text(json.dumps({"cells": [], "nbformat": 4}), encoding="utf-8")
    with pytest.raises(EnvelopeError):
        envelope.read_file(tmp_path / "nb.ipynb")


# -- damage and edits (property tests) ------------------------------------------------------------


def _refused_or_identical(which: str, data: bytes) -> None:
    """Refused with EnvelopeError, or accepted only when nothing changed at the JSON level.

    The one tolerated difference: in a compressed journal, base64 text that decodes
    to the very same journal (a flip in the unused bits of the last base64 digit).
    """
    try:
        accepted = envelope.loads(data)
    except EnvelopeError:
        return
    assert accepted == ORIGINAL[which], "a damaged envelope was accepted with different content"
    got, want = json.loads(data), json.loads(DATA[which])
    got_journal, want_journal = got.pop("journal"), want.pop("journal")
    assert got == want, "an envelope with a changed header was accepted"
    if want_journal["encoding"] == "json":
        assert got_journal == want_journal, "an envelope with a changed journal was accepted"
    else:
        assert {k: v for k, v in got_journal.items() if k != "data"} == {
            k: v for k, v in want_journal.items() if k != "data"
        }


@settings(max_examples=400, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(which=st.sampled_from(["plain", "big"]), where=st.floats(0, 1, exclude_max=True), mask=st.integers(1, 255))
@example(which="plain", where=0.0, mask=0x7B)  # the opening brace becomes a NUL byte
@example(which="big", where=0.999, mask=0x01)
def test_any_single_byte_flip_is_refused(which: str, where: float, mask: int) -> None:
    data = bytearray(DATA[which])
    data[int(where * len(data))] ^= mask
    _refused_or_identical(which, bytes(data))


@settings(max_examples=200, deadline=None)
@given(which=st.sampled_from(["plain", "big"]), where=st.floats(0, 1, exclude_max=True))
@example(which="plain", where=0.0)
@example(which="big", where=0.999999)
def test_any_truncation_is_refused(which: str, where: float) -> None:
    data = DATA[which]
    with pytest.raises(EnvelopeError):
        envelope.loads(data[: int(where * len(data))])


def _unpacked(data: str) -> Any:
    """The records a journal packed as today's envelopes pack them holds (read here apart from the module)."""
    return json.loads(zlib.decompressobj(zdict=WORDS).decompress(base64.b85decode(data)))


def _packed(records: list[dict[str, Any]]) -> str:
    packer = zlib.compressobj(9, zdict=WORDS)
    text = json.dumps(records, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    return base64.b85encode(packer.compress(text) + packer.flush()).decode("ascii")


def _edited(which: str, change: Any) -> bytes:
    """The envelope with ``change(document, records)`` applied at the JSON level, journal re-encoded as before."""
    document = copy.deepcopy(PLAIN if which == "plain" else BIG)
    journal = document["journal"]
    records = journal["records"] if journal["encoding"] == "json" else _unpacked(journal["data"])
    change(document, records)
    if journal["encoding"] == envelope.PACKED:
        journal["data"] = _packed(records)
    return envelope.dumps(document).encode("utf-8")


JSON_VALUES = st.one_of(st.text(max_size=30), st.integers(), st.none(), st.booleans())


@settings(max_examples=150, deadline=None)
@given(which=st.sampled_from(["plain", "big"]), value=JSON_VALUES)
def test_an_edited_status_is_refused(which: str, value: Any) -> None:
    if value == "done":
        value = "suspended"

    def change(document: dict[str, Any], records: list[dict[str, Any]]) -> None:
        document["status"] = value

    with pytest.raises(EnvelopeError, match="digest"):
        envelope.loads(_edited(which, change))


@settings(max_examples=150, deadline=None)
@given(which=st.sampled_from(["plain", "big"]), value=st.text(min_size=1, max_size=30))
def test_an_edited_run_id_is_refused(which: str, value: str) -> None:
    if value == "env-run":
        value = "env-run-2"

    def change(document: dict[str, Any], records: list[dict[str, Any]]) -> None:
        document["run_id"] = value

    with pytest.raises(EnvelopeError):
        envelope.loads(_edited(which, change))


@settings(max_examples=150, deadline=None)
@given(which=st.sampled_from(["plain", "big"]), pick=st.integers(0, 1000), text=st.text(max_size=40))
def test_an_edited_answer_text_is_refused(which: str, pick: int, text: str) -> None:
    def change(document: dict[str, Any], records: list[dict[str, Any]]) -> None:
        answers = [r for r in records if r["t"] == "answer" and r["kind"] == "produce"]
        target = answers[pick % len(answers)]
        target["answer"]["text"] = text if text != target["answer"]["text"] else text + "!"

    with pytest.raises(EnvelopeError, match="digest"):
        envelope.loads(_edited(which, change))


@pytest.mark.parametrize("which", ["plain", "big"])
def test_a_dropped_record_is_refused_even_with_a_fixed_count(which: str) -> None:
    def change(document: dict[str, Any], records: list[dict[str, Any]]) -> None:
        del records[3]
        document["journal"]["count"] = len(records)

    with pytest.raises(EnvelopeError):
        envelope.loads(_edited(which, change))


@pytest.mark.parametrize("key", ["error", "at", "ask", "reply_to", "question"])
def test_a_flip_in_the_name_of_a_null_header_field_is_refused(key: str) -> None:
    """A finished run's envelope holds ``"ask":null`` and the like; a flipped byte in such a key's
    name changes the JSON (the field disappears, an unknown one appears) and must be refused."""
    marker = f'"{key}":null'.encode()
    first = PLAIN_BYTES.index(marker)  # the header comes before the journal, whose records may repeat the key
    assert first < PLAIN_BYTES.index(b'"journal"')
    data = bytearray(PLAIN_BYTES)
    data[first + 1] ^= 0x01  # e.g. "ask" -> "`sk"
    assert json.loads(bytes(data)) != json.loads(PLAIN_BYTES)
    with pytest.raises(EnvelopeError):
        envelope.loads(bytes(data))


def test_a_checkpoint_carries_its_options_once_and_one_from_an_earlier_release_still_reads() -> None:
    """The run's options are in its start record; earlier releases copied them into every checkpoint's header
    (a few hundred bytes in each of a notebook's runs). Such a checkpoint still reads, covered by its digest."""
    assert "options" not in PLAIN and PLAIN_RUN.records[0]["options"]  # once: in the journal's start record
    earlier = {key: value for key, value in PLAIN.items() if key not in ("journal", "digest")}
    earlier["options"] = PLAIN_RUN.records[0]["options"]
    earlier["digest"] = envelope._digest(earlier, PLAIN_RUN.records)
    earlier["journal"] = PLAIN["journal"]
    header, records, _ = envelope.loads(json.dumps(earlier))
    assert header["options"] == PLAIN_RUN.records[0]["options"] and records == PLAIN_RUN.records
    with pytest.raises(EnvelopeError, match="digest"):
        envelope.loads(json.dumps({**earlier, "options": {**earlier["options"], "max_steps": 1}}))
    with pytest.raises(EnvelopeError, match="digest"):
        envelope.loads(json.dumps({**PLAIN, "options": earlier["options"]}))  # added afterwards


def test_a_journal_packed_with_the_preset_words_is_smaller_and_one_packed_as_before_still_reads() -> None:
    """Deflate starts from words every journal repeats, and base85 spends less than base64: the journal of a run
    of a machine the words know nothing of packs smaller. A checkpoint an earlier release packed (plain zlib,
    base64) reads the same records, still covered by its digest."""
    text = json.dumps(BIG_RUN.records, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    before = base64.b64encode(zlib.compress(text, 9)).decode("ascii")
    assert len(BIG["journal"]["data"]) < 0.85 * len(before)
    earlier = {**BIG, "journal": {"encoding": "zlib+base64", "count": len(BIG_RUN.records), "data": before}}
    header, records, _ = envelope.loads(json.dumps(earlier))
    assert records == BIG_RUN.records and header["status"] == "done"
    with pytest.raises(EnvelopeError, match="damaged"):  # the old way's data named as the new: refused, one line
        envelope.loads(json.dumps({**earlier, "journal": {**earlier["journal"], "encoding": envelope.PACKED}}))


# -- the command line -----------------------------------------------------------------------

REVIEW = """
machine: review
entry: draft
budget: 20
result: final
states:
  draft:
    structure: a draft
    prompt: "draft the memo"
    output: draft
    gates:
      - { when: otherwise, then: ok, to: helper }
  helper:
    call: polish
    input: { text: "{{draft}}" }
    output: polished
    gates:
      - { when: otherwise, then: ok, to: finish }
  finish:
    structure: the memo
    prompt: "finish the memo"
    output: final
    gates:
      - { when: otherwise, then: ok, to: END }
"""
POLISH = """
machine: polish
entry: p
budget: 5
states:
  p:
    structure: polished text
    prompt: "polish it"
    output: out
    gates:
      - { when: otherwise, then: ok, to: END }
"""
REVIEW_SCRIPT = {
    "llm": {
        "produce": {
            "draft the memo": "D",
            "polish it better": "P2",
            "polish it": "P",
            "finish the memo again": "F2",
            "finish the memo": "F",
        }
    }
}


def _mkl(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mkl_notebook.cli", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        check=False,
        timeout=60,
    )


def _status(completed: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    return json.loads(completed.stdout.strip().splitlines()[-1])


@pytest.fixture
def suspended_checkpoint(tmp_path: Path) -> Path:
    (tmp_path / "review.mkl").write_text(REVIEW, encoding="utf-8")
    (tmp_path / "polish.mkl").write_text(POLISH, encoding="utf-8")
    (tmp_path / "s.json").write_text(json.dumps(REVIEW_SCRIPT), encoding="utf-8")
    completed = _mkl(
        tmp_path,
        "run",
        "review.mkl",
        "--script",
        "s.json",
        "--id",
        "cp-run",
        "--suspend",
        "--max-steps",
        "2",
        "--checkpoint",
        "cp.json",
    )
    assert completed.returncode == 3, completed.stderr
    assert _status(completed)["at"] == "finish"
    return tmp_path / "cp.json"


def _flip(data: bytes) -> bytes:
    flipped = bytearray(data)
    flipped[len(data) // 2] ^= 0x20
    return bytes(flipped)


def _edit_status(data: bytes) -> bytes:
    document = json.loads(data)
    document["status"] = "done"
    return envelope.dumps(document).encode("utf-8")


def _edit_answer(data: bytes) -> bytes:
    """An answer edited in place, its digest left as it was (a journal of some size is stored compressed)."""
    document = json.loads(data)
    journal = document["journal"]
    packed = "data" in journal
    records = _unpacked(journal["data"]) if packed else journal["records"]
    for record in records:
        if record["t"] == "answer":
            record["answer"]["text"] = "forged"
            break
    if packed:
        journal["data"] = _packed(records)
    return envelope.dumps(document).encode("utf-8")


@pytest.mark.parametrize(
    "damage",
    [_flip, lambda data: data[: len(data) // 2], _edit_status, _edit_answer, lambda data: b""],
    ids=["flip", "truncate", "status", "answer", "empty"],
)
def test_resume_refuses_a_damaged_checkpoint_and_leaves_it_alone(suspended_checkpoint: Path, damage: Any) -> None:
    folder = suspended_checkpoint.parent
    damaged = damage(suspended_checkpoint.read_bytes())
    suspended_checkpoint.write_bytes(damaged)
    completed = _mkl(folder, "resume", "cp.json", "--max-steps", "20")
    assert completed.returncode == 2
    assert "Traceback" not in completed.stderr
    lines = completed.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("mkl: error:") and "cp.json" in lines[0]
    assert _status(completed)["status"] == "error"
    assert suspended_checkpoint.read_bytes() == damaged  # nothing overwritten


def test_resume_of_an_intact_checkpoint_finishes_and_rewrites_it(
    suspended_checkpoint: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    elsewhere = tmp_path_factory.mktemp("elsewhere")  # another machine: no store, only the checkpoint
    (elsewhere / "cp.json").write_bytes(suspended_checkpoint.read_bytes())
    (elsewhere / "s.json").write_text(json.dumps(REVIEW_SCRIPT), encoding="utf-8")
    completed = _mkl(elsewhere, "resume", "cp.json", "--max-steps", "20", "--script", "s.json")
    assert completed.returncode == 0, completed.stderr
    status = _status(completed)
    assert status["result"] == "F" and status["calls"] == {"made": 1, "replayed": 2}
    assert status["checkpoint"] == "cp.json"  # the status names the checkpoint it brought up to date
    header, records, _ = envelope.read_file(elsewhere / "cp.json")
    assert header["status"] == "done" and [r["t"] for r in records[-2:]] == ["finish", "sign"]
    assert stat.S_IMODE((elsewhere / "cp.json").stat().st_mode) == 0o600


@pytest.mark.parametrize("edited", ["review", "polish"])
def test_resume_refuses_a_changed_machine_unless_forced(suspended_checkpoint: Path, edited: str) -> None:
    folder = suspended_checkpoint.parent
    if edited == "review":
        text = REVIEW.replace('prompt: "finish the memo"', 'prompt: "finish the memo again"')
    else:
        text = POLISH.replace('prompt: "polish it"', 'prompt: "polish it better"')
    (folder / f"{edited}.mkl").write_text(text, encoding="utf-8")
    before = suspended_checkpoint.read_bytes()
    refused = _mkl(folder, "resume", "cp.json", "--max-steps", "20", "--script", "s.json")
    assert refused.returncode == 2
    assert "Traceback" not in refused.stderr
    message = refused.stderr.strip()
    assert len(message.splitlines()) == 1
    assert f"'{edited}'" in message and "--force" in message
    other = "polish" if edited == "review" else "review"
    assert f"'{other}'" not in message  # it names the machine that changed, only that one
    assert suspended_checkpoint.read_bytes() == before

    by_id = _mkl(folder, "resume", "--id", "cp-run", "--max-steps", "20", "--script", "s.json")
    assert by_id.returncode == 2 and f"'{edited}'" in by_id.stderr

    forced = _mkl(folder, "resume", "cp.json", "--max-steps", "20", "--script", "s.json", "--force")
    assert forced.returncode == 0, forced.stderr
    status = _status(forced)
    if edited == "review":
        assert status["result"] == "F2"  # the edited prompt ran
    else:
        assert status["result"] == "F"
    header, *_ = envelope.read_file(suspended_checkpoint)
    pinned = {pin["name"]: pin["sha256"] for pin in header["machines"]}
    assert pinned[edited] == load(text).sha256


@pytest.mark.parametrize("broken", ["review", "polish"])
def test_resume_names_a_machine_file_that_no_longer_loads_and_runs_the_pinned_copy_only_when_forced(
    suspended_checkpoint: Path, broken: str
) -> None:
    """The root file and a called machine's file alike: an edit that breaks it is said, with where."""
    folder = suspended_checkpoint.parent
    (folder / f"{broken}.mkl").write_text("machine: [unclosed\n", encoding="utf-8")
    before = suspended_checkpoint.read_bytes()
    refused = _mkl(folder, "resume", "cp.json", "--max-steps", "20", "--script", "s.json")
    assert refused.returncode == 2 and "Traceback" not in refused.stderr
    message = refused.stderr.strip()
    assert len(message.splitlines()) == 1
    assert f"{broken}.mkl: line " in message  # which file, and where in it
    assert "cannot be read as it is now" in message and "--force" in message
    assert suspended_checkpoint.read_bytes() == before
    forced = _mkl(folder, "resume", "cp.json", "--max-steps", "20", "--script", "s.json", "--force")
    assert forced.returncode == 0, forced.stderr
    assert _status(forced)["result"] == "F"  # the copies the run pinned


def _relabelled(run_id: str) -> dict[str, Any]:
    """PLAIN under another run id, its digest made again (anyone can): only the signed start record is left
    to say whose history it is."""
    relabelled = {key: value for key, value in PLAIN.items() if key not in ("journal", "digest")}
    relabelled["run_id"] = run_id
    relabelled["digest"] = envelope._digest(relabelled, PLAIN_RUN.records)
    relabelled["journal"] = PLAIN["journal"]
    return relabelled


def test_a_run_relabelled_with_its_digest_made_again_is_refused_as_another_runs_history() -> None:
    with pytest.raises(EnvelopeError, match="says it is run 'r9', but the history it carries is that of run 'env-run'"):
        envelope.loads(json.dumps(_relabelled("r9")))
    with pytest.raises(EnvelopeError, match="history it carries is that of run 'env-run'"):
        envelope.loads(json.dumps(_relabelled("other:alice-ab12")))  # an id derived from another run's
    # A copy kept apart under an id derived from its own (a history that parted, nested too), or of an id cut
    # short to fit, is the run's own history
    for derived in ("env-run:bob-0a1b2c", "env-run:bob-0a1b2c:carol-33aa", nbfile.derived_id("env-run", "a", "ff00")):
        assert envelope.loads(json.dumps(_relabelled(derived)))[0]["run_id"] == derived
    long = "x" * 80
    assert envelope.names_run(nbfile.derived_id(long, "bob", "0a1b2c"), long)
    assert not envelope.names_run(nbfile.derived_id("x" * 20, "bob", "0a1b2c"), long)  # not cut short: not its own


def test_where_a_run_stands_is_read_from_its_signed_history_not_from_a_header_edited_beside_it(
    waiting: Path, tmp_path: Path
) -> None:
    """A header is outside the signatures (anyone can make its digest again): a run the header says is done
    while its history waits for an answer is listed as waiting."""
    from mkl_notebook.app.checkpoints import notebook_run_ids

    path = tmp_path / "shared.ipynb"
    notebook = json.loads(waiting.read_text(encoding="utf-8"))
    edited = 0
    for cell in notebook["cells"]:
        for output in cell.get("outputs", []):
            carried = output.get("data", {}).get(envelope.MIME_TYPE)
            if carried is None:
                continue
            _, records = envelope.verify(carried)
            header = {key: value for key, value in carried.items() if key not in ("journal", "digest")}
            header.update(status="done", at=None, ask=None, machine="somewhere-else")
            carried.update(header, digest=envelope._digest(header, records))
            edited += 1
    assert edited
    path.write_text(json.dumps(notebook), encoding="utf-8")
    assert nbfile.find_run(path, "r").header["status"] == "done"  # what the header says ...
    assert notebook_run_ids(path, waiting_only=True) == ["r"]  # ... is not where the run stands
