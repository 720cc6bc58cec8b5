"""What a newcomer reads about a broken machine: one line per mistake, at the line and column they see, in
plain words, with the name they probably meant.

Each bad machine of the table is given to the real loader, to ``mkl check`` (a subprocess) and to a ``%%mkl``
cell in a real IPython shell; all three must say the same one sentence, at the same place: in the file, or
in the cell (whose line 1 is ``%%mkl``, so its body starts on line 2).
"""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest
from test_magics import INTERRUPTIBLE  # the machine a person interrupts, one tool call long

from mkl_notebook.lang.findings import MachineError
from mkl_notebook.lang.loader import load

from support import (
    RUN_MIME,
    Cells,
    fetch_page_interrupted_once,
    mkl_cli,
)

GOOD = """\
machine: demo
entry: draft
budget: 6
states:
  draft:
    structure: A draft.
    prompt: "write about {{topic}}"
    output: draft
    tier: fast
    gates:
      - when: the draft is good
        then: ok
        to: review
      - when: otherwise
        then: ok
        to: review
  review:
    structure: A verdict.
    prompt: "review {{draft}}"
    output: verdict
    gates:
      - when: otherwise
        then: ok
        to: END
"""


def bad(old: str, new: str, count: int = 1) -> str:
    """GOOD with ``old`` replaced by ``new`` (``count`` times; it must occur that often)."""
    assert GOOD.count(old) >= count, old
    return GOOD.replace(old, new, count)


YAML = "the YAML does not parse: "

# name -> (the machine's text, the one error line: line, column, message), positions in the file.
CASES: dict[str, tuple[str, tuple[int, int, str]]] = {
    "tab-indent": (
        bad("    output: draft\n", "\toutput: draft\n"),
        (8, 1, YAML + "a tab indents this line; YAML indents with spaces only: replace the tab with spaces"),
    ),
    "indent-less": (
        bad("    output: draft\n", "   output: draft\n"),
        (
            8,
            4,
            YAML + "this line is indented by 3 spaces, like no key above it: indent it by 4 like line 7 "
            "or by 2 like line 5",
        ),
    ),
    "indent-deeper": (
        bad("    output: draft\n", "      output: draft\n"),
        (8, 7, YAML + "this line is indented by 6 spaces, like no key above it: indent it by 4 like line 6"),
    ),
    "unclosed-quote": (
        bad('prompt: "review {{draft}}"', 'prompt: "review {{draft}}'),
        (19, 13, YAML + 'the text opened with " here is never closed: end it with a matching "'),
    ),
    "unclosed-quote-closed-later": (  # YAML reads on to the next quote, two states below
        bad('prompt: "write about {{topic}}"', 'prompt: "write about {{topic}}'),
        (
            7,
            13,
            YAML + 'the text opened with " here is not closed on its line, so it runs on to the " of line 19: '
            'end it with a matching "',
        ),
    ),
    "unclosed-bracket": (
        bad("budget: 6\n", "budget: [6\n"),
        (
            3,
            9,
            YAML + "the list opened with '[' here is not closed: add ']' after its last item (and ',' between items)",
        ),
    ),
    "missing-colon": (
        bad("    output: draft\n", "    output draft\n"),
        (8, 5, YAML + "'output draft' has no ':' after its key; write it as key: value"),
    ),
    "colon-in-value": (
        bad('prompt: "write about {{topic}}"', "prompt: note: write about it"),
        (7, 17, YAML + "this value holds ': ', which YAML reads as a second key: put the whole value in quotes"),
    ),
    "duplicate-key": (
        bad("budget: 6\n", "budget: 6\nbudget: 7\n"),
        (4, 1, "key 'budget' appears twice; the second would silently win"),
    ),
    "top-key-typo": (
        bad("entry: draft", "entyr: draft"),  # not also "the machine has no 'entry:' key"
        (2, 1, "unknown top-level key 'entyr'; did you mean 'entry'?"),
    ),
    "state-key-typo": (
        bad('    prompt: "write', '    promt: "write'),  # not also "a generative state needs 'prompt:'"
        (7, 5, "state 'draft': unknown key 'promt'; did you mean 'prompt'?"),
    ),
    "gate-key-typo": (
        bad("        to: END", "        too: END"),  # not also "an ok gate needs 'to:'"
        (24, 9, "state 'review', gate 1: unknown key 'too'; did you mean 'to'?"),
    ),
    "policy-key-typo": (
        bad("        then: ok\n        to: END", "        thn: ok\n        to: END"),  # not also "needs one policy"
        (23, 9, "state 'review', gate 1: unknown key 'thn'; did you mean 'then'?"),
    ),
    "renamed-state": (  # three gates name the old name: one error, at the first, counting the others
        bad("  review:\n", "  critique:\n"),
        (
            13,
            9,
            "state 'draft', gate 1: 'to: review' names no state; use one of draft, critique or END "
            "(and 1 more use of 'review')",
        ),
    ),
    "state-name-typo": (
        bad("to: review", "to: reviw", 2),
        (
            13,
            9,
            "state 'draft', gate 1: 'to: reviw' names no state; did you mean 'review'? (and 1 more use of 'reviw')",
        ),
    ),
    "entry-typo": (
        bad("entry: draft", "entry: drafft"),
        (2, 1, "entry 'drafft' names no state; did you mean 'draft'?"),
    ),
    "end-in-lower-case": (
        bad("to: END", "to: end"),
        (24, 9, "state 'review', gate 1: 'to: end' names no state; did you mean 'END'?"),
    ),
    "tier-typo": (
        bad("tier: fast", "tier: fats"),
        (9, 5, "state 'draft': 'tier' must be one of fast, balanced, reasoning, got 'fats'; did you mean 'fast'?"),
    ),
    "default-tier-typo": (
        bad("budget: 6\n", "budget: 6\ndefault_tier: balancd\n"),
        (4, 1, "'default_tier' must be one of fast, balanced, reasoning, got 'balancd'; did you mean 'balanced'?"),
    ),
    "broken-state": (  # its gates' targets are not also "names no state", nor the graph "no path to END"
        bad(
            '  review:\n    structure: A verdict.\n    prompt: "review {{draft}}"\n    output: verdict\n'
            "    gates:\n      - when: otherwise\n        then: ok\n        to: END\n",
            "  review: look it over\n",
        ),
        (17, 3, "state 'review' must be a mapping, not text"),
    ),
}


