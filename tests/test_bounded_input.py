"""Input that would exhaust the machine ends in one clear line, in bounded time and memory.

Each case runs the real ``mkl`` command in a child process capped at 1 GiB of address space
and 60 s: a case that ran away would fail the test rather than the machine. The compressed
bombs are also held to what the issue asks of them: under 10 s and 500 MB at their peak.
"""

from __future__ import annotations

import base64
import json
import os
import resource
import sqlite3
import subprocess
import sys
import zlib
from pathlib import Path
from typing import Any

import pytest

from mkl_notebook.checkpoints import codecs, envelope
from mkl_notebook.checkpoints.journal_words import WORDS

from support import env_without_models

MEMORY_CAP = 1024**3
MACHINE = """mklang: "0.4"
machine: {name}
entry: a
budget: 4
states:
  a:
    structure: one line
    prompt: "say hi"
    output: o
    gates:
      - {{ when: otherwise, then: ok, to: END }}
"""
SCRIPT = "llm:\n  produce: ['hi']\n  judge: [0]\n"


def _cap() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_CAP, MEMORY_CAP))


def _run(folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``mkl ARGS`` in ``folder``, capped in memory and time."""
    return subprocess.run(
        [sys.executable, "-m", "mkl_notebook.cli", *args],
        cwd=folder,
        env=env_without_models(),
        capture_output=True,
        text=True,
        timeout=60,
        preexec_fn=_cap,
        check=False,
    )


def mkl(folder: Path, *args: str) -> tuple[int, str]:
    completed = _run(folder, *args)
    return completed.returncode, completed.stderr


def one_line(code: int, stderr: str) -> str:
    assert code != 0, stderr
    assert "Traceback" not in stderr and "MemoryError" not in stderr, stderr[-2000:]
    assert stderr.count("\n") == 1, stderr[-2000:]
    return stderr


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    (tmp_path / "script.yaml").write_text(SCRIPT, encoding="utf-8")
    return tmp_path


def _alias_bomb(tmp: Path) -> Path:
    """60 KB that would expand to 600 MB: a long string, aliased ten times, four times over."""
    lines = ['mklang: "0.4"', "machine: bomb", "entry: a", "context:", f"  s0: &s0 {'x' * 60_000}"]
    for level in range(1, 5):  # 10,000 copies: few values, 600 MB of text
        lines.append(f"  s{level}: &s{level} [{', '.join([f'*s{level - 1}'] * 10)}]")
    body = MACHINE.format(name="bomb").split("states:", 1)[1]
    path = tmp / "bomb.mkl"
    path.write_text("\n".join(lines) + "\nstates:" + body, encoding="utf-8")
    return path


@pytest.mark.parametrize("command", ["check", "run"])
def test_a_yaml_alias_bomb_is_refused_in_one_line(folder: Path, command: str) -> None:
    bomb = _alias_bomb(folder)
    assert bomb.stat().st_size < 70_000
    if command == "check":
        completed = _run(folder, "check", bomb.name)
        assert completed.returncode != 0 and "Traceback" not in completed.stderr, completed.stderr[-2000:]
        assert "expands to more than" in completed.stdout  # mkl check reports findings on stdout
        return
    error = one_line(*mkl(folder, "run", bomb.name, "--script", "script.yaml"))
    assert "expands to more than" in error


def test_a_yaml_alias_bomb_in_a_script_is_refused_before_any_answer_is_used(folder: Path) -> None:
    """A script's answers are written into the journal as JSON, which would expand every alias."""
    chain = ["&s0 " + "x" * 60_000] + [f"&s{level} [{', '.join([f'*s{level - 1}'] * 10)}]" for level in range(1, 5)]
    (folder / "bomb.yaml").write_text(f"tools:\n  t: [[{', '.join(chain)}]]\n", encoding="utf-8")
    machine = MACHINE.format(name="tool").replace('structure: one line\n    prompt: "say hi"', "tool: t\n    input: {}")
    (folder / "tool.mkl").write_text(machine, encoding="utf-8")
    error = one_line(*mkl(folder, "run", "tool.mkl", "--script", "bomb.yaml"))
    assert "bomb.yaml: the YAML does not parse (the document expands to more than 16,000,000 characters)" in error
    shared = "tools:\n  t: [&one {a: 1}, *one]\n"  # an alias that stays small is read as ever
    (folder / "shared.yaml").write_text(shared, encoding="utf-8")
    code, stderr = mkl(folder, "run", "tool.mkl", "--script", "shared.yaml")
    assert code == 0, stderr


def test_a_machine_file_too_large_is_refused(folder: Path) -> None:
    big = folder / "big.mkl"
    big.write_text(MACHINE.format(name="big") + "# " + "x" * (5 * 1024 * 1024) + "\n", encoding="utf-8")
    error = one_line(*mkl(folder, "run", big.name, "--script", "script.yaml"))
    assert "more than the 4.0 MB" in error


def test_a_pipe_or_a_device_beside_the_machine_is_never_read(folder: Path) -> None:
    """``mkl run`` reads sibling .mkl files only for a ``call:``, and only regular files."""
    calling = MACHINE.format(name="main").replace(
        '    structure: one line\n    prompt: "say hi"\n', "    call: helper\n    input: {}\n"
    )
    (folder / "main.mkl").write_text(calling, encoding="utf-8")
    (folder / "helper.mkl").write_text(MACHINE.format(name="helper"), encoding="utf-8")
    os.mkfifo(folder / "pipe.mkl")  # opening it would block forever
    os.symlink("/dev/zero", folder / "zero.mkl")  # reading it would never end
    code, stderr = mkl(folder, "run", "main.mkl", "--script", "script.yaml")
    assert code == 0, stderr
    (folder / "alone.mkl").write_text(MACHINE.format(name="alone"), encoding="utf-8")
    code, stderr = mkl(folder, "run", "alone.mkl", "--script", "script.yaml")
    assert code == 0, stderr


def test_a_pipe_as_the_machine_or_the_script_is_one_line(folder: Path) -> None:
    (folder / "ok.mkl").write_text(MACHINE.format(name="ok"), encoding="utf-8")
    os.mkfifo(folder / "pipe.yaml")
    assert "not a regular file" in one_line(*mkl(folder, "run", "ok.mkl", "--script", "pipe.yaml"))
    os.symlink("/dev/zero", folder / "zero.mkl")
    assert "not a regular file" in one_line(*mkl(folder, "run", "zero.mkl", "--script", "script.yaml"))


DEEP = "[" * 200_000 + "]" * 200_000


def test_deeply_nested_json_input_is_one_line(folder: Path) -> None:
    (folder / "ok.mkl").write_text(MACHINE.format(name="ok"), encoding="utf-8")
    (folder / "deep.json").write_text(DEEP, encoding="utf-8")
    argument = "[" * 20_000 + "]" * 20_000  # as deep as a command line argument can be
    assert "nests too deeply" in one_line(*mkl(folder, "run", "ok.mkl", "--script", "script.yaml", "--input", argument))
    assert "nests too deeply" in one_line(
        *mkl(folder, "run", "ok.mkl", "--script", "script.yaml", "--input", "@deep.json")
    )


def test_a_deeply_nested_script_is_one_line(folder: Path) -> None:
    (folder / "ok.mkl").write_text(MACHINE.format(name="ok"), encoding="utf-8")
    (folder / "deep.yaml").write_text("llm: " + "[" * 100_000 + "]" * 100_000 + "\n", encoding="utf-8")
    one_line(*mkl(folder, "run", "ok.mkl", "--script", "deep.yaml"))


def test_deeply_nested_notebooks_and_checkpoints_are_one_line(folder: Path) -> None:
    (folder / "deep.ipynb").write_text('{"cells": ' + DEEP + "}", encoding="utf-8")
    assert "nests too deeply" in one_line(*mkl(folder, "runs", "deep.ipynb"))
    (folder / "deep.json").write_text(DEEP, encoding="utf-8")
    assert "nests too deeply" in one_line(*mkl(folder, "resume", "deep.json"))


def test_a_notebook_whose_outputs_are_not_a_list_reads_as_holding_no_run(folder: Path) -> None:
    notebook = {"cells": [{"cell_type": "code", "source": "", "outputs": 5, "metadata": {}}], "metadata": {}}
    (folder / "odd.ipynb").write_text(json.dumps(notebook), encoding="utf-8")
    _, stderr = mkl(folder, "runs", "odd.ipynb")
    assert "Traceback" not in stderr
    error = one_line(*mkl(folder, "resume", "odd.ipynb", "--run", "r", "--max-steps", "3"))
    assert "holds no checkpoint of run 'r'" in error


def test_a_checkpoint_in_a_missing_folder_is_refused_before_anything_runs(folder: Path) -> None:
    (folder / "ok.mkl").write_text(MACHINE.format(name="ok"), encoding="utf-8")
    error = one_line(
        *mkl(folder, "run", "ok.mkl", "--script", "script.yaml", "--id", "r", "--checkpoint", "nowhere/cp.json")
    )
    assert "does not exist" in error
    store = folder / ".mkl" / "runs.sqlite"
    if store.exists():
        with sqlite3.connect(store) as db:
            assert db.execute("SELECT COUNT(*) FROM records").fetchone() == (0,)  # nothing was journaled


# -- compressed journals, row files and --checkpoint (issue 34) ------------------------------------------

WALL_BOUND = 10.0  # seconds: the bounds the issue names for a bomb, far above what a refusal takes
RSS_BOUND = 500 * 1024 * 1024  # bytes of the child's peak resident memory


# Runs ``mkl`` as its one child and says how long that took and its peak RSS: a launcher of its own, so that the
# peak is not the test process's (a forked child counts its parent's pages until it execs).
LAUNCHER = """
import json, resource, subprocess, sys, time
def cap():
    resource.setrlimit(resource.RLIMIT_AS, (2**30, 2**30))
    resource.setrlimit(resource.RLIMIT_CPU, (60, 60))
began = time.monotonic()
code = subprocess.call([sys.executable, "-m", "mkl_notebook.cli", *sys.argv[2:]], preexec_fn=cap)
took = time.monotonic() - began
peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024
open(sys.argv[1], "w").write(json.dumps([code, took, peak]))
"""


def measured(folder: Path, *args: str) -> tuple[int, str, float, int]:
    """``mkl ARGS`` in ``folder``: its exit code, its stderr, the seconds it took and its peak RSS in bytes."""
    launched = subprocess.run(
        [sys.executable, "-c", LAUNCHER, str(folder / ".measured"), *args],
        cwd=folder,
        env=env_without_models(),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    (folder / ".stdout").write_text(launched.stdout, encoding="utf-8")
    code, took, peak = json.loads((folder / ".measured").read_text(encoding="utf-8"))
    return code, launched.stderr, took, peak


def bounded_line(folder: Path, *args: str) -> str:
    """The one line ``mkl ARGS`` ends with (exit 2), within the issue's bounds of time and memory."""
    code, stderr, took, peak = measured(folder, *args)
    assert code == 2, stderr[-2000:]
    one_line(code, stderr)
    assert took < WALL_BOUND, f"took {took:.1f} s: {stderr}"
    assert peak < RSS_BOUND, f"peaked at {peak / 2**20:.0f} MB: {stderr}"
    return stderr


START = b'{"kind":"start","run_id":"bomb"},'
Pieces = tuple[tuple[bytes, int], ...]  # text as (piece, times repeated), compressed without being held whole


def _packed(pieces: Pieces, encoding: str) -> str:
    """``pieces`` compressed as a journal in ``encoding`` (today's, with the preset dictionary, or the first)."""
    packer = zlib.compressobj(9, zdict=WORDS) if encoding == envelope.PACKED else zlib.compressobj(9)
    packed = []
    for piece, times in pieces:
        while times > 0:
            step = min(times, 1 << 20)
            packed.append(packer.compress(piece * step))
            times -= step
    encode = base64.b85encode if encoding == envelope.PACKED else base64.b64encode
    return encode(b"".join(packed) + packer.flush()).decode("ascii")


def _bombs() -> dict[str, tuple[Pieces, int]]:
    """Journals that inflate from a few bytes to what would take the machine down, and their record counts."""
    wide = 31 * 1024 * 1024 // 3  # just under the 32 MB a journal may inflate to: ten million objects
    big = 150 * 1024 * 1024 // 3
    return {
        "deep": (((b"[", 100_000), (b"]", 100_000)), 1),  # 650 bytes: a RecursionError once
        "wide": (((b"[", 1), (START, 1), (b"{},", wide), (b"{}]", 1)), wide + 2),  # 42 KB: gigabytes as objects
        "big": (((b"[", 1), (START, 1), (b"{},", big), (b"{}]", 1)), big + 2),  # 200 KB: 150 MB; 4 GB, 17 s once
    }


BOMBS = _bombs()


def bomb_checkpoint(name: str, run_id: str = "bomb", encoding: str = envelope.PACKED) -> dict[str, Any]:
    """A checkpoint envelope whose compressed journal is bomb ``name`` (its digest is never reached)."""
    pieces, count = BOMBS[name]
    header = dict.fromkeys(("machine", "status", "error", "at", "ask", "reply_to", "question", "options"))
    return {
        "format": "mkl-run/1",
        "package": "mkl-notebook 0",
        "run_id": run_id,
        **header,
        "machines": [],
        "journal": {"encoding": encoding, "count": count, "data": _packed(pieces, encoding)},
        "digest": "0" * 64,
    }


@pytest.mark.parametrize("encoding", [envelope.PACKED, codecs.PACKED_BEFORE])
@pytest.mark.parametrize("bomb", sorted(BOMBS))
def test_a_compressed_journal_bomb_in_a_checkpoint_file_is_one_line(folder: Path, bomb: str, encoding: str) -> None:
    path = folder / "bomb.json"
    path.write_text(json.dumps(bomb_checkpoint(bomb, encoding=encoding)), encoding="utf-8")
    kept = path.read_bytes()
    assert len(kept) < 210_000  # what arrives is small: it is what it inflates to that is not
    expected = {"deep": "nests too deeply", "wide": "holds too many values", "big": "inflates to more than 32 MB"}
    for command in (["resume", path.name, "--script", "script.yaml"], ["trust", path.name]):
        error = bounded_line(folder, *command)
        assert f"bomb.json: the checkpoint's journal {expected[bomb]}" in error
    assert path.read_bytes() == kept


def _good_checkpoint(folder: Path) -> dict[str, Any]:
    (folder / "ok.mkl").write_text(MACHINE.format(name="ok"), encoding="utf-8")
    code, stderr = mkl(folder, "run", "ok.mkl", "--script", "script.yaml", "--id", "good", "--checkpoint", "good.json")
    assert code == 0, stderr
    return json.loads((folder / "good.json").read_text(encoding="utf-8"))


def test_compressed_bombs_in_a_notebook_are_damaged_runs_beside_its_good_one(folder: Path) -> None:
    """Each bomb is one damaged run, refused in bounded time and memory; the notebook's other run is listed."""
    bombs = {name: bomb_checkpoint(name, run_id=f"bomb-{name}") for name in BOMBS}
    notebook = {
        "cells": [
            {
                "cell_type": "code",
                "id": f"c{index}",
                "source": "%mkl run ok.mkl",
                "metadata": {},
                "execution_count": index + 1,
                "outputs": [
                    {"output_type": "display_data", "metadata": {}, "data": {"application/vnd.mkl.run+json": bomb}}
                ],
            }
            for index, bomb in enumerate([bombs["big"], bombs["wide"]])
        ],
        "metadata": {"mkl": {"runs": {"good": _good_checkpoint(folder), "bomb-deep": bombs["deep"]}}},
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    (folder / "nb.ipynb").write_text(json.dumps(notebook), encoding="utf-8")
    code, stderr, took, peak = measured(folder, "runs", "nb.ipynb")
    assert "Traceback" not in stderr and took < WALL_BOUND and peak < RSS_BOUND, (took, peak, stderr[-2000:])
    assert code == 1  # listed, with damage to report
    listed = (folder / ".stdout").read_text(encoding="utf-8")
    assert "good  ok  done" in listed, listed
    assert "bomb-big  damaged checkpoint in cell 1: not used" in listed and "inflates to more than 32 MB" in listed
    assert "bomb-wide  damaged checkpoint in cell 2: not used" in listed and "too many values" in listed
    assert "bomb-deep  damaged checkpoint in metadata: not used" in listed and "nests too deeply" in listed
    kept = (folder / "nb.ipynb").read_bytes()
    for name in BOMBS:
        error = bounded_line(folder, "resume", "nb.ipynb", "--run", f"bomb-{name}", "--script", "script.yaml")
        assert "nb.ipynb, " in error and "the checkpoint's journal" in error
    assert (folder / "nb.ipynb").read_bytes() == kept  # nothing in the notebook was lost or overwritten


def test_the_journals_of_one_notebook_inflate_within_one_bound_together(folder: Path) -> None:
    """Five journals of 31 MB each (30 KB apiece in the file) are more than one notebook's journals may inflate to
    together: the one past 128 MB is not inflated at all, so reading the notebook stays bounded."""
    many = 5
    text = bomb_checkpoint("deep")
    text["journal"]["data"] = _packed(((b'["', 1), (b"x", 31 * 1024 * 1024), (b'"]', 1)), envelope.PACKED)
    outputs = [{"output_type": "display_data", "metadata": {}, "data": {"application/vnd.mkl.run+json": text}}]
    cell = {"cell_type": "code", "source": "", "metadata": {}, "execution_count": 1, "outputs": outputs}
    notebook = {"cells": [{**cell, "id": f"c{index}"} for index in range(many)], "metadata": {}}
    (folder / "nb.ipynb").write_text(json.dumps({**notebook, "nbformat": 4, "nbformat_minor": 5}), encoding="utf-8")
    code, stderr, took, peak = measured(folder, "runs", "nb.ipynb")
    assert code == 1 and "Traceback" not in stderr, stderr[-2000:]
    assert took < WALL_BOUND and peak < RSS_BOUND, (took, peak)
    listed = [line for line in (folder / ".stdout").read_text(encoding="utf-8").splitlines() if line[0] != "{"]
    read = [line for line in listed if "is not a list of records" in line]
    unread = [line for line in listed if "compressed journals inflate to more than 128 MB together" in line]
    assert (len(read), len(unread)) == (4, 1), listed
    assert "cell 5" in unread[0]


def test_deep_keys_and_settings_are_one_line(folder: Path) -> None:
    (folder / "ok.mkl").write_text(MACHINE.format(name="ok"), encoding="utf-8")
    key = "a." * 60_000 + "b=1"  # as deep as a command line argument can be
    assert "the key nests too deeply" in one_line(
        *mkl(folder, "run", "ok.mkl", "--script", "script.yaml", "--set", key)
    )
    (folder / "pyproject.toml").write_text("[tool.mkl]\nmodel = " + "[" * 100_000 + "]" * 100_000, encoding="utf-8")
    error = one_line(*mkl(folder, "run", "ok.mkl"))
    assert "pyproject.toml: nests too deeply to be read as TOML" in error


def test_a_model_answer_nested_too_deeply_halts_the_run_as_any_answer_that_is_not_json(folder: Path) -> None:
    machine = MACHINE.format(name="js").replace("    output: o\n", "    output: o\n    parse: json\n")
    (folder / "js.mkl").write_text(machine, encoding="utf-8")
    script = {"llm": {"produce": ["[" * 50_000 + "]" * 50_000], "judge": [0]}}
    (folder / "deep.yaml").write_text(json.dumps(script), encoding="utf-8")
    completed = _run(folder, "run", "js.mkl", "--script", "deep.yaml")
    assert "Traceback" not in completed.stderr, completed.stderr[-2000:]
    status = json.loads(completed.stdout.splitlines()[-1])
    assert status["status"] == "halt"
    assert "parse-json: output is not valid JSON (nests too deeply (more than 200 levels))" in status["error"]


@pytest.mark.parametrize("suffix", [".json", ".jsonl"])
def test_deeply_nested_rows_are_one_line(folder: Path, suffix: str) -> None:
    (folder / "ok.mkl").write_text(MACHINE.format(name="ok"), encoding="utf-8")
    row = '{"x": ' + "[" * 100_000 + "]" * 100_000 + "}"
    (folder / f"rows{suffix}").write_text(f"[{row}]" if suffix == ".json" else f'{{"x": 1}}\n{row}\n')
    error = bounded_line(folder, "map", "ok.mkl", "--over", f"rows{suffix}", "--script", "script.yaml")
    where = f"rows{suffix}" if suffix == ".json" else f"rows{suffix}, line 2"  # a .jsonl row is read line by line
    assert f"--over {where}: nests too deeply (more than 200 levels)" in error
    assert not (folder / ".mkl" / "runs.sqlite").exists() or _journaled(folder) == 0


def _journaled(folder: Path) -> int:
    with sqlite3.connect(folder / ".mkl" / "runs.sqlite") as db:
        return int(db.execute("SELECT COUNT(*) FROM records").fetchone()[0])


@pytest.mark.parametrize("command", ["run", "resume"])
def test_a_checkpoint_naming_a_folder_is_refused_before_anything_runs(folder: Path, command: str) -> None:
    (folder / "ok.mkl").write_text(MACHINE.format(name="ok"), encoding="utf-8")
    (folder / "out").mkdir()
    if command == "resume":
        _good_checkpoint(folder)
        before = _journaled(folder)
        args = ["resume", "good.json", "--script", "script.yaml", "--checkpoint", "out"]
    else:
        before = 0
        args = ["run", "ok.mkl", "--script", "script.yaml", "--id", "r", "--checkpoint", "out"]
    error = one_line(*mkl(folder, *args))
    assert "--checkpoint out: is a folder" in error
    assert mkl(folder, *args)[0] == 2
    assert not (folder / ".mkl" / "runs.sqlite").exists() or _journaled(folder) == before  # nothing was journaled
    assert list((folder / "out").iterdir()) == []


def test_a_pipe_where_a_run_store_should_be_is_refused_in_one_line_and_never_opened(folder: Path) -> None:
    """A folder someone handed over, its `.mkl/runs.sqlite` a FIFO: listing the folder, or naming it as the
    store, would block for good on opening it; each says in one line that it is no run store."""
    (folder / ".mkl").mkdir()
    os.mkfifo(folder / ".mkl" / "runs.sqlite")
    listed = _run(folder, "runs", ".")
    assert "Traceback" not in listed.stderr, listed.stderr
    assert "runs.sqlite: is not a regular file, so not a run store" in listed.stdout + listed.stderr
    assert "not a regular file" in one_line(*mkl(folder, "runs", "--store", ".mkl/runs.sqlite"))
    (folder / "ok.mkl").write_text(MACHINE.format(name="ok"), encoding="utf-8")
    assert "not a regular file" in one_line(*mkl(folder, "run", "ok.mkl", "--script", "script.yaml"))
