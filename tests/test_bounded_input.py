"""Input that would exhaust the machine ends in one clear line, in bounded time and memory.

Each case runs the real ``mkl`` command in a child process capped at 1 GiB of address space
and 60 s: a case that ran away would fail the test rather than the machine.
"""

from __future__ import annotations

import json
import os
import resource
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

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