def _expected_check_line(path: Path, line: int, column: int, message: str) -> str:
    return f"{path.name}:{line}:{column}: error: {message}"


@pytest.mark.parametrize("case", list(CASES))
def test_the_loader_says_the_one_mistake_where_it_is(case: str) -> None:
    text, (line, column, message) = CASES[case]
    with pytest.raises(MachineError) as raised:
        load(text)
    assert str(raised.value) == f"line {line}, column {column}: {message}"
    assert len(raised.value.findings) == 1, [str(f) for f in raised.value.findings]


@pytest.mark.parametrize("case", list(CASES))
def test_mkl_check_lists_the_one_mistake_and_exits_one(case: str, tmp_path: Path) -> None:
    text, (line, column, message) = CASES[case]
    path = tmp_path / "demo.mkl"
    path.write_text(text, encoding="utf-8")
    code, status, out, err = mkl_cli(tmp_path, "check", path.name)
    errors = [row for row in out.splitlines() if ": error: " in row]
    assert errors == [_expected_check_line(path, line, column, message)], out + err
    assert (code, status["status"], status["errors"]) == (1, "errors", 1), out + err


@pytest.mark.parametrize("case", list(CASES))
def test_a_mkl_cell_says_it_at_the_cells_own_line(ip: Cells, case: str, capsys: pytest.CaptureFixture[str]) -> None:
    text, (line, column, message) = CASES[case]
    error = ip.fails("%%mkl\n" + text)
    assert str(error) == f"line {line + 1}, column {column}: {message}"  # the cell's line 1 is %%mkl
    shown = capsys.readouterr()
    assert (shown.out + shown.err).count(message) == 1, shown


def test_empty_lines_above_the_magic_count_too(ip: Cells) -> None:
    text, (line, column, message) = CASES["state-key-typo"]
    result = ip.shell.run_cell("\n\n%%mkl\n" + text, store_history=True)  # as a kernel runs a cell
    assert str(result.error_in_exec) == f"line {line + 3}, column {column}: {message}"


