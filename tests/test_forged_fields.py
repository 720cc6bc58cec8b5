"""A checkpoint whose fields were retyped, with its digest recomputed, is refused in one line.

The digest chain is plain sha256: anyone who edits a checkpoint can recompute it. So every field
of every record is checked by type before a journal from a file is imported: each of hundreds of
forged variants of a real checkpoint gives one line and leaves the store as it was.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from mkl_notebook import cli
from mkl_notebook.app.trust import Keyring
from mkl_notebook.checkpoints import envelope
from mkl_notebook.durable.reading import run_state

from support import REFUND, REFUND_SCRIPT, store_rows

WRONG = (7, -1, 2.5, True, None, "zz", "", [], [1, "x"], {}, {"a": 1})


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """A real run's checkpoint: the refund machine suspended at its approval, with answers and tools."""
    folder = tmp_path_factory.mktemp("real")
    (folder / "refund.mkl").write_text(REFUND, encoding="utf-8")
    argv = ["run", str(folder / "refund.mkl"), "--id", "r", "--hitl", "--script", str(REFUND_SCRIPT)]
    argv += ["--set", "ticket=broken", "--store", str(folder / "s.sqlite"), "--checkpoint", str(folder / "cp.json")]
    assert cli.main([*argv, "--quiet"]) == 3
    header, records, _ = envelope.read_file(folder / "cp.json")
    return header, records


def _sealed(header: dict[str, Any], records: list[dict[str, Any]]) -> str:
    """A forged envelope sealed with the tests' own (trusted) key: its fields, not its seal, get it refused."""
    return json.dumps(envelope.build(header, records, signer=Keyring().signer()))


def _mutations(header: dict[str, Any], records: list[dict[str, Any]]) -> list[tuple[str, dict, list]]:
    """Every field of the header and of every record, set to each wrongly typed value in turn."""
    found = []
    for key, value in header.items():
        if key == "format":
            continue
        for wrong in WRONG:
            if type(wrong) is not type(value) and not (value is None and wrong is None):
                changed = dict(header, **{key: wrong})
                found.append((f"header.{key}={wrong!r}", changed, records))
    for number, record in enumerate(records):
        for key, value in record.items():
            if key in ("value", "resolved"):  # a reply's value and a flag may be anything
                continue
            for wrong in WRONG:
                if type(wrong) is type(value) or (key == "machine" and isinstance(wrong, str)):
                    continue
                forged = copy.deepcopy(records)
                forged[number][key] = wrong
                found.append((f"record {number + 1} ({record['t']}).{key}={wrong!r}", header, forged))
    return found


