"""A notebook replays cell by cell: each cell shows the run as it left it, for free, from any machine.

The notebooks are executed as JupyterLab executes them (the kernel knows the file and each
cell's id, see ``lab_client``), in a real kernel.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path
from typing import Any

import nbformat
import pytest
from lab_client import LabClient, run_all

from mkl_notebook.checkpoints.envelope import verify
from mkl_notebook.checkpoints.notebook_file import FORM_MIME, embedded_runs

from support import REFUND, REFUND_RESULT, REFUND_SCRIPT, RUN_MIME, WIDGET_MIME, store_rows

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

RUN, QUESTION, RESUME, AFTER = 2, 3, 4, 5  # cell indexes of the notebook below


def _notebook(path: Path, run_flags: str = "") -> Path:
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell("%load_ext mkl_notebook\nimport mkl_notebook"),
        nbformat.v4.new_code_cell("%%mkl\n" + REFUND),
        nbformat.v4.new_code_cell(f"%mkl run refund --script {REFUND_SCRIPT} --set ticket=broken {run_flags}"),
        nbformat.v4.new_code_cell('q = mkl_notebook.get_run("refund").question_id\nprint("asked", q)'),
        nbformat.v4.new_code_cell("%mkl resume refund --question $q --set approval=approve"),
        nbformat.v4.new_code_cell('run = mkl_notebook.get_run("refund")\nprint(run.status, run.result)'),
    ]
    nbformat.write(nb, path)
    return path


def _outputs(cell: Any) -> list[Any]:
    """A cell's outputs as JupyterLab keeps them: consecutive stream outputs of one stream joined into one (a
    kernel may send one ``print`` as two messages when it is slow, and nbclient keeps each message)."""
    joined: list[Any] = []
    for output in cell.get("outputs", []):
        last = joined[-1] if joined else None
        follows = last is not None and last["output_type"] == "stream" and last["name"] == output.get("name")
        if output["output_type"] == "stream" and follows:
            joined[-1] = {**last, "text": "".join(last["text"]) + "".join(output["text"])}
        else:
            joined.append(output)
    return joined


def _texts(nb: Any) -> list[str]:
    """Every output as a person reads it, with the clock taken out (a replay shows the same as the first run)."""
    found = []
    for cell in nb.cells:
        for output in _outputs(cell):
            if output["output_type"] == "error":
                found.append(f"ERROR {output['ename']}: {output['evalue']}")
                continue
            text = output.get("text") or output.get("data", {}).get("text/plain", "")
            text = re.sub(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC", "TIME", text)
            found.append(text)
    return found


def _errors(nb: Any) -> list[str]:
    return [text for text in _texts(nb) if text.startswith("ERROR") or "UsageError" in text]


def _saved(nb: Any) -> str:
    """The notebook as JupyterLab saves it by default: without the executor's timing of each cell, and with a
    stream's consecutive outputs joined."""
    nb = nbformat.from_dict(nb)
    for cell in nb.cells:
        cell.metadata.pop("execution", None)
        if "outputs" in cell:
            cell.outputs = [nbformat.from_dict(output) for output in _outputs(cell)]
    return nbformat.writes(nb)


def _answers(folder: Path) -> list[str]:
    """The model (here: scripted), tool and hook answers journaled in the folder's run store: a replay adds
    none, a call made anew adds one."""
    rows = store_rows(folder / ".mkl" / "runs.sqlite")
    return sorted(body for _run, _seq, body in rows if json.loads(body).get("t") == "answer")


def _data(nb: Any, index: int, mime: str) -> dict[str, Any]:
    found = [o["data"] for o in nb.cells[index].outputs if mime in o.get("data", {})]
    assert len(found) == 1, nb.cells[index].outputs
    return found[0]


def test_restart_and_run_all_shows_each_cell_as_it_left_it_without_calls(tmp_path: Path) -> None:
    path = _notebook(tmp_path / "approve.ipynb")
    first = run_all(path)
    assert _errors(first) == []
    made = _answers(tmp_path)
    assert made
    printed = _outputs(first.cells[AFTER])[0]["text"]  # joined: one print may come in several outputs
    assert "done " + REFUND_RESULT in printed

    again = run_all(path)  # Restart & Run All: the same store, a new kernel
    assert _errors(again) == []
    assert _texts(again) == _texts(first)
    assert _answers(tmp_path) == made  # every answer came from the journal
    assert _saved(again) == _saved(first)  # the saved file, byte for byte

    run_view = _data(again, RUN, RUN_MIME)
    header, _ = verify(run_view[RUN_MIME])
    assert header["status"] == "suspended"  # the run cell shows its own suspension, as it left it ...
    assert "The run went on after this cell: answered 'approve'" in run_view["text/plain"]  # ... and what came
    place = _data(again, RUN, FORM_MIME)
    assert WIDGET_MIME not in place  # no live form for a question that is answered
    assert place["text/plain"].startswith("Answered 'approve' (by ")  # said by whom, when and how
    assert "via notebook" in place["text/plain"]
    resumed, _ = verify(_data(again, RESUME, RUN_MIME)[RUN_MIME])
    assert resumed["status"] == "done"  # the resume cell replays its own part instead of failing

    clone = tmp_path / "clone"  # someone else, with only the file: no store
    clone.mkdir()
    shutil.copy(path, clone / path.name)
    cloned = run_all(clone / path.name)
    assert _errors(cloned) == []
    assert _texts(cloned) == _texts(first)
    assert _answers(clone) == made  # taken up from the file: the same answers, none made anew


