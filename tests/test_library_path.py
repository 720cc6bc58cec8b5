"""The library path: folders ``call: NAME`` searches before the shipped standard library (``--library``,
``$MKL_LIBRARY_PATH``, ``%mkl config library=``), and the language reference's list of the shipped machines."""

from __future__ import annotations

import os
import re
import textwrap
from pathlib import Path
from typing import Any

import pytest

from mkl_notebook.lang import stdlib

from support import mkl_cli

ROOT = Path(__file__).resolve().parent.parent


def _machine(name: str, prompt: str, *, calls: str | None = None) -> str:
    """A one-state machine ``name``: says ``prompt`` (or calls machine ``calls`` with the task) into ``answer``."""
    if calls:
        state = f'call: {calls}\n            input: {{task: "{{{{task}}}}"}}'
    else:
        state = f'structure: one line\n            prompt: "{prompt}"'
    return textwrap.dedent(
        f"""\
        mklang: "0.4"
        machine: {name}
        entry: go
        budget: 4
        result: answer
        context: {{task: "a long text"}}
        states:
          go:
            {state}
            output: answer
            gates: [{{when: otherwise, then: ok, to: END}}]
        """
    )


SCRIPT = """\
llm:
  produce:
    "trusted summary": "from the trusted folder"
    "second folder": "from the second folder"
    "Beside the caller": "from beside the caller"
    "Solve this task": "from the shipped std_cot"
  judge: [1]
"""


def _folders(tmp_path: Path) -> tuple[Path, Path, Path]:
    """A work folder with a caller of ``std_summarize`` and of ``std_cot``, and two library folders: the first
    has ``std_summarize`` and an override of ``std_cot``, the second its own ``std_cot`` too."""
    work, first, second = tmp_path / "work", tmp_path / "trusted", tmp_path / "second"
    for folder in (work, first, second):
        folder.mkdir()
    (work / "summarize.mkl").write_text(_machine("summarize", "", calls="std_summarize"), encoding="utf-8")
    (work / "think.mkl").write_text(_machine("think", "", calls="std_cot"), encoding="utf-8")
    (work / "s.yaml").write_text(SCRIPT, encoding="utf-8")
    (first / "std_summarize.mkl").write_text(_machine("std_summarize", "A trusted summary."), encoding="utf-8")
    (first / "std_cot.mkl").write_text(_machine("std_cot", "A trusted summary."), encoding="utf-8")
    (second / "std_cot.mkl").write_text(_machine("std_cot", "The second folder."), encoding="utf-8")
    return work, first, second


def _run(work: Path, file: str, *flags: str, env: dict[str, str] | None = None) -> tuple[int, dict[str, Any], str]:
    code, status, _out, err = mkl_cli(work, "run", file, "--script", "s.yaml", "--fresh", *flags, env=env)
    return code, status, err


def test_a_library_folder_is_searched_before_the_shipped_library(tmp_path: Path) -> None:
    work, first, second = _folders(tmp_path)
    # Without a library path std_summarize is no one's, and std_cot is the shipped machine.
    code, status, _err = _run(work, "summarize.mkl")
    assert (code, status["status"]) == (1, "halt") and "unknown machine 'std_summarize'" in status["error"]
    assert _run(work, "think.mkl")[1]["result"] == "from the shipped std_cot"
    code, _status, out, _err = mkl_cli(work, "check", "summarize.mkl")
    assert code == 1 and "calls machine 'std_summarize'" in out

    # --library, or the environment: the folder's std_summarize, and its std_cot over the shipped one.
    for flags, env in (
        (("--library", str(first)), None),
        ((), {"MKL_LIBRARY_PATH": str(first)}),
        (("--library", os.pathsep.join([str(first), str(second)])), {"MKL_LIBRARY_PATH": str(second)}),
    ):
        code, status, err = _run(work, "summarize.mkl", *flags, env=env)
        assert (code, status["result"]) == (0, "from the trusted folder"), err
        code, status, err = _run(work, "think.mkl", *flags, env=env)
        assert (code, status["result"]) == (0, "from the trusted folder"), err
        code, _status, out, err = mkl_cli(work, "check", "summarize.mkl", *flags, env=env)
        assert code == 0 and "no findings" in out, out + err

    # The first folder that has the file wins; a machine beside the caller still comes before any folder.
    path = os.pathsep.join([str(second), str(first)])
    assert _run(work, "think.mkl", "--library", path)[1]["result"] == "from the second folder"
    (work / "std_cot.mkl").write_text(_machine("std_cot", "Beside the caller."), encoding="utf-8")
    assert _run(work, "think.mkl", "--library", path)[1]["result"] == "from beside the caller"