def test_a_call_to_a_mistyped_machine_suggests_the_library_one(tmp_path: Path) -> None:
    path = tmp_path / "caller.mkl"
    path.write_text(
        "machine: caller\nentry: think\nbudget: 4\nstates:\n  think:\n    call: std_cto\n    output: answer\n"
        "    gates:\n      - { when: otherwise, then: ok, to: END }\n",
        encoding="utf-8",
    )
    code, _status, out, err = mkl_cli(tmp_path, "check", path.name)
    errors = [row for row in out.splitlines() if ": error: " in row]
    assert len(errors) == 1 and errors[0].startswith(
        "caller.mkl:6:5: error: state 'think' calls machine 'std_cto'; did you mean 'std_cot'?: it is neither"
    ), out + err
    assert code == 1


def test_warnings_of_a_cell_are_placed_in_the_cell(ip: Cells, capsys: pytest.CaptureFixture[str]) -> None:
    text = bad("    tier: fast\n", "    tier: fast\n    max_visits: 1\n").replace(
        "      - when: the draft is good\n        then: ok\n        to: review\n",
        "      - when: the draft is good\n        repair: 2\n        to: review\n",
    )
    capsys.readouterr()
    ip.run("%%mkl\n" + text)
    ip.run("%mkl check demo")
    out = capsys.readouterr().out
    cell_line = text.splitlines().index("    max_visits: 1") + 2
    assert f"line {cell_line}, column 5: warning: state 'draft': max_visits 1" in out, out


# -- exit codes as the command reference's table and DESIGN.md's contract say --------------------------------


@pytest.mark.parametrize("command", [["trace", "--id", "UNKNOWN"], ["plan", "demo.mkl", "--id", "UNKNOWN"]])
def test_an_unknown_run_is_a_usage_error(tmp_path: Path, command: list[str]) -> None:
    (tmp_path / "demo.mkl").write_text(GOOD, encoding="utf-8")
    code, status, _out, err = mkl_cli(tmp_path, "run", "demo.mkl", "--id", "known", "--suspend", "--max-steps", "1")
    code, status, _out, err = mkl_cli(tmp_path, *command)
    assert code == 2, err
    assert status == {"status": "error", "error": "no run 'UNKNOWN' in .mkl/runs.sqlite"}
    assert err.strip().splitlines() == ["mkl: error: no run 'UNKNOWN' in .mkl/runs.sqlite"]


def test_the_command_reference_states_the_exit_codes_the_commands_give() -> None:
    reference = Path(__file__).resolve().parent.parent / "docs" / "reference" / "commands.md"
    rows = {
        row.split("|")[1].strip(): row.split("|")[-2].strip()
        for row in reference.read_text(encoding="utf-8").splitlines()
        if row.startswith("| `mkl ")
    }
    assert (
        rows["`mkl check FILE`"]
        == "0 no errors (warnings allowed), 1 errors (as mklang, ruff and mypy), 2 unreadable or usage"
    )
    assert next(codes for command, codes in rows.items() if command.startswith("`mkl trace")) == (
        "0, 2 on an unknown run or store"
    )


# -- each message once -----------------------------------------------------------------------------------


def test_an_interrupt_is_said_once_in_the_cell(ip: Cells, capsys: pytest.CaptureFixture[str]) -> None:
    fetch_page_interrupted_once()
    ip.define(INTERRUPTIBLE)
    capsys.readouterr()
    error = ip.fails(f"%mkl run slow --script {ip.script('none.yaml', {'llm': {'produce': []}})}")
    line = str(error)
    assert line.startswith("run 'slow' was interrupted at state 'fetch'"), line
    shown = capsys.readouterr()
    published = [str(item.data.get("text/plain", "")) for item in ip.out.published]
    everywhere = "\n".join([*published, shown.out, shown.err])
    assert everywhere.count("was interrupted") == 1, everywhere
    assert not ip.out.with_mime(RUN_MIME)


TWO_TOOLS = """\
machine: slow
entry: fetch
budget: 5
tools:
  - { name: fetch_page, description: a tool that answers }
  - { name: count_words, description: a tool a person interrupts }
states:
  fetch:
    tool: fetch_page
    output: page
    gates: [{ when: otherwise, then: ok, to: count }]
  count:
    tool: count_words
    output: words
    gates: [{ when: otherwise, then: ok, to: END }]
"""


