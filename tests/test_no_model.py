"""A run that needs a model where none is configured says so in one plain sentence with the fix, and goes on
with the fix: ``%mkl resume RUN --script FILE`` in a kernel, the printed command on the command line."""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import Any

from test_paste import PROGRAM, TICKET, _paste, _printed, _unactivated

import mkl_notebook
from mkl_notebook.notebook import session as session_module

from support import REFUND, REFUND_RESULT, REFUND_SCRIPT, Cells, Recorder, mkl_cli

WORDS_OF_A_SUSPENSION = (
    "Suspended (",
    "Pending (",
    "waiting for no model",
    "machine not defined",
    "is not defined here",
)


def _texts(recorder: Recorder) -> list[str]:
    return [p.data["text/plain"] for p in recorder.published if p.data.get("text/plain")]


def test_an_approval_in_a_kernel_with_no_model_says_one_sentence_and_resume_script_finishes_it(
    ip: Cells, load_mkl: Any
) -> None:
    ip.define(REFUND)
    ip.run(f"%mkl run refund --id x --script {REFUND_SCRIPT}")
    question = mkl_notebook.get_run("x").question_id
    session_module._SESSION = None  # a new kernel on the same store: no script, no model, the machine not defined
    recorder = Recorder()
    load_mkl(recorder.publish)
    ip.run(f"%mkl resume x --question {question} --reply approve")
    said = "\n".join(_texts(recorder))
    sentence = (
        "Run x needs a model to go on at send, and none is configured in this kernel: run %mkl resume x --model "
        "MODEL (e.g. openai/gpt-4o-mini; %mkl config model=MODEL sets it for every run), or %mkl resume x --script "
        f"{REFUND_SCRIPT} to go on with scripted answers."
    )
    final = _texts(recorder)[-1]
    assert final.count(sentence) == 1, final
    for words in (*WORDS_OF_A_SUSPENSION, "open this notebook with a kernel", "no model is configured"):
        assert words not in said, (words, said)
    assert mkl_notebook.get_run("x").status == "suspended"
    recorder.clear()
    run = ip.run(f"%mkl resume x --script {REFUND_SCRIPT}").result  # the sentence's fix, as it says it
    assert (run.status, run.result) == ("done", REFUND_RESULT)
    assert run.run_result.context["approval"] == "approve"


def test_an_approval_on_the_command_line_with_no_model_says_one_sentence_and_its_command_finishes_it(
    tmp_path: Path,
) -> None:
    (tmp_path / "refund.mkl").write_text(REFUND, encoding="utf-8")
    shutil.copy(REFUND_SCRIPT, tmp_path / "refund.script.yaml")
    env = _unactivated()
    code, status, _, _ = mkl_cli(
        tmp_path, "run", "refund.mkl", "--id", "r", "--hitl", "--script", "refund.script.yaml", "--set", TICKET, env=env
    )
    assert code == 3
    answer = ("resume", "--id", "r", "--question", status["question_id"], "--reply", "approve")
    code, status, out, err = mkl_cli(tmp_path, *answer, env=env)  # no --script: the run needs a model here
    assert (code, status["status"]) == (3, "suspended"), err
    sentence = (
        "The run needs a model to go on at send, and none is configured here: give the command below --model MODEL "
        "(or set MKL_MODEL, e.g. openai/gpt-4o-mini), or --script refund.script.yaml to go on with scripted answers."
    )
    shown = out.rsplit("\n{", 1)[0]  # what a person reads, above the status line
    assert shown.count(sentence) == 1, shown
    assert not any(words in shown for words in WORDS_OF_A_SUSPENSION), shown
    (command,) = _printed(shown)
    assert command == f"{PROGRAM} resume --id r --script refund.script.yaml"  # as the run was started
    done = _paste(tmp_path, command)
    assert done.returncode == 0, done.stderr
    assert re.search(r'"status": "done"', done.stdout.splitlines()[-1])