def test_mkl_test_finds_the_library_folders_machines_as_mkl_run_does(tmp_path: Path) -> None:
    work, first, _second = _folders(tmp_path)
    (work / "summarize.test.yaml").write_text(
        "scenarios:\n"
        "  - name: summarized by the trusted folder's machine\n"
        '    llm: {produce: {"trusted summary": "from the trusted folder"}}\n'
        '    expect: {status: done, result: "from the trusted folder"}\n',
        encoding="utf-8",
    )
    test = ("test", "summarize.mkl", "--script", "summarize.test.yaml")
    code, _status, out, _err = mkl_cli(work, *test)
    assert code == 1 and "unknown machine 'std_summarize'" in out  # no library path: no such machine
    for flags, env in ((("--library", str(first)), None), ((), {"MKL_LIBRARY_PATH": str(first)})):
        code, _status, out, err = mkl_cli(work, *test, *flags, env=env)
        assert code == 0 and "1 passed, 0 failed" in out, out + err
    code, status, _out, err = mkl_cli(work, *test, "--library", str(tmp_path / "nowhere"))
    assert code == 2 and "does not exist" in status["error"], err


def test_a_missing_folder_or_a_bad_library_file_is_one_line_and_nothing_runs(tmp_path: Path) -> None:
    work, first, _second = _folders(tmp_path)
    missing = tmp_path / "not-there"
    cases = [
        (("--library", str(missing)), None, f"--library: the library folder {missing} does not exist"),
        ((), {"MKL_LIBRARY_PATH": str(missing)}, f"MKL_LIBRARY_PATH: the library folder {missing} does not exist"),
        (("--library", str(work / "s.yaml")), None, f"--library: the library folder {work / 's.yaml'} is not a folder"),
    ]
    for flags, env, said in cases:
        code, status, err = _run(work, "summarize.mkl", *flags, env=env)
        assert code == 2 and status["status"] == "error", err
        assert err == f"mkl: error: {said}\n"
        code, _status, _out, err = mkl_cli(work, "check", "summarize.mkl", *flags, env=env)
        assert code == 2 and err == f"mkl: error: {said}\n"

    bad = first / "std_summarize.mkl"
    bad.write_text("machine: std_summarize\nentry: go\nstates: [\n", encoding="utf-8")
    code, _status, err = _run(work, "summarize.mkl", "--library", str(first))
    assert code == 2 and err.count("\n") == 1 and err.startswith(f"mkl: error: library path: {bad}:"), err
    bad.write_text(_machine("summary_machine", "A trusted summary."), encoding="utf-8")
    code, _status, err = _run(work, "summarize.mkl", "--library", str(first))
    assert code == 2 and err.count("\n") == 1
    assert f"{bad} defines machine 'summary_machine', not 'std_summarize'" in err
    assert not (work / ".mkl" / "runs.sqlite").exists()  # refused before any run started


