"""A run's checkpoint travels inside the saved .ipynb: real kernels (nbclient) and the headless CLI.

One notebook is built and executed once per module: it loads the extension,
defines the refund machine and runs it to its pending approval gate. Then:
Run All in a fresh kernel with no run store rehydrates the run from the file
(no LLM call) and the gate is answered through the API; ``mkl runs`` /
``mkl resume`` list and finish it headlessly, rewriting only the run's output.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import nbformat
import pytest
from lab_client import run_all
from nbclient import NotebookClient

from mkl_notebook.checkpoints.envelope import verify
from mkl_notebook.checkpoints.notebook_file import FORM_MIME

from support import REFUND, REFUND_ASK, REFUND_RESULT, REFUND_SCRIPT, RUN_MIME, WIDGET_MIME, env_without_models

TICKET = "My parcel A-1001 arrived broken"
RUN_CELL = 2  # index of the `%mkl run` cell

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def _execute(nb: Any, folder: Path) -> None:
    NotebookClient(nb, kernel_name="python3", timeout=120, resources={"metadata": {"path": str(folder)}}).execute()


def _form_place(nb: Any) -> dict[str, Any]:
    outputs = [o for o in nb.cells[RUN_CELL].outputs if FORM_MIME in o.get("data", {})]
    assert len(outputs) == 1, nb.cells[RUN_CELL].outputs
    return outputs[0]


def _run_output(nb: Any) -> dict[str, Any]:
    outputs = [o for o in nb.cells[RUN_CELL].outputs if RUN_MIME in o.get("data", {})]
    assert len(outputs) == 1, nb.cells[RUN_CELL].outputs
    return outputs[0]


def _stdout_json(cell: Any) -> dict[str, Any]:
    errors = [o for o in cell.outputs if o.output_type == "error"]
    assert not errors, errors
    text = "".join(o.text for o in cell.outputs if o.output_type == "stream" and o.name == "stdout")
    return json.loads(text.strip().splitlines()[-1])


def _mkl(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mkl_notebook.cli", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=120,
        env=env_without_models(),
    )


def _status(completed: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    return json.loads(completed.stdout.strip().splitlines()[-1])


def _cell_text(cell: dict[str, Any]) -> str:
    """A cell exactly as Jupyter lays it out inside the file (one-space indent, sorted keys, two levels deep)."""
    return json.dumps(cell, sort_keys=True, indent=1, ensure_ascii=False).replace("\n", "\n  ")


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """shared.ipynb, executed once: the refund run waits at its approval gate; the file carries it."""
    folder = tmp_path_factory.mktemp("author")
    path = folder / "shared.ipynb"
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell("%load_ext mkl_notebook"),
        nbformat.v4.new_code_cell("%%mkl\n" + REFUND),
        nbformat.v4.new_code_cell(
            f'%mkl run refund --script {REFUND_SCRIPT} --set ticket="{TICKET}" --notebook {path}'
        ),
        nbformat.v4.new_markdown_cell("Ask **the approver** to finish this run."),
        nbformat.v4.new_code_cell("print('after the run')"),
    ]
    nbformat.write(nb, path)
    run_all(path)  # as JupyterLab runs it: the kernel knows the file and each cell
    assert (folder / ".mkl" / "runs.sqlite").is_file()
    return path


@pytest.fixture
def copy_of(shared: Path, tmp_path: Path) -> Path:
    """The shared notebook as the approver received it: a folder with the file and no run store."""
    target = tmp_path / "shared.ipynb"
    shutil.copyfile(shared, target)
    return target


# -- what the saved file carries ----------------------------------------------------------------


def test_the_saved_run_output_carries_the_checkpoint_and_a_static_card(shared: Path) -> None:
    nb = nbformat.read(shared, as_version=4)
    nbformat.validate(nb)
    output = _run_output(nb)
    header, records = verify(output["data"][RUN_MIME], "saved notebook")
    assert (header["run_id"], header["status"], header["error"]) == ("refund", "suspended", "escalated")
    assert (header["at"], header["ask"], header["reply_to"]) == ("send", REFUND_ASK, "approval")
    assert records[0]["t"] == "start"
    assert "The question is above." in output["data"]["text/plain"]
    assert REFUND_ASK not in output["data"]["text/plain"]  # printed once: where the form is
    place = _form_place(nb)
    assert nb.cells[RUN_CELL].outputs.index(place) < nb.cells[RUN_CELL].outputs.index(output)  # the question first
    assert WIDGET_MIME not in place["data"]  # printed: nbconvert and Git hosts show it, not saved widget state
    outputs = nb.cells[RUN_CELL].outputs
    assert WIDGET_MIME in outputs[outputs.index(place) + 1]["data"], "the form was shown, right below"
    question = place["data"][FORM_MIME]["question_id"]
    command = f"mkl resume shared.ipynb --run refund --script {REFUND_SCRIPT} --question {question} --reply approve"
    card = place["data"]["text/html"]
    assert REFUND_ASK in card and command in card  # the real file name, the question to answer
    for forbidden in ("<script", "<style", "var(--", "style="):
        assert forbidden not in card.lower()
    text = place["data"]["text/plain"]  # what a reader without a kernel (or an untrusted notebook) sees
    assert REFUND_ASK in text and command in text and "VBox(" not in text


# -- Run All in a fresh kernel -------------------------------------------------------------------


def test_run_all_in_a_fresh_kernel_replays_from_the_notebook_and_the_api_finishes_it(shared: Path) -> None:
    folder = shared.parent
    shutil.rmtree(folder / ".mkl")  # only the notebook carries the run now
    nb = nbformat.read(shared, as_version=4)
    nb.cells += [
        nbformat.v4.new_code_cell(
            "import json, mkl_notebook\n"
            "run = mkl_notebook.get_run('refund')\n"
            "print(json.dumps({'status': run.status, 'calls': run.calls, 'pending': run.pending}))"
        ),
        nbformat.v4.new_code_cell(
            "run.submit('approve')\n"
            "print(json.dumps({'status': run.status, 'result': run.result, 'calls': run.calls,\n"
            "                  'answer': run.run_result.context.get('approval')}))"
        ),
    ]
    _execute(nb, folder)
    waiting = _stdout_json(nb.cells[-2])
    assert waiting["status"] == "suspended"
    assert waiting["calls"]["made"] == 0  # nothing was paid for again
    assert waiting["calls"]["replayed"] > 0
    assert waiting["pending"]["ask"] == REFUND_ASK
    output = _run_output(nb)
    header, _ = verify(output["data"][RUN_MIME])
    assert header["status"] == "suspended"  # the run cell shows the run as it left it ...
    assert "The run went on after this cell: answered 'approve'" in output["data"]["text/plain"]  # ... and since
    place = _form_place(nb)["data"]  # the form came back, then a later cell answered its question:
    assert WIDGET_MIME not in place  # nothing in the saved file still presents it as pending
    assert place["text/plain"].startswith("Answered 'approve' (by ")
    assert "via api" in place["text/plain"]
    finished = _stdout_json(nb.cells[-1])
    assert finished["status"] == "done"
    assert finished["result"] == REFUND_RESULT
    assert finished["answer"] == "approve"
    assert finished["calls"]["made"] == 1  # only the `send` state, after the reply


# -- the headless CLI ----------------------------------------------------------------------------


def test_mkl_runs_lists_the_pending_run_with_its_ask(copy_of: Path) -> None:
    completed = _mkl("runs", copy_of.name, cwd=copy_of.parent)
    assert completed.returncode == 0, completed.stderr
    lines = completed.stdout.strip().splitlines()
    assert any(line.startswith("refund") and "suspended" in line and REFUND_ASK in line for line in lines), lines
    [run] = _status(completed)["runs"]
    assert (run["run"], run["status"], run["ask"], run["reply_to"]) == (
        "refund",
        "suspended",
        REFUND_ASK,
        "approval",
    )


def test_mkl_resume_finishes_the_run_and_rewrites_only_its_output(copy_of: Path) -> None:
    folder = copy_of.parent
    before_text = copy_of.read_text(encoding="utf-8")
    before = json.loads(before_text)
    assert not (folder / ".mkl").exists()
    completed = _approve_headless(copy_of, "--as", "approver")
    assert completed.returncode == 0, (completed.stdout, completed.stderr)
    status = _status(completed)
    assert (status["status"], status["result"]) == ("done", REFUND_RESULT)
    assert status["calls"]["made"] == 1

    after_text = copy_of.read_text(encoding="utf-8")
    after = json.loads(after_text)
    nbformat.validate(nbformat.reads(after_text, as_version=4))
    kept = {key: value for key, value in after["metadata"].items() if key != "mkl"}
    assert (after["nbformat"], kept) == (before["nbformat"], before["metadata"])
    assert list(after["metadata"]["mkl"]) == ["runs"]  # the run's one other home: the notebook's metadata
    assert list(after["metadata"]["mkl"]["runs"]) == ["refund"]
    assert len(after["cells"]) == len(before["cells"])
    for index, (old, new) in enumerate(zip(before["cells"], after["cells"], strict=True)):
        if index == RUN_CELL:
            continue
        assert _cell_text(new) == _cell_text(old), f"cell {index} changed"
        assert _cell_text(old) in before_text and _cell_text(new) in after_text, f"cell {index} is not byte-identical"
    run_cell_before, run_cell_after = before["cells"][RUN_CELL], after["cells"][RUN_CELL]
    assert run_cell_after["source"] == run_cell_before["source"]
    data = next(o["data"] for o in run_cell_after["outputs"] if RUN_MIME in o.get("data", {}))
    header, records = verify(data[RUN_MIME])
    assert header["status"] == "done"
    assert after["metadata"]["mkl"]["runs"]["refund"] == data[RUN_MIME]  # the two copies say the same
    assert REFUND_RESULT in "".join(data["text/plain"])
    [reply] = [record for record in records if record["t"] == "reply"]  # the audit travels in the file
    assert (reply["value"], reply["claimed"], reply["via"]) == ("approve", "approver", "notebook-file")
    shown = "".join(data["text/plain"])  # and the file's view of the run shows who answered
    assert "↳ answered approve → approval (by " in shown and "via notebook-file · key " in shown
    assert "<strong>answered</strong> <code>approve → approval</code> by " in "".join(data["text/html"])
    # Where the form stood, the file no longer presents the question as pending: it says who answered.
    place = next(o["data"] for o in run_cell_after["outputs"] if FORM_MIME in o.get("data", {}))
    assert WIDGET_MIME not in place
    assert "".join(place["text/plain"]).startswith("Answered 'approve' (by ")
    assert "via notebook-file" in "".join(place["text/html"])
    assert "The question is above" not in shown

    listing = _mkl("runs", copy_of.name, cwd=folder)
    assert listing.returncode == 0
    [run] = _status(listing)["runs"]
    assert (run["run"], run["status"]) == ("refund", "done")


def test_mkl_resume_with_the_wrong_reply_path_changes_nothing(copy_of: Path) -> None:
    before = copy_of.read_bytes()
    completed = _mkl(
        "resume",
        copy_of.name,
        "--run",
        "refund",
        "--set",
        "human.reply=approve",
        "--script",
        str(REFUND_SCRIPT),
        cwd=copy_of.parent,
    )
    assert completed.returncode == 2
    assert "approval" in completed.stderr
    assert "Traceback" not in completed.stderr + completed.stdout
    assert copy_of.read_bytes() == before


def _one_line_error(completed: subprocess.CompletedProcess[str]) -> str:
    assert completed.returncode == 2, (completed.returncode, completed.stdout, completed.stderr)
    assert "Traceback" not in completed.stdout + completed.stderr
    lines = completed.stderr.strip().splitlines()
    assert len(lines) == 1, completed.stderr
    assert lines[0].startswith("mkl: error: ")
    assert _status(completed)["status"] == "error"
    return lines[0]


def test_a_notebook_without_runs_is_a_clear_one_line_error(tmp_path: Path) -> None:
    path = tmp_path / "plain.ipynb"
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("1 + 1"), nbformat.v4.new_markdown_cell("nothing to resume")]
    nbformat.write(nb, path)
    before = path.read_bytes()
    message = _one_line_error(
        _mkl(
            "resume",
            path.name,
            "--run",
            "refund",
            "--set",
            "approval=approve",
            "--script",
            str(REFUND_SCRIPT),
            cwd=tmp_path,
        )
    )
    assert "plain.ipynb" in message and "refund" in message
    message = _one_line_error(_mkl("resume", path.name, "--set", "approval=approve", cwd=tmp_path))
    assert "--run" in message
    assert path.read_bytes() == before
    listing = _mkl("runs", path.name, cwd=tmp_path)
    assert listing.returncode == 0 and _status(listing)["runs"] == []


def _waiting_question(path: Path, run_id: str) -> str:
    """The question a run in a notebook file waits on, as `mkl runs FILE` tells it (with the command to answer)."""
    listed = next(run for run in _status(_mkl("runs", path.name, cwd=path.parent))["runs"] if run["run"] == run_id)
    assert listed["command"].startswith(f"mkl resume {path.name} --run {run_id} --script ")
    assert listed["command"].endswith(f" --question {listed['question_id']} --reply approve")
    return str(listed["question_id"])


def _approve_headless(path: Path, *flags: str) -> subprocess.CompletedProcess[str]:
    """``mkl resume FILE --run refund --question … --set approval=approve``, as `mkl runs` says to."""
    question = _waiting_question(path, "refund")
    return _mkl(
        "resume",
        path.name,
        "--run",
        "refund",
        "--question",
        question,
        "--set",
        "approval=approve",
        *flags,
        "--script",
        str(REFUND_SCRIPT),
        cwd=path.parent,
    )


def _corrupt(path: Path) -> None:
    """Flip one character inside the embedded journal (the JSON stays valid; the digest no longer matches)."""
    notebook = json.loads(path.read_text(encoding="utf-8"))
    output = next(o for o in notebook["cells"][RUN_CELL]["outputs"] if RUN_MIME in o.get("data", {}))
    journal = output["data"][RUN_MIME]["journal"]
    if journal["encoding"] == "json":
        text = json.dumps(journal["records"])
        assert "A-1001" in text
        journal["records"] = json.loads(text.replace("A-1001", "A-1009", 1))
    else:
        data = journal["data"]
        journal["data"] = data[:40] + ("A" if data[40] != "A" else "B") + data[41:]
    path.write_text(json.dumps(notebook, sort_keys=True, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")


def test_a_corrupted_checkpoint_is_refused_in_one_line_and_nothing_is_written(copy_of: Path) -> None:
    _corrupt(copy_of)
    before = copy_of.read_bytes()
    message = _one_line_error(
        _mkl(
            "resume",
            copy_of.name,
            "--run",
            "refund",
            "--set",
            "approval=approve",
            "--script",
            str(REFUND_SCRIPT),
            cwd=copy_of.parent,
        )
    )
    assert "shared.ipynb" in message
    assert copy_of.read_bytes() == before
    # the person must learn that the checkpoint is damaged, not that the run does not exist
    assert any(word in message for word in ("damaged", "digest", "changed", "corrupt", "tampered")), message


def test_mkl_runs_does_not_hide_a_corrupted_checkpoint(copy_of: Path) -> None:
    _corrupt(copy_of)
    before = copy_of.read_bytes()
    completed = _mkl("runs", copy_of.name, cwd=copy_of.parent)
    assert "Traceback" not in completed.stdout + completed.stderr
    assert copy_of.read_bytes() == before
    shown = completed.stdout + completed.stderr
    assert any(word in shown for word in ("damaged", "digest", "changed", "corrupt", "tampered")), shown


def test_a_file_that_is_not_a_notebook_is_a_one_line_error(tmp_path: Path) -> None:
    path = tmp_path / "broken.ipynb"
    path.write_text('{"cells": [', encoding="utf-8")
    before = path.read_bytes()
    message = _one_line_error(_mkl("resume", path.name, "--run", "refund", "--reply", "approve", cwd=tmp_path))
    assert "broken.ipynb" in message and "not a notebook" in message
    _one_line_error(_mkl("runs", path.name, cwd=tmp_path))
    assert path.read_bytes() == before


def test_the_api_and_the_cli_agree_on_the_result(
    copy_of: Path, tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The Python API and `mkl resume`, each on its own copy of the file with no store, finish alike."""
    import mkl_notebook
    from mkl_notebook.notebook import session as session_module

    api_folder = tmp_path_factory.mktemp("api")
    shutil.copyfile(copy_of, api_folder / "shared.ipynb")
    monkeypatch.chdir(api_folder)
    monkeypatch.setattr(session_module, "_SESSION", None)
    mkl_notebook.define(REFUND)
    run = mkl_notebook.run(
        "refund", script=str(REFUND_SCRIPT), notebook="shared.ipynb", input={"ticket": TICKET}
    )  # the same cell, run again
    assert (run.status, run.calls["made"]) == ("suspended", 0)
    run.submit("approve")
    cli = _status(_approve_headless(copy_of))
    assert (run.status, run.result) == (cli["status"], cli["result"]) == ("done", REFUND_RESULT)


