"""One table of flags for both front ends: ``mkl run/resume/map`` and ``%mkl run/resume/map`` take the same
shared flags with the same meaning, and a flag the table adds reaches the magics as well as the command line
(``%mkl resume --note`` journals the note beside the reply, as ``mkl resume --note`` does)."""

from __future__ import annotations

import argparse

import pytest

import mkl_notebook
from mkl_notebook.app.errors import UsageProblem
from mkl_notebook.app.flags import FLAGS, MAP, REPLYING, RUN
from mkl_notebook.app.requests import StartRequest, asked
from mkl_notebook.cli import build_parser
from mkl_notebook.notebook.magic_args import parsers

from support import REFUND, REFUND_SCRIPT, Cells


def _helps(parser: argparse.ArgumentParser) -> dict[str, str | None]:
    return {option: action.help for action in parser._actions for option in action.option_strings}


def _command(name: str) -> argparse.ArgumentParser:
    commands = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return commands.choices[name]


@pytest.mark.parametrize(("name", "shared"), [("run", RUN), ("resume", REPLYING), ("map", MAP)])
def test_the_command_line_and_the_magics_take_each_shared_flag_alike(name: str, shared: tuple[str, ...]) -> None:
    cli, magic = _helps(_command(name)), _helps(parsers()[name])
    for key in shared:
        flag = FLAGS[key]
        assert cli.get(flag.option) == flag.help, (name, flag.option, "mkl")
        assert magic.get(flag.option) == flag.help, (name, flag.option, "%mkl")
    both = set(cli) & set(magic) - {"-h", "--help"}
    assert {option for option in both if cli[option] != magic[option]} == set()  # one meaning per flag


def test_a_note_given_to_percent_mkl_resume_is_journaled_beside_the_reply(ip: Cells) -> None:
    ip.define(REFUND)
    ip.run(f"%mkl run refund --script {REFUND_SCRIPT}")
    question = mkl_notebook.get_run("refund").question_id
    ip.run(f"%mkl resume refund --question {question} --reply approve --note 'add an apology'")
    run = mkl_notebook.get_run("refund")
    assert run.status == "done"
    answer = run.answer_to(question)
    assert answer is not None
    assert (answer["value"], answer.get("note")) == ("approve", "add an apology"), answer


def test_an_option_a_run_does_not_take_is_refused_naming_it() -> None:
    with pytest.raises(UsageProblem, match="'scirpt'"):
        asked(StartRequest, None, {"scirpt": "x.json"})