def test_hundreds_of_retyped_fields_are_each_one_line_and_leave_the_store_untouched(
    checkpoint: tuple[dict[str, Any], list[dict[str, Any]]], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    header, records = checkpoint
    store = tmp_path / "approver.sqlite"
    mutations = _mutations(header, records)
    assert len(mutations) >= 200
    refused = 0
    for label, forged_header, forged_records in mutations:
        path = tmp_path / "forged.json"
        path.write_text(_sealed(forged_header, forged_records), encoding="utf-8")
        before = store_rows(store)
        capsys.readouterr()
        code = cli.main(["resume", str(path), "--store", str(store), "--max-steps", "9", "--quiet"])
        error = capsys.readouterr().err
        assert "Traceback" not in error, label
        if code == 2:
            assert error.count("\n") == 1, (label, error)
            assert store_rows(store) == before, label  # refused: the store is as it was
            refused += 1
    assert refused >= 0.9 * len(mutations), (refused, len(mutations))  # a retyped field is refused


def test_a_retyped_secret_is_refused_naming_the_record_and_field(
    checkpoint: tuple[dict[str, Any], list[dict[str, Any]]], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    header, records = checkpoint
    forged = copy.deepcopy(records)
    forged[0]["secret"] = "not hex at all"
    path = tmp_path / "forged.json"
    path.write_text(_sealed(header, forged), encoding="utf-8")
    assert cli.main(["resume", str(path), "--store", str(tmp_path / "s.sqlite"), "--quiet"]) == 2
    error = capsys.readouterr().err
    assert "record 1 ('start') has a wrongly typed field 'secret'" in error
    assert not (tmp_path / "s.sqlite").exists() or store_rows(tmp_path / "s.sqlite") == []


@pytest.mark.parametrize("decoy", ["machine", "secret file"])
def test_a_forged_origin_path_is_never_followed_even_when_the_file_is_taken_up_anyway(
    checkpoint: tuple[dict[str, Any], list[dict[str, Any]]],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    decoy: str,
) -> None:
    """The start record names the machine file the run was started from; in someone's file that is their path
    (or a forged one), so resuming it reads nothing there: not another machine, not a file of this person's."""
    header, records = checkpoint
    target = tmp_path / "elsewhere.mkl"
    if decoy == "machine":  # followed, it would refuse: "machine 'refund' changed since run 'r' started"
        target.write_text(REFUND.replace("Approve", "Approve at once"), encoding="utf-8")
    else:
        target.write_text("root:x:0:0:PRIVATE-LINE:/root:/bin/bash\n", encoding="utf-8")
    forged = copy.deepcopy(records)
    forged[0]["origin"] = {"path": str(target)}
    path = tmp_path / "forged.json"
    path.write_text(_sealed(header, forged), encoding="utf-8")
    question = run_state(records).question_id("r")
    argv = ["resume", str(path), "--trust-file", "--store", str(tmp_path / "s.sqlite"), "--script", str(REFUND_SCRIPT)]
    argv += ["--max-steps", "20", "--question", str(question), "--reply", "approve", "--quiet"]
    assert cli.main(argv) == 0, capsys.readouterr().err
    shown = capsys.readouterr()
    assert "PRIVATE-LINE" not in shown.out + shown.err and "changed since" not in shown.err


def test_an_origin_that_is_not_a_path_is_refused_in_one_line(
    checkpoint: tuple[dict[str, Any], list[dict[str, Any]]], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    header, records = checkpoint
    forged = copy.deepcopy(records)
    forged[0]["origin"] = {"path": 5}
    path = tmp_path / "forged.json"
    path.write_text(_sealed(header, forged), encoding="utf-8")
    assert cli.main(["resume", str(path), "--trust-file", "--store", str(tmp_path / "s.sqlite"), "--quiet"]) == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and "origin" in error, error


def test_a_history_read_again_is_checked_as_it_is_now_not_as_it_was_first_read() -> None:
    """The signatures a view reads several times are checked once per history object and length: one that grew
    is checked again, and a copy of it that someone changed is checked on its own (never given the first's)."""
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    from mkl_notebook.checkpoints.seals import Signer, signatures

    signer = Keyring().signer()
    records: list[dict[str, Any]] = [{"t": "start", "run": "r"}, {"t": "step", "n": 0}]
    records.append(dict(signer.endorse(records)))
    assert [(s.start, s.end, s.seal is not None and s.seal.holds) for s in signatures(records)] == [(0, 2, True)]
    records.append({"t": "step", "n": 1})  # the same history, grown
    assert [(s.start, s.end) for s in signatures(records)] == [(0, 2), (3, 4)]
    changed = [dict(record) for record in records]
    changed[1]["n"] = 9  # a copy whose signed stretch was altered
    assert next(s.seal is not None and s.seal.holds for s in signatures(changed)) is False
    assert next(s.seal is not None and s.seal.holds for s in signatures(records)) is True
    # A signature once found to hold is not checked again, but only for those very bytes: another signature put
    # in its place (here another key's over the same history, the key named left as it was) is checked anew.
    forged = [dict(record) for record in records]
    forged[2]["sig"] = Signer(Ed25519PrivateKey.generate(), "mallory").endorse(records[:2])["sig"]
    assert next(s.seal is not None and s.seal.holds for s in signatures(forged)) is False
    assert next(s.seal is not None and s.seal.holds for s in signatures(records)) is True


def test_a_history_digested_again_is_digested_as_it_is_now() -> None:
    """The digests of a history's prefix are taken from a recent digest of the same record objects, never from one
    of other records of the same length: a grown history and an altered copy each digest as from scratch."""
    from mkl_notebook.durable.chain import canonical, chain_digest, chain_start

    def from_scratch(records: list[dict[str, Any]]) -> bytes:
        import hashlib

        digest = chain_start()
        for record in records:
            digest = hashlib.sha256(digest + canonical(record).encode("utf-8")).digest()
        return digest

    records: list[dict[str, Any]] = [{"t": "start", "run": "r"}, *({"t": "step", "n": n} for n in range(5))]
    assert chain_digest(records) == from_scratch(records)
    records.append({"t": "step", "n": 5})  # grown
    assert chain_digest(records) == from_scratch(records)
    altered = [*records[:3], {"t": "step", "n": 99}, *records[4:]]  # the same length, one record another's
    assert chain_digest(altered) == from_scratch(altered) != chain_digest(records)
    assert chain_digest(records[:4]) == from_scratch(records[:4])  # a prefix of one digested
