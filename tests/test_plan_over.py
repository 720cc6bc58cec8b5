"""``mkl plan MACHINE --over DIR`` / ``--store S``: every saved run of a machine, planned with the machine as it
is now; exit 1 when an edit puts answers people gave at stake (a CI gate), else 0.

A folder made for real, in process (the ``mkl`` command's own entry point, scripted answers, no model): a team's
run store with ten runs of ``flow`` (eight approved, two waiting at the gate), three notebooks carrying nine more
in their metadata (one of them also in the store: one history in two places), a run of another machine, and a
stranger's notebook whose approved run is signed by a key not trusted here. Twenty runs of ``flow`` in all are
this person's. The gate itself is run as CI runs it: ``mkl`` in a subprocess, its exit code read.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import nbformat
import pytest
import yaml

from mkl_notebook.app.deadlines import tick
from mkl_notebook.cli import main as mkl_main

from support import EXAMPLES, Cells, mkl_cli

LEGACY = Path(__file__).resolve().parent / "fixtures" / "legacy" / "runs.sqlite"

FLOW = """\
machine: flow
entry: research
budget: 8
result: sent
states:
  research:
    structure: Notes.
    prompt: "Research {{topic}}."
    output: notes
    gates: [{ when: otherwise, then: ok, to: draft }]
  draft:
    structure: A draft.
    prompt: "Draft from {{notes}}."
    output: draft
    gates:
      - { when: otherwise, escalate: true, to: send, ask: "Approve the draft?", reply_to: approval }
  send:
    structure: A confirmation.
    prompt: "Send {{draft}} ({{approval}})."
    output: sent
    gates: [{ when: otherwise, then: ok, to: END }]
"""
OTHER = """\
machine: other
entry: only
budget: 2
result: said
states:
  only:
    structure: A word.
    prompt: "Say a word."
    output: said
    gates: [{ when: otherwise, then: ok, to: END }]