def test_re_executing_a_resume_cell_in_the_same_kernel_replays_it(tmp_path: Path) -> None:
    path = _notebook(tmp_path / "again.ipynb")
    nb = nbformat.read(path, as_version=4)
    client = LabClient(nb, path, timeout=120)
    with client.setup_kernel(env={**os.environ, "JPY_SESSION_NAME": str(path)}):
        for index, cell in enumerate(nb.cells):
            client.execute_cell(cell, index)
        before = _texts(nb)
        client.execute_cell(nb.cells[RESUME], RESUME)  # run the approval cell once more
        client.execute_cell(nb.cells[AFTER], AFTER)
    assert _errors(nb) == []
    assert _texts(nb) == before  # it shows what it did, and approves nothing twice
    header, records = verify(_data(nb, RESUME, RUN_MIME)[RUN_MIME])
    assert header["status"] == "done"
    assert [r["value"] for r in records if r["t"] == "reply"] == ["approve"]


def test_an_edited_request_is_carried_out_and_fresh_brings_the_form_back(tmp_path: Path) -> None:
    path = _notebook(tmp_path / "edit.ipynb")
    run_all(path)
    before = store_rows(tmp_path / ".mkl" / "runs.sqlite")
    nb = nbformat.read(path, as_version=4)
    nb.cells[RUN].source += " --fresh"
    nbformat.write(nb, path)
    fresh = run_all(path)
    assert _errors(fresh) == []
    after = store_rows(tmp_path / ".mkl" / "runs.sqlite")
    assert after != before and _answers(tmp_path)  # started over: a new journal, the model asked again
    # the run cell's form came back, and the resume cell below answered it anew: the form's place says so
    place = _data(fresh, RUN, FORM_MIME)
    assert WIDGET_MIME not in place and place["text/plain"].startswith("Answered 'approve' (by ")
    replies = [r for r in verify(_data(fresh, RESUME, RUN_MIME)[RUN_MIME])[1] if r["t"] == "reply"]
    assert len(replies) == 1  # the journal started over: one answer, given again
    header, _ = verify(_data(fresh, RESUME, RUN_MIME)[RUN_MIME])
    assert header["status"] == "done"


def _clone_of_diagnostics(folder: Path) -> Path:
    shutil.copytree(ROOT / "notebooks" / "data", folder / "data", ignore=shutil.ignore_patterns(".mkl"))
    path = folder / "04-diagnostics.ipynb"
    shutil.copy(ROOT / "notebooks" / path.name, path)
    return path


def test_a_clone_of_the_diagnostics_tutorial_makes_runs_of_its_own_and_says_nothing_about_keys(tmp_path: Path) -> None:
    """The tutorial ships its outputs but not its runs, which would be sealed by whoever built it, a key no reader
    knows (issue 37): a reader's first Run All makes runs of their own under the cells' ids, says nothing about
    keys, and shows what was saved; each run cell shows its own part of the runs."""
    path = _clone_of_diagnostics(tmp_path / "notebooks")
    saved = nbformat.read(path, as_version=4)
    assert embedded_runs(path) == [] and "mkl" not in saved.metadata
    ran = run_all(path, env={"JUPYTER_DATA_DIR": str(tmp_path / "a-readers-jupyter-data")})
    assert _errors(ran) == []
    texts = _texts(ran)
    assert [text for text in texts if "unknown key" in text or "signed as" in text or "Not the run saved" in text] == []
    assert texts == _texts(saved)
    assert {run.run_id for run in embedded_runs(path)} == {"budget", "ceiling", "patient"}  # the reader's own
    suspended = [
        verify(o["data"][RUN_MIME])[0]
        for cell in ran.cells
        for o in cell.get("outputs", [])
        if RUN_MIME in o.get("data", {}) and verify(o["data"][RUN_MIME])[0]["run_id"] == "patient"
    ]
    assert [(h["status"], h["error"]) for h in suspended] == [
        ("suspended", "budget-exhausted"),  # the --max-steps 3 cell, as it left the run
        ("halt", "loop-ceiling"),  # the resume cell
    ]


def test_a_run_first_met_through_get_run_is_shown_as_the_cells_below_found_it(tmp_path: Path) -> None:
    """03's kernel rehydrates a shared run with ``get_run`` and answers it from Python in the next cell:
    Restart & Run All shows the run waiting in the first cell again, and replays the answers in the next."""
    folder = tmp_path / "notebooks"
    shutil.copytree(ROOT / "notebooks" / "data", folder / "data", ignore=shutil.ignore_patterns(".mkl"))
    path = folder / "03-share-and-resume.ipynb"
    shutil.copy(ROOT / "notebooks" / path.name, path)
    first = run_all(path)
    again = run_all(path)
    sources = [cell.source for cell in again.cells]
    rehydrate = next(i for i, source in enumerate(sources) if "mkl_notebook.get_run(" in source)
    answer = next(i for i, source in enumerate(sources) if "run.submit(" in source)
    for index in (rehydrate, answer):  # (a print may reach the file as one stream output or as several)
        assert "".join(_texts(nbformat.v4.new_notebook(cells=[again.cells[index]]))) == "".join(
            _texts(nbformat.v4.new_notebook(cells=[first.cells[index]]))
        )
    waiting = "".join(_texts(nbformat.v4.new_notebook(cells=[again.cells[rehydrate]])))
    assert waiting.startswith("suspended at confirm")
    assert "'made': 0" in waiting
    assert "done" in "".join(_texts(nbformat.v4.new_notebook(cells=[again.cells[answer]])))
    assert _errors(again) == []
