"""The same user mistakes through both front ends give the same one-line message, and record nothing.

Each row runs one mistake as ``mkl …`` (the console entry point, in-process) and as ``%mkl …``
in a real IPython shell, in the same folder and store, and compares the messages word for
word (the CLI prints ``mkl: error: MESSAGE``; the magic raises ``UsageError(MESSAGE)``).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from IPython.core.error import UsageError
from IPython.core.interactiveshell import InteractiveShell

from mkl_notebook import cli

from support import REFUND, REFUND_SCRIPT

LOOP = """\
machine: loop
entry: a
budget: 2
states:
  a:
    structure: one line
    prompt: again
    output: o
    gates: [{ when: otherwise, then: ok, to: a }]
"""


@dataclass(frozen=True)
class Mistake:
    cli: list[str]  # argv after `mkl`
    magic: str  # the line after `%mkl`
    says: str  # a part of the message both must show


S = f"--script {REFUND_SCRIPT}"
MISTAKES: dict[str, Mistake] = {
    "set-without-equals": Mistake(
        ["run", "refund.mkl", "--set", "novalue", *S.split()],
        f"run refund --set novalue {S}",
        "--set expects KEY=VALUE",
    ),
    "input-not-json": Mistake(
        ["run", "refund.mkl", "--input", "{not json", *S.split()],
        f"run refund --input '{{not json' {S}",
        "--input is not valid JSON",
    ),
    "input-not-a-mapping": Mistake(
        ["run", "refund.mkl", "--input", "[1, 2]", *S.split()],
        f"run refund --input '[1, 2]' {S}",
        "--input must be a mapping",
    ),
    "max-steps-zero": Mistake(
        ["run", "refund.mkl", "--max-steps", "0", *S.split()], f"run refund --max-steps 0 {S}", "at least 1, not '0'"
    ),
    "max-steps-text": Mistake(
        ["run", "refund.mkl", "--max-steps", "many", *S.split()], f"run refund --max-steps many {S}", "not 'many'"
    ),
    "max-tokens-negative": Mistake(
        ["run", "refund.mkl", "--max-tokens=-5", *S.split()], f"run refund --max-tokens=-5 {S}", "--max-tokens"
    ),
    "bad-run-id": Mistake(
        ["run", "refund.mkl", "--id", "bad id!", *S.split()], f"run refund --id 'bad id!' {S}", "is not usable"
    ),
    "no-model": Mistake(
        ["run", "refund.mkl", "--id", "fresh-one"], "run refund --id fresh-one", "no model is configured"
    ),
    "missing-script": Mistake(
        ["run", "refund.mkl", "--script", "nowhere.yaml"],
        "run refund --script nowhere.yaml",
        "--script nowhere.yaml: cannot be read",
    ),
    "reply-twice": Mistake(
        ["resume", "--id", "waiting", "--reply", "approve", "--set", "approval=yes"],
        "resume waiting --reply approve --set approval=yes",
        "give the reply once",
    ),
    "set-extra-key": Mistake(
        ["resume", "--id", "waiting", "--set", "approval=yes", "--set", "other=1"],
        "resume waiting --set approval=yes --set other=1",
        "--set approval, other does not answer it",
    ),
    "set-wrong-path": Mistake(
        ["resume", "--id", "waiting", "--set", "human.reply=yes"],
        "resume waiting --set human.reply=yes",
        "waiting for a reply at 'approval'",
    ),
    "reply-without-question": Mistake(
        ["resume", "--id", "waiting", "--reply", "approve"],
        "resume waiting --reply approve",
        "name the question this reply answers: add --question q-",
    ),
    "reply-to-another-question": Mistake(
        ["resume", "--id", "waiting", "--question", "q-000000000000", "--reply", "approve"],
        "resume waiting --question q-000000000000 --reply approve",
        "question q-000000000000 is not pending: run 'waiting' now waits on question q-",
    ),
    "resolve-unknown-action": Mistake(
        ["resume", "--id", "waiting", "--resolve", "maybe"],
        "resume waiting --resolve maybe",
        "--resolve takes completed=VALUE",
    ),
    "resolve-not-in-doubt": Mistake(
        ["resume", "--id", "waiting", "--resolve", "retry"], "resume waiting --resolve retry", "no in-doubt tool call"
    ),
    "resume-max-steps-zero": Mistake(
        ["resume", "--id", "waiting", "--reply", "approve", "--max-steps", "0"],
        "resume waiting --reply approve --max-steps 0",
        "at least 1",
    ),
    "resume-unknown-run": Mistake(
        ["resume", "--id", "ghost", "--reply", "yes"], "resume ghost --reply yes", "no run 'ghost' in .mkl/runs.sqlite"
    ),
    "reply-to-a-finished-run": Mistake(
        ["resume", "--id", "finished", "--reply", "approve"],
        "resume finished --reply approve",
        "is not waiting for a reply (it is done)",
    ),
    "resume-a-finished-run": Mistake(["resume", "--id", "finished"], "resume finished", "already finished (done)"),
    "reply-to-a-budget-suspension": Mistake(
        ["resume", "--id", "out-of-steps", "--reply", "go"],
        "resume out-of-steps --reply go",
        "not waiting for a reply (it is suspended: budget-exhausted)",
    ),
    "set-on-a-budget-suspension": Mistake(
        ["resume", "--id", "out-of-steps", "--set", "human.reply=go"],
        "resume out-of-steps --set human.reply=go",
        "has nothing to answer",
    ),
}


def cli_error(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    """The message `mkl ARGV` printed for its usage error (exit 2, one line)."""
    try:
        code = cli.main(argv)
    except SystemExit as exit_:
        code = exit_.code
    err = capsys.readouterr().err
    assert code == 2, err
    assert "Traceback" not in err
    lines = [line for line in err.splitlines() if "error: " in line]
    assert len(lines) == 1, err
    return lines[0].split("error: ", 1)[1]


def magic_error(shell: InteractiveShell, line: str) -> str:
    result = shell.run_cell(f"%mkl {line}")
    assert type(result.error_in_exec) is UsageError, result.error_in_exec  # UsageError itself: one line
    return str(result.error_in_exec)


def journal_sizes(folder: Path) -> dict[str, int]:
    with sqlite3.connect(folder / ".mkl" / "runs.sqlite") as db:
        return dict(db.execute("SELECT run_id, COUNT(*) FROM records GROUP BY run_id").fetchall())


@pytest.fixture
def both(
    load_mkl: Callable[[Callable[..., Any]], Any],
    shell: InteractiveShell,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> InteractiveShell:
    """A folder where both front ends see the same machines and three runs: waiting, finished, out of steps."""
    load_mkl(lambda *args, **kwargs: None)
    (tmp_path / "refund.mkl").write_text(REFUND, encoding="utf-8")
    (tmp_path / "loop.mkl").write_text(LOOP, encoding="utf-8")
    (tmp_path / "loop.script.yaml").write_text("llm: { produce: [] }\n", encoding="utf-8")
    assert shell.run_cell("%%mkl\n" + REFUND).success
    assert shell.run_cell("%%mkl\n" + LOOP).success
    script = str(REFUND_SCRIPT)
    assert cli.main(["run", "refund.mkl", "--id", "waiting", "--hitl", "--script", script, "--quiet"]) == 3
    assert cli.main(["run", "refund.mkl", "--id", "finished", "--script", script, "--quiet"]) == 0
    assert (
        cli.main(["run", "loop.mkl", "--id", "out-of-steps", "--suspend", "--script", "loop.script.yaml", "--quiet"])
        == 3
    )
    capsys.readouterr()
    return shell


@pytest.mark.parametrize("name", list(MISTAKES))
def test_a_mistake_reads_the_same_from_mkl_and_from_the_magic(
    both: InteractiveShell, tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str
) -> None:
    mistake = MISTAKES[name]
    before = journal_sizes(tmp_path)
    from_cli = cli_error(mistake.cli, capsys)
    from_magic = magic_error(both, mistake.magic)
    assert from_cli == from_magic
    assert mistake.says in from_cli
    assert journal_sizes(tmp_path) == before  # a refused request records nothing, from either side
