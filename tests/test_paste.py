"""Every command a run prints for a person to paste works as printed, in a shell whose PATH lacks the venv.

A person who followed the README has not activated the venv: plain ``mkl`` is not found there (rc 127). The
commands printed after ``mkl run``, by ``mkl runs`` (a store and a folder), after ``mkl map --hitl`` and after
``mkl resume FILE`` name this installation's script by its path, every flag the run was made with (its
script, a store that is not the default), and a reply that pastes as an answer, never a placeholder.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from support import REFUND, REFUND_SCRIPT, ROOT, env_without_models, mkl_cli, store_rows

VENV_BIN = Path(sys.executable).parent
PROGRAM = shlex.quote(str(VENV_BIN / "mkl"))  # what the commands start with where `mkl` is not on PATH
TICKET = "ticket=Parcel A-1001 arrived broken, refund please"
STORE = "my runs.sqlite"  # not the default store, and a name that must be quoted


def _unactivated() -> dict[str, str]:
    """The environment of a person who did not activate the venv: its bin is not on PATH."""
    path = os.pathsep.join(
        part for part in os.environ.get("PATH", "").split(os.pathsep) if part and Path(part) != VENV_BIN
    )
    return {**env_without_models(), "PATH": path}


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    (tmp_path / "refund.mkl").write_text(REFUND, encoding="utf-8")
    shutil.copy(REFUND_SCRIPT, tmp_path / "refund.script.yaml")
    (tmp_path / "rows.jsonl").write_text('{"ticket": "A-1 broken"}\n{"ticket": "B-2 broken"}\n', encoding="utf-8")
    return tmp_path


def _mkl(folder: Path, *args: str) -> tuple[int, str]:
    code, _, out, err = mkl_cli(folder, *args, env=_unactivated())
    assert not err.strip() or code in (0, 3), err
    return code, out


def _printed(out: str) -> list[str]:
    """The commands a person is shown in ``out``: every line's part from the program on, up to a closing
    backquote when it is quoted in a sentence (not the status line)."""
    commands = []
    for line in out.splitlines():
        if PROGRAM in line and not line.startswith("{"):
            start = line.index(PROGRAM)
            quoted = start > 0 and line[start - 1] == "`"
            commands.append(line[start : line.index("`", start)] if quoted else line[start:])
    return commands


def _paste(folder: Path, command: str) -> subprocess.CompletedProcess[str]:
    """``command`` pasted into bash, in ``folder``, without the venv on PATH."""
    return subprocess.run(
        ["bash", "-c", command], cwd=folder, env=_unactivated(), capture_output=True, text=True, timeout=120
    )


def _run(folder: Path, run_id: str, *more: str) -> str:
    code, out = _mkl(folder, "run", "refund.mkl", "--id", run_id, "--hitl", "--script", "refund.script.yaml", *more)
    assert code == 3, out
    return out


def test_every_printed_continue_command_pastes_into_a_shell_without_the_venv(folder: Path) -> None:
    env = _unactivated()
    assert shutil.which("mkl", path=env["PATH"]) is None  # as for the newcomer: bare `mkl` is not found
    assert _paste(folder, "mkl --help").returncode == 127

    shown: dict[str, list[str]] = {}
    shown["mkl run"] = _printed(_run(folder, "r-run", "--set", TICKET))
    _run(folder, "r-store", "--set", TICKET, "--store", STORE)
    shown["mkl runs STORE"] = _printed(_mkl(folder, "runs", STORE)[1])
    _run(folder, "r-dir", "--set", TICKET)
    shown["mkl runs DIR"] = [c for c in _printed(_mkl(folder, "runs", ".")[1]) if "--id r-dir " in c]
    _run(folder, "r-file", "--set", TICKET, "--store", "other.sqlite", "--checkpoint", "cp.json")
    code, out = _mkl(folder, "resume", "cp.json", "--store", "third.sqlite")  # taken up elsewhere, no reply
    assert code == 3, out
    shown["mkl resume FILE"] = _printed(out)
    code, out = _mkl(
        folder,
        "map",
        "refund.mkl",
        "--over",
        "rows.jsonl",
        "--hitl",
        "--script",
        "refund.script.yaml",
        "--store",
        STORE,
    )
    assert code == 3, out
    listing, *shown["mkl map --hitl"] = _printed(out)
    assert listing == f"{PROGRAM} runs {shlex.quote(STORE)}"
    assert len(_printed(_paste(folder, listing).stdout)) == 2 * 3  # lists r-store's and the two rows' questions

    for source, commands in shown.items():
        assert commands, f"{source} printed no command"
        for command in commands:
            words = shlex.split(command.split("  #")[0])
            assert "…" not in command and "..." not in command, command
            assert words[words.index("--script") + 1] == "refund.script.yaml", command  # the run was made with it
            if source in ("mkl runs STORE", "mkl map --hitl", "mkl resume FILE"):
                store = "third.sqlite" if source == "mkl resume FILE" else STORE
                assert words[words.index("--store") + 1] == store, command
        approve = [command for command in commands if command.endswith(" --reply approve")]
        reject = [command for command in commands if command.endswith(" --reply reject")]
        assert approve and len(approve) == len(reject) == len(commands) // 2, commands
    # Each pasted as printed: every run of a row a command was printed for finishes (an approval and a rejection).
    pasted = [
        shown["mkl run"][0],
        shown["mkl runs STORE"][1],
        shown["mkl runs DIR"][0],
        shown["mkl resume FILE"][0],
        *[command for command in shown["mkl map --hitl"] if command.endswith("approve")],
    ]
    for command in pasted:
        done = _paste(folder, command)
        assert done.returncode == 0, (command, done.stdout[-2000:], done.stderr)
        assert '"status": "done"' in done.stdout.splitlines()[-1]


def test_mkl_map_with_many_waiting_rows_names_the_listing_that_answers_them(folder: Path) -> None:
    rows = "".join(f'{{"ticket": "T-{n} broken"}}\n' for n in range(5))
    (folder / "rows.jsonl").write_text(rows, encoding="utf-8")
    code, out = _mkl(folder, "map", "refund.mkl", "--over", "rows.jsonl", "--hitl", "--script", "refund.script.yaml")
    assert code == 3, out
    said = [line for line in out.splitlines() if "wait for a person" in line]
    assert said == [f"5 rows wait for a person: `{PROGRAM} runs` lists each with the commands that answer it."]
    listed = _printed(_paste(folder, f"{PROGRAM} runs").stdout)
    assert len(listed) == 10 and all("--script refund.script.yaml" in command for command in listed)


@pytest.mark.parametrize("placeholder", ["…", "...", "<your answer>", " … "])
def test_a_reply_that_is_only_a_placeholder_is_refused_and_nothing_is_journaled(folder: Path, placeholder: str) -> None:
    _run(folder, "r", "--set", TICKET)
    before = store_rows(folder / ".mkl" / "runs.sqlite")
    question = re.search(r"--question (q-[0-9a-f]+)", _mkl(folder, "runs")[1])
    assert question is not None
    for how in (["--reply", placeholder], ["--set", f"approval={placeholder}"]):
        code, status, _, err = mkl_cli(
            folder, "resume", "--id", "r", "--question", question.group(1), *how, env=_unactivated()
        )
        assert code == 2 and status["status"] == "error" and "placeholder" in status["error"], status
        assert len(err.strip().splitlines()) == 1 and "placeholder" in err, err
    assert store_rows(folder / ".mkl" / "runs.sqlite") == before


def test_an_in_doubt_commands_placeholder_is_refused() -> None:
    from mkl_notebook.app.errors import UsageProblem
    from mkl_notebook.app.replies import parse_resolve

    for placeholder in ("VALUE", "<what the tool returned>", "…"):
        with pytest.raises(UsageProblem, match="placeholder"):
            parse_resolve(f"completed={placeholder}")
    assert parse_resolve("completed=sent") is not None


def test_the_readme_shows_the_resume_command_the_run_prints(folder: Path) -> None:
    """The README's Try-it command, with --hitl as it says, prints the resume command the README shows (the
    README spells the program `.venv/bin/mkl`, the venv not activated; the run id and question are the run's)."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    tried = re.search(r"^python3 -m venv \.venv && .* && (\.venv/bin/mkl run .*)$", readme, re.M)
    shown = re.search(r"\(`(\.venv/bin/mkl resume [^`]*)`,\s*as the run prints it", readme)
    assert tried is not None and shown is not None
    words = [*shlex.split(tried.group(1))[1:], "--hitl", "--id", "RUN"]
    shutil.copytree(ROOT / "examples", folder / "examples")
    code, out = _mkl(folder, *words)
    assert code == 3, out
    printed = [command.replace(PROGRAM, ".venv/bin/mkl", 1) for command in _printed(out)]
    question = re.search(r"--question (q-[0-9a-f]+)", printed[0])
    assert question is not None
    assert shown.group(1).replace("q-…", question.group(1)) == printed[0]