def test_mkl_runs_lists_a_notebooks_runs_by_when_they_last_changed_not_by_cell(tmp_path: Path) -> None:
    """Two runs, one per cell, the first cell's answered afterwards: it is listed last, in text and JSON."""
    path = tmp_path / "two.ipynb"
    nb = nbformat.v4.new_notebook()
    run = f'%mkl run refund --script {REFUND_SCRIPT} --set ticket="{TICKET}" --notebook {path}'
    nb.cells = [
        nbformat.v4.new_code_cell("%load_ext mkl_notebook"),
        nbformat.v4.new_code_cell("%%mkl\n" + REFUND),
        nbformat.v4.new_code_cell(f"{run} --id answered-later"),
        nbformat.v4.new_code_cell(f"{run} --id asked-second"),
    ]
    nbformat.write(nb, path)
    run_all(path)
    listed = _mkl("runs", path.name, cwd=tmp_path)
    assert [run["run"] for run in _status(listed)["runs"]] == ["answered-later", "asked-second"]  # as asked
    question = next(r for r in _status(listed)["runs"] if r["run"] == "answered-later")["question_id"]
    answered = _mkl(
        "resume", path.name, "--run", "answered-later", "--question", question, "--set", "approval=approve",
        "--script", str(REFUND_SCRIPT), cwd=tmp_path,
    )  # fmt: skip
    assert answered.returncode in (0, 3), answered.stderr
    listed = _mkl("runs", path.name, cwd=tmp_path)
    assert [run["run"] for run in _status(listed)["runs"]] == ["asked-second", "answered-later"]
    lines = [line.split()[0] for line in listed.stdout.splitlines() if line.startswith(("asked-", "answered-"))]
    assert lines == ["asked-second", "answered-later"]