# The tools of TWO_TOOLS: the first counts its calls in the file ``fetched``; the second is interrupted by the
# person (Ctrl-C, SIGINT) the first time it works, and answers the next time.
INTERRUPTING_TOOLS = (
    "import os, pathlib, signal, mkl_notebook\n\n"
    "@mkl_notebook.tool(effect='read')\n"
    "def fetch_page() -> str:\n"
    "    with open('fetched', 'a') as calls:\n"
    "        calls.write('.')\n"
    "    return 'the page'\n\n"
    "@mkl_notebook.tool(effect='read')\n"
    "def count_words() -> str:\n"
    "    if not pathlib.Path('interrupted').exists():\n"
    "        pathlib.Path('interrupted').touch()\n"
    "        os.kill(os.getpid(), signal.SIGINT)  # the person presses Ctrl-C while the tool works\n"
    "    return '2 words'\n"
)


def test_an_interrupted_mkl_run_says_so_once_with_its_status_line_and_the_command_that_goes_on(
    tmp_path: Path,
) -> None:
    (tmp_path / "slow.mkl").write_text(TWO_TOOLS, encoding="utf-8")
    (tmp_path / "tools.py").write_text(INTERRUPTING_TOOLS, encoding="utf-8")
    code, status, out, err = mkl_cli(tmp_path, "run", "slow.mkl", "--tools", "tools.py", "--output-file", "st")
    assert code == 130, err
    assert err.count("interrupted") == 1, err  # said once
    # and the status line a driver reads, as always last
    assert status["status"] == "interrupted" and status["run"].startswith("run-"), out
    assert json.loads((tmp_path / "st").read_text(encoding="utf-8")) == status
    [command] = re.findall(r"`([^`]+)` goes on from there", err)
    assert f"resume --id {status['run']} --tools tools.py" in command

    code, status, _, err = mkl_cli(tmp_path, *shlex.split(command)[1:])  # pasted, as this checkout's mkl
    assert code == 0, err
    assert status["result"] == "2 words"
    assert (tmp_path / "fetched").read_text() == "."  # the answer journaled before Ctrl-C was not asked again


def test_an_interrupted_mkl_map_ends_with_its_status_line_and_the_same_command_goes_on(tmp_path: Path) -> None:
    (tmp_path / "slow.mkl").write_text(TWO_TOOLS, encoding="utf-8")
    (tmp_path / "rows.jsonl").write_text("".join(f'{{"n": {n}}}\n' for n in range(3)), encoding="utf-8")
    (tmp_path / "tools.py").write_text(INTERRUPTING_TOOLS, encoding="utf-8")
    command = ["map", "slow.mkl", "--over", "rows.jsonl", "--tools", "tools.py"]
    code, status, _, err = mkl_cli(tmp_path, *command)
    assert code == 130, err
    assert err.count("interrupted") == 1 and "the same mkl map command again" in err, err
    assert status == {"status": "interrupted", "error": "interrupted"}
    code, status, _, err = mkl_cli(tmp_path, *command)
    assert code == 0, err
    assert status["counts"] == {"done": 3}


def test_the_status_line_says_the_question_it_waits_on(tmp_path: Path) -> None:
    machine = bad(  # review escalates to a person before publishing
        "      - when: otherwise\n        then: ok\n        to: END\n",
        "      - when: otherwise\n        escalate: true\n        ask: Publish this verdict?\n        to: publish\n"
        "  publish:\n    structure: s\n    prompt: p\n    output: done\n"
        "    gates:\n      - { when: otherwise, then: ok, to: END }\n",
    )
    (tmp_path / "demo.mkl").write_text(machine, encoding="utf-8")
    (tmp_path / "s.yaml").write_text(
        json.dumps({"llm": {"produce": {"write": "a draft", "review": "fine", "publish": "ok"}, "judge": [0]}}),
        encoding="utf-8",
    )
    code, status, out, err = mkl_cli(tmp_path, "run", "demo.mkl", "--script", "s.yaml", "--hitl")
    assert code == 3, out + err
    assert status["question_id"] and status["ask"] == "Publish this verdict?"
    assert status["question"] == status["ask"]  # what the person is asked, beside its id