def test_the_commands_saved_into_a_notebook_name_plain_mkl_wherever_they_are_written(folder: Path) -> None:
    """A notebook travels: the commands its outputs print say ``mkl``, never this machine's venv path, whether a
    kernel without the venv on its PATH wrote them or ``mkl resume FILE`` did (which prints the path on the
    terminal it was typed in, where it pastes)."""
    import nbformat
    from lab_client import run_all

    notebook = folder / "shared.ipynb"
    two_gates = ROOT / "notebooks" / "data"  # the tutorials' refund machine: a second question after the first
    shutil.copy(two_gates / "refund.script.yaml", folder / "two.script.yaml")
    cells = [
        nbformat.v4.new_code_cell("%load_ext mkl_notebook"),
        nbformat.v4.new_code_cell("%%mkl\n" + (two_gates / "refund.mkl").read_text(encoding="utf-8")),
        nbformat.v4.new_code_cell("%mkl run refund --id r --script two.script.yaml --set ticket=broken"),
    ]
    nbformat.write(nbformat.v4.new_notebook(cells=cells), notebook)
    run_all(notebook, env={"PATH": _unactivated()["PATH"]})
    saved = notebook.read_text(encoding="utf-8")
    assert "mkl resume shared.ipynb --run r" in saved and str(VENV_BIN) not in saved

    code, _, out, err = mkl_cli(folder, "runs", "shared.ipynb", env=_unactivated())
    assert code == 0 and f"{PROGRAM} resume shared.ipynb --run r" in out, err  # on this terminal: as it pastes
    question = next(line.split("--question ")[1].split()[0] for line in out.splitlines() if "--question " in line)
    code, _, out, err = mkl_cli(
        folder, "resume", "shared.ipynb", "--run", "r", "--question", question, "--set", "refund_approval=approve",
        "--script", "two.script.yaml", env=_unactivated(),
    )  # fmt: skip
    assert code == 3 and f"{PROGRAM} resume shared.ipynb --run r" in out, err  # the next question's, here
    saved = notebook.read_text(encoding="utf-8")
    assert "mkl resume shared.ipynb --run r" in saved and str(VENV_BIN) not in saved  # in the file: plain mkl