"""
SCRIPT = {"llm": {"produce": {"Research": "notes", "Draft from": "draft text", "Send": "sent", "Say": "word"}}}
STORE_APPROVED = [f"s{n:02}" for n in range(1, 9)]
STORE_WAITING = ["s09"]
DECIDED = "s10"  # its question decided past its deadline by the run's rule (approve), not by a person
NOTEBOOKS = {  # notebook -> {run: approved}
    "team/a.ipynb": {"n11": True, "n12": True, "n13": True},
    "team/deep/b.ipynb": {"n14": True, "n15": True, "n16": False},
    "team/c.ipynb": {"n17": True, "n18": True, "n19": False, "s01": True},  # s01: the store's run, a copy
}
LOOSE = "n20"  # approved, kept in team/c.ipynb and nowhere else
APPROVED = [*STORE_APPROVED, "n11", "n12", "n13", "n14", "n15", "n17", "n18", LOOSE]
WAITING = [*STORE_WAITING, "n16", "n19"]


def _mkl(*args: str) -> dict[str, Any]:
    """``mkl ARGS`` in this process (the command's own entry point): its status line."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = mkl_main(list(args))
    status: dict[str, Any] = json.loads(out.getvalue().strip().splitlines()[-1])
    assert code in (0, 3), status
    return status


def _made(root: Path, store: Path, run_id: str, *, approve: bool, checkpoint: Path | None = None) -> None:
    """Run ``flow`` as ``run_id`` into ``store`` until its gate asks; approve it (as ada) when ``approve``. With
    ``checkpoint``, its checkpoint (sealed by this person's key) is written there too."""
    kept = ("--checkpoint", str(checkpoint)) if checkpoint is not None and not approve else ()
    common = ("--store", str(store), "--script", str(root / "s.yaml"))
    waits = _mkl("run", str(root / "flow.mkl"), "--id", run_id, "--hitl", "--set", f"topic={run_id}", *common, *kept)
    assert waits["status"] == "suspended"
    if approve:
        kept = ("--checkpoint", str(checkpoint)) if checkpoint is not None else ()
        reply = ("--question", waits["question_id"], "--reply", "approve", "--as", "ada")
        assert _mkl("resume", "--id", run_id, *reply, *common, *kept)["status"] == "done"


def _notebook(path: Path, checkpoints: dict[str, Path]) -> None:
    """A notebook carrying runs in its metadata only (as one does after its outputs were stripped)."""
    notebook = nbformat.v4.new_notebook()
    notebook.cells = [nbformat.v4.new_code_cell("%load_ext mkl_notebook")]
    runs = {run_id: json.loads(file.read_text(encoding="utf-8")) for run_id, file in checkpoints.items()}
    notebook.metadata["mkl"] = {"runs": runs}
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(notebook, path)


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("plan-over")
    (root / "flow.mkl").write_text(FLOW, encoding="utf-8")
    (root / "other.mkl").write_text(OTHER, encoding="utf-8")
    (root / "s.yaml").write_text(yaml.safe_dump(SCRIPT), encoding="utf-8")
    store = root / "team" / ".mkl" / "runs.sqlite"
    store.parent.mkdir(parents=True)
    scratch = Path(tempfile.mkdtemp(dir=root.parent))  # where the notebooks' runs were made: out of reach
    cps = scratch / "checkpoints"
    cps.mkdir()
    for run_id in STORE_APPROVED + STORE_WAITING:
        checkpoint = cps / f"{run_id}.json" if run_id == "s01" else None
        _made(root, store, run_id, approve=run_id in STORE_APPROVED, checkpoint=checkpoint)
    rule = ("--deadline", "1h", "--on-timeout", "approve")
    common = ("--store", str(store), "--script", str(root / "s.yaml"), *rule)
    _mkl("run", str(root / "flow.mkl"), "--id", DECIDED, "--hitl", "--set", f"topic={DECIDED}", *common)
    [decided] = tick([], [str(store)], now=time.time() + 2 * 3600).decided  # (as cron's tick, two hours on)
    assert decided.run == DECIDED
    other = ("--store", str(store), "--script", str(root / "s.yaml"), "--checkpoint", str(cps / "o1.json"))
    _mkl("run", str(root / "other.mkl"), "--id", "o1", *other)  # another machine's run, in a notebook too
    for name, runs in NOTEBOOKS.items():
        for run_id, approve in runs.items():
            if run_id != "s01":
                _made(root, scratch / "runs.sqlite", run_id, approve=approve, checkpoint=cps / f"{run_id}.json")
        carried = {run_id: cps / f"{run_id}.json" for run_id in runs}
        if name == "team/a.ipynb":
            carried["o1"] = cps / "o1.json"
        if name == "team/c.ipynb":
            _made(root, scratch / "runs.sqlite", LOOSE, approve=True, checkpoint=cps / f"{LOOSE}.json")
            carried[LOOSE] = cps / f"{LOOSE}.json"
        _notebook(root / name, carried)
    with pytest.MonkeyPatch.context() as patch:  # someone else, with their own key
        patch.setenv("JUPYTER_DATA_DIR", str(scratch / "stranger-jupyter"))
        _made(root, scratch / "stranger.sqlite", "x1", approve=True, checkpoint=cps / "x1.json")
    _notebook(root / "team" / "stranger.ipynb", {"x1": cps / "x1.json"})
    return root


@pytest.fixture
def edited(root: Path, tmp_path: Path) -> Iterator[Any]:
    """``edited(old, new)``: the machine file with one edit, beside the folder's own (as a branch has it)."""

    def edit(old: str, new: str) -> Path:
        assert old in FLOW
        path = tmp_path / "flow.mkl"
        path.write_text(FLOW.replace(old, new), encoding="utf-8")
        return path

    yield edit


def _everything(folder: Path) -> dict[str, str]:
    """Every file under ``folder`` with a digest of its bytes (a SQLite reader's ``-shm`` index left out)."""
    return {
        str(path.relative_to(folder)): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(folder.rglob("*"))
        if path.is_file() and not path.name.endswith("-shm")
    }


def _plan(root: Path, machine: Path, *where: str) -> tuple[int, list[dict[str, Any]], str]:
    code, status, out, err = mkl_cli(root, "plan", str(machine), *where, "--json")
    assert code in (0, 1), err
    listed, _ = out.splitlines()  # the rows, then the status line
    rows: list[dict[str, Any]] = json.loads(listed)
    assert status["status"] == ("invalidates" if code == 1 else "ok") and status["runs"] == len(rows)
    return code, rows, err


def _by_run(rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    trusted = [row for row in rows if row["trusted"]]
    assert len({row["run"] for row in trusted}) == len(trusted)  # each run planned once
    return {row["run"]: row for row in trusted}


def test_an_edit_after_the_gate_lists_the_runs_calling_anew_there_and_passes(root: Path, edited: Any) -> None:
    before = _everything(root)
    machine = edited('"Send {{draft}} ({{approval}})."', '"Deliver {{draft}} ({{approval}})."')
    code, rows, _ = _plan(root, machine, "--over", "team")
    assert _everything(root) == before  # reading only: no store made, no file written
    assert code == 0
    runs = _by_run(rows)
    assert sorted(runs) == sorted([*APPROVED, *WAITING, DECIDED]) and len(runs) == 20
    for run_id in APPROVED:
        assert runs[run_id]["replays"] == 2 and runs[run_id]["answers_kept"] == 1
        [anew] = runs[run_id]["calls_anew"]
        assert (anew["state"], anew["why"]) == ("send", "an edit changed its request")
        assert runs[run_id]["asked_again"] == [] and not runs[run_id]["invalidates"]
    for run_id in WAITING:  # they wait at the gate, before the edit: nothing anew
        assert runs[run_id]["calls_anew"] == [] and runs[run_id]["status"] == "suspended"
    [anew] = runs[DECIDED]["calls_anew"]
    assert anew["state"] == "send" and runs[DECIDED]["asked_again"] == []
    assert runs["s01"]["also_in"] and {runs["s01"]["where"], *runs["s01"]["also_in"]} == {
        "team/c.ipynb, metadata",
        "store team/.mkl/runs.sqlite",
    }
    [stranger] = [row for row in rows if not row["trusted"]]
    assert (stranger["run"], stranger["where"]) == ("x1", "team/stranger.ipynb, metadata")
    assert stranger["made_by"].startswith("made by an unknown key")


def test_an_edit_before_the_gate_lists_the_runs_whose_approvals_are_at_stake_and_fails(root: Path, edited: Any) -> None:
    machine = edited('"Draft from {{notes}}."', '"Redraft from {{notes}}."')
    code, rows, _ = _plan(root, machine, "--over", "team")
    assert code == 1
    runs = _by_run(rows)
    assert sorted(run_id for run_id, row in runs.items() if row["invalidates"]) == sorted(APPROVED)
    for run_id in APPROVED:
        [again] = runs[run_id]["asked_again"]
        assert (again["position"], again["value"], again["claimed"]) == ("root/1:draft#1/reply@0", "approve", "ada")
        assert [(call["state"], call["kind"]) for call in runs[run_id]["calls_anew"]] == [
            ("draft", "produce"),
            ("send", "produce"),
        ]
    for run_id in WAITING:  # re-drafted, but no one had approved anything
        assert [call["state"] for call in runs[run_id]["calls_anew"]] == ["draft"] and not runs[run_id]["invalidates"]
    [by_rule] = runs[DECIDED]["asked_again"]  # listed, but a deadline's decision is no one's approval
    assert (by_rule["via"], by_rule["person"], runs[DECIDED]["invalidates"]) == ("policy", False, False)
    [stranger] = [row for row in rows if not row["trusted"]]
    assert stranger["asked_again"] and not stranger["invalidates"]  # marked, listed, not counted

    code, status, out, _ = mkl_cli(root, "plan", str(machine), "--over", "team")
    assert code == 1 and status["status"] == "invalidates" and sorted(status["invalidating"]) == sorted(APPROVED)
    assert (status["runs"], status["untrusted"], status["skipped"]) == (21, 1, 1)
    assert "Answers people gave are at stake in 16 runs: " in out
    assert "may ask again at root/1:draft#1/reply@0: 'approve' by " in out
    assert "may decide again by its rule at root/1:draft#1/reply@0: 'approve' by policy" in out
    assert "NOT TRUSTED (made by an unknown key" in out


def test_the_machine_unchanged_replays_every_run_and_passes(root: Path) -> None:
    code, rows, _ = _plan(root, root / "flow.mkl", "--over", "team")
    assert code == 0 and all(row["calls_anew"] == [] and not row["asked_again"] for row in rows)


def test_a_store_alone_lists_its_runs_of_the_machine(root: Path, edited: Any) -> None:
    machine = edited('"Research {{topic}}."', '"Look up {{topic}}."')
    code, rows, _ = _plan(root, machine, "--store", "team/.mkl/runs.sqlite")
    assert code == 1
    runs = _by_run(rows)
    assert sorted(runs) == sorted([*STORE_APPROVED, *STORE_WAITING, DECIDED])
    assert sorted(run_id for run_id, row in runs.items() if row["invalidates"]) == STORE_APPROVED
    assert all(row["calls_anew"][0]["state"] == "research" for row in rows)


def test_where_the_runs_are_must_be_said_and_be_there(root: Path) -> None:
    code, status, _, _ = mkl_cli(root, "plan", "flow.mkl")
    assert code == 2 and "--over DIR or --store S" in status["error"]
    code, status, _, _ = mkl_cli(root, "plan", "flow.mkl", "--over", "nowhere")
    assert code == 2 and status["error"] == "nowhere: no such folder"
    code, status, _, _ = mkl_cli(root, "plan", "flow.mkl", "--id", "s01", "--over", "team")
    assert code == 2 and status["error"].startswith("--id plans one run of one store")


def test_the_notebook_plans_every_run_of_a_machine_as_defined_now(
    root: Path, ip: Cells, capsys: pytest.CaptureFixture[str]
) -> None:
    ip.define(FLOW.replace('"Draft from {{notes}}."', '"Redraft from {{notes}}."'))
    ip.out.clear()
    ip.run(f"%mkl plan flow --over {root / 'team'}")
    shown = ip.out.last("text/plain")["text/plain"]
    assert "Plan for the runs of flow with the machine as it is now (21 runs):" in shown
    assert "Answers people gave are at stake in 16 runs: " in shown
    assert "NOT TRUSTED (made by an unknown key" in shown
    ip.define(FLOW)
    ip.out.clear()
    ip.run(f"%mkl plan flow --store {root / 'team' / '.mkl' / 'runs.sqlite'}")
    shown = ip.out.last("text/plain")["text/plain"]
    assert "(10 runs)" in shown and "No answer a person gave (in a copy trusted here) would be asked again." in shown
    capsys.readouterr()
    ip.run(f"%mkl plan flow --over {root / 'team'} --json")
    rows = json.loads(capsys.readouterr().out)
    assert len(rows) == 21 and not any(row["invalidates"] for row in rows)


def test_a_store_of_an_earlier_release_is_planned_as_it_is_and_left_as_it_was(tmp_path: Path) -> None:
    """Reading only: a store an older release made is read, never migrated (a store opened to be written
    would be), nor is anything made beside it."""
    legacy = tmp_path / "old" / ".mkl" / "runs.sqlite"
    legacy.parent.mkdir(parents=True)
    shutil.copy(LEGACY, legacy)
    before = _everything(tmp_path), legacy.stat().st_mtime_ns
    code, status, _, err = mkl_cli(tmp_path, "plan", str(EXAMPLES / "refund.mkl"), "--over", "old")
    assert code in (0, 1) and status["runs"] >= 1, err
    assert (_everything(tmp_path), legacy.stat().st_mtime_ns) == before