def test_the_notebook_setting_finds_the_folder_first_and_refuses_a_missing_one(
    shell: Any, load_mkl: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import mkl_notebook

    work, first, _second = _folders(tmp_path)
    published: list[dict[str, Any]] = []
    load_mkl(lambda data, *args, **kwargs: published.append(dict(data)))
    assert shell.run_cell(f"%mkl config library={first}").success
    assert f"library = {first}\n" in capsys.readouterr().out
    assert shell.run_cell("%%mkl\n" + _machine("summarize", "", calls="std_summarize")).success
    assert shell.run_cell(f"%mkl run summarize --script {work / 's.yaml'} --no-hitl").success
    assert mkl_notebook.get_run("summarize").result == "from the trusted folder"

    assert shell.run_cell("%mkl stdlib").success
    listed = published[-1]["text/plain"]
    assert "std_summarize" in listed and all(name in listed for name in stdlib.NAMES)
    assert shell.run_cell("%mkl stdlib std_cot").success
    assert "A trusted summary." in published[-1]["text/plain"]  # the folder's std_cot, not the shipped one

    failed = shell.run_cell(f"%mkl config library={tmp_path / 'not-there'}")
    assert f"library: the library folder {tmp_path / 'not-there'} does not exist" in str(failed.error_in_exec)
    assert shell.run_cell("%mkl config library=").success
    failed = shell.run_cell("%mkl stdlib std_summarize")
    assert "no library machine 'std_summarize'" in str(failed.error_in_exec)


def _documented_library() -> dict[str, tuple[set[str], str, list[str]]]:
    """The language reference's table of the standard library: each machine's input keys, result key and
    states."""
    text = (ROOT / "docs" / "language.md").read_text(encoding="utf-8")
    section = text[text.index("## The standard library\n") : text.index("**How they differ")]
    rows = {}
    for line in section.splitlines():
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        if line.startswith("| `std_"):
            reads, returns, states = set(re.findall(r"`(\w+)`", cells[2])), cells[3].strip("`"), cells[4]
            rows[cells[0].strip("`")] = (reads, returns, states.split(", "))
    return rows


def test_the_language_reference_lists_exactly_the_shipped_machines_with_their_inputs_and_result() -> None:
    shipped = sorted(path.stem for path in (ROOT / "mkl_notebook" / "stdlib").glob("*.mkl"))
    assert sorted(stdlib.NAMES) == shipped
    documented = _documented_library()
    assert list(documented) == list(stdlib.NAMES)
    for name in stdlib.NAMES:
        machine = stdlib.machine(name)
        assert documented[name] == (set(machine.context), machine.result, list(machine.states)), name


ASKING_COT = """\
mklang: "0.4"
machine: std_cot
entry: go
budget: 4
result: answer
context: {task: "x"}
states:
  go:
    structure: one line
    prompt: "A trusted summary."
    output: answer
    gates:
      - {when: a person must approve, escalate: true, ask: "Approve?", to: done}
      - {when: otherwise, then: ok, to: END}
  done:
    structure: one line
    prompt: "Approved summary."
    output: answer
    gates: [{when: otherwise, then: ok, to: END}]
"""


def test_a_run_goes_on_in_the_library_machine_it_pinned(tmp_path: Path) -> None:
    """A run that waits inside a library folder's machine is continued in that machine, even with no library
    path given and the caller's file edited since (--force): never in the shipped machine of the same name."""
    work, first, _second = _folders(tmp_path)
    (first / "std_cot.mkl").write_text(ASKING_COT, encoding="utf-8")
    (work / "s.yaml").write_text(
        SCRIPT.replace("  judge: [1]", '    "Approved summary": "approved in the folder\'s machine"\n  judge: [0]'),
        encoding="utf-8",
    )
    code, status, err = _run(work, "think.mkl", "--library", str(first), "--hitl", "--id", "t1")
    assert (code, status["status"], status["called_machine"]) == (3, "suspended", "std_cot"), err
    think = work / "think.mkl"
    think.write_text(think.read_text(encoding="utf-8").replace("budget: 4", "budget: 5"), encoding="utf-8")
    answer = ("--reply", "approve", "--question", status["question_id"], "--script", "s.yaml", "--force")
    code, status, _out, err = mkl_cli(work, "resume", "--id", "t1", *answer)
    assert (code, status["result"]) == (0, "approved in the folder's machine"), err
    assert [given["value"] for given in status["answers"]] == ["approve"]
