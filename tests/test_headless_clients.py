"""Notebooks executed headless — papermill, ``jupyter nbconvert --execute``, nbclient — and stripped by the tools
people put in their pipelines (nbstripout, ``nbconvert --clear-output``) keep their runs.

Real clients in subprocesses, real kernels, the ``mkl`` command; scripted models (a run's journal counts every
call it made, so an unchanged journal is a re-execution that called nothing).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import nbformat
import pytest
from lab_client import run_all
from nbclient import NotebookClient

from mkl_notebook.checkpoints import notebook_file as nbfile
from mkl_notebook.checkpoints.seals import signatures
from mkl_notebook.durable.stores import SQLiteStore

from support import ROOT, WIDGET_MIME, env_without_models, mkl_cli, store_rows

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

DATA = ROOT / "notebooks" / "data"
FIRST = "The draft promises a refund. Approve it?"
SECOND = "Send this reply to the customer now?"
TICKET = "Parcel A-1001 arrived broken"
RUN_CELL = "%mkl run refund --id pm --hitl --set ticket=$ticket --script data/refund.script.yaml"
COMM_WARNING = "No handler found for comm target"
UNCLEAR = "This kernel cannot tell which notebook it runs"


def _parameterised(path: Path) -> None:
    """A notebook with papermill's parameter cell (tag ``parameters``) that its run cell uses."""
    cells = [
        nbformat.v4.new_code_cell("%load_ext mkl_notebook"),
        nbformat.v4.new_code_cell("%%mkl\n" + (DATA / "refund.mkl").read_text(encoding="utf-8")),
        nbformat.v4.new_code_cell('ticket = "nothing yet"', metadata={"tags": ["parameters"]}),
        nbformat.v4.new_code_cell(RUN_CELL),
    ]
    notebook = nbformat.v4.new_notebook(cells=cells)
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(notebook, path)


def _client(folder: Path, *command: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """A client as a person types it in ``folder``; it must succeed."""
    done = subprocess.run(
        [sys.executable, "-m", *command],
        cwd=folder,
        env={**env_without_models(), **(env or {})},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done


def _papermill(folder: Path, source: str, output: str) -> subprocess.CompletedProcess[str]:
    return _client(folder, "papermill", source, output, "-p", "ticket", TICKET, "--no-progress-bar")


def _nbconvert(folder: Path, name: str, *flags: str) -> subprocess.CompletedProcess[str]:
    return _client(folder, "jupyter", "nbconvert", "--to", "notebook", "--execute", *flags, name)


def _texts(cell: Any) -> str:
    """What a cell shows a reader: its text outputs, streams and errors."""
    shown = []
    for output in cell.get("outputs", []):
        data = output.get("data", {})
        shown.append("".join(data.get("text/plain", "")) + "".join(output.get("text", "")))
        shown.append(output.get("evalue", ""))
    return "\n".join(shown)


def _diagram(cell: Any) -> str:
    """The SVG drawings of the diagrams a cell shows."""
    return "".join("".join(output.get("data", {}).get("image/svg+xml", "")) for output in cell.outputs)


def _run_cell(notebook: Path) -> Any:
    [cell] = [cell for cell in nbformat.read(notebook, as_version=4).cells if cell.source == RUN_CELL]
    return cell


def _journal(folder: Path) -> list[str]:
    """Every journal row of the folder's run store (none when there is no store): a call made adds one."""
    return [repr(row) for row in store_rows(folder / ".mkl" / "runs.sqlite")]


def _joined_streams(outputs: list[Any]) -> list[Any]:
    """Outputs with each run of consecutive stream outputs of one stream joined, as a reader sees them (how the
    kernel cuts what a cell prints into messages depends on its timing, not on what it prints)."""
    joined: list[Any] = []
    for output in outputs:
        last = joined[-1] if joined else {}
        if output.get("output_type") == last.get("output_type") == "stream" and last["name"] == output.get("name"):
            joined[-1] = {**last, "text": last["text"] + output["text"]}
            continue
        joined.append(dict(output))
    return joined


def _outputs(notebook: Path) -> list[str]:
    """Each code cell's outputs as the file holds them; what a cell printed is compared as printed, however the
    kernel cut it into stream messages."""
    return [
        json.dumps(_joined_streams(cell.outputs), sort_keys=True)
        for cell in nbformat.read(notebook, as_version=4).cells
        if cell.cell_type == "code"
    ]


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One folder executed the ways people execute it, each way once:

    - ``papermill param.ipynb out.ipynb`` twice (``out.ipynb`` kept from each as ``out-1.ipynb``,
      ``out-2.ipynb``), with the run store's journal after each (``journal-1.json``, ``journal-2.json``);
    - then ``jupyter nbconvert --execute --inplace ip.ipynb``, ``ip.ipynb`` a copy of ``param.ipynb`` made
      before: three notebooks in the folder hold the cells the kernel executes (stderr of each client kept)."""
    folder = tmp_path_factory.mktemp("headless")
    shutil.copytree(DATA, folder / "data")
    _parameterised(folder / "param.ipynb")
    shutil.copy(folder / "param.ipynb", folder / "ip.ipynb")
    stderr = []
    for turn in (1, 2):
        stderr.append(_papermill(folder, "param.ipynb", "out.ipynb").stderr)
        shutil.copy(folder / "out.ipynb", folder / f"out-{turn}.ipynb")
        (folder / f"journal-{turn}.json").write_text(json.dumps(_journal(folder)), encoding="utf-8")
    stderr.append(_nbconvert(folder, "ip.ipynb", "--inplace").stderr)
    (folder / "stderr.txt").write_text("\n".join(stderr), encoding="utf-8")
    return folder


def test_papermill_twice_into_one_folder_names_its_output_and_calls_nothing_the_second_time(folder: Path) -> None:
    first = _texts(_run_cell(folder / "out-1.ipynb"))
    assert FIRST in first and "mkl resume out.ipynb --run pm" in first  # where the person finds the run
    assert "param.ipynb" not in first and UNCLEAR not in first
    journal = json.loads((folder / "journal-1.json").read_text(encoding="utf-8"))
    assert journal == json.loads((folder / "journal-2.json").read_text(encoding="utf-8"))  # no call the 2nd time
    assert _outputs(folder / "out-2.ipynb") == _outputs(folder / "out-1.ipynb")


def test_a_folder_of_copies_of_one_notebook_reads_true_in_the_one_executed(folder: Path) -> None:
    shown = _texts(_run_cell(folder / "ip.ipynb"))
    assert FIRST in shown and "mkl resume ip.ipynb --run pm" in shown
    assert "No question waits here" not in shown and "went on" not in shown and UNCLEAR not in shown


def test_no_client_logs_a_comm_no_frontend_handles(folder: Path) -> None:
    stderr = (folder / "stderr.txt").read_text(encoding="utf-8")
    assert "Executing notebook with kernel" in stderr  # (papermill's log is there to read)
    assert COMM_WARNING not in stderr


def _execute_here(folder: Path, cells: list[str], env: dict[str, str] | None = None) -> Any:
    """Execute ``cells`` with nbclient from this test's process (whose command line names no notebook), the
    kernel in ``folder``: a client that tells the kernel nothing of the notebook."""
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(source) for source in cells])
    client = NotebookClient(
        notebook, kernel_name="python3", timeout=120, allow_errors=True, resources={"metadata": {"path": str(folder)}}
    )
    client.execute(env={**env_without_models(), **(env or {})})
    return notebook


def test_where_the_files_leave_it_unclear_the_kernel_says_so_once_and_makes_no_run_anew(
    folder: Path, tmp_path: Path
) -> None:
    here = tmp_path / "copies"
    shutil.copytree(folder, here, ignore=shutil.ignore_patterns(".mkl", "out-*", "*.json", "*.txt"))
    assert not (here / ".mkl").exists()  # no store: only the files carry the run
    cells = [source for source in (c.source for c in nbformat.read(here / "param.ipynb", as_version=4).cells)]
    for name in ("param.ipynb", "ip.ipynb", "out.ipynb"):  # a second cell that uses mkl, in every copy
        copy = nbformat.read(here / name, as_version=4)
        copy.cells.append(nbformat.v4.new_code_cell("%mkl pending"))
        nbformat.write(copy, here / name)
    ran = _execute_here(here, [*cells, "%mkl pending", "%mkl notebook"])
    shown = "\n".join(_texts(cell) for cell in ran.cells)
    assert shown.count(UNCLEAR) == 2  # once when it first looked, and where %mkl notebook asks
    assert "%mkl notebook PATH" in shown and "MKL_NOTEBOOK=PATH" in shown
    refused = _texts(ran.cells[3])
    assert "run 'pm' is carried by ip.ipynb, out.ipynb" in refused and "nor made anew" in refused
    assert not _journal(here)  # nothing was run in its place

    for named in (["%mkl notebook ip.ipynb"], []):  # said in a cell, or in the environment
        chosen = _execute_here(
            here, [cells[0], *named, *cells[1:], "%mkl notebook"], env={} if named else {"MKL_NOTEBOOK": "ip.ipynb"}
        )
        said = "\n".join(_texts(cell) for cell in chosen.cells)
        assert UNCLEAR not in said and FIRST in said and "mkl resume ip.ipynb --run pm" in said
        assert f"ip.ipynb: {'named by %mkl notebook' if named else 'MKL_NOTEBOOK'}." in said
        held = SQLiteStore(here / ".mkl" / "runs.sqlite", read_only=True).read("pm")
        assert held == nbfile.find_run(here / "ip.ipynb", "pm").records  # taken up as the file had it: no call


def test_a_headless_resume_redraws_the_runs_diagram_and_forms(folder: Path, tmp_path: Path) -> None:
    here = tmp_path / "resumed"
    shutil.copytree(folder, here, ignore=shutil.ignore_patterns(".mkl"))
    before = _run_cell(here / "out-1.ipynb")
    # papermill saved no form: nobody could click it, and its widgets would be dead controls in the file
    assert FIRST in _texts(before) and not any(WIDGET_MIME in output.get("data", {}) for output in before.outputs)
    assert "widgets" not in nbformat.read(here / "out-1.ipynb", as_version=4).metadata
    assert "confirm · pending" in _diagram(before)
    code, listing, _, err = mkl_cli(here, "runs", "out-1.ipynb")
    assert code == 0, err
    [listed] = listing["runs"]
    code, status, _, err = mkl_cli(
        here, "resume", "out-1.ipynb", "--run", "pm", "--question", listed["question_id"],
        "--set", "refund_approval=approve", "--script", "data/refund.script.yaml",
    )  # fmt: skip
    assert (code, status["ask"]) == (3, SECOND), err
    after = _run_cell(here / "out-1.ipynb")
    shown = _texts(after)
    assert "release · pending" in _diagram(after) and "· pending" not in _diagram(after).replace("release · ", "")
    assert "  * release · pending" in shown.splitlines()  # the diagram's text too
    assert SECOND in shown and FIRST not in shown.split("Trace of pm")[0]  # the question asked now, not the old
    assert not any(WIDGET_MIME in output.get("data", {}) for output in after.outputs)

    # A notebook run where a person could click (a Jupyter server's kernel) keeps its form; answered from a terminal,
    # the file is left with no dead form below the question.
    lab = tmp_path / "lab"
    lab.mkdir()
    shutil.copytree(DATA, lab / "data")
    _parameterised(lab / "lab.ipynb")
    run_all(lab / "lab.ipynb", env={**env_without_models(), "MKL_NOTEBOOK": "lab.ipynb"})
    before = _run_cell(lab / "lab.ipynb")
    assert any(WIDGET_MIME in output.get("data", {}) for output in before.outputs)
    [listed] = mkl_cli(lab, "runs", "lab.ipynb")[1]["runs"]
    code, _, _, err = mkl_cli(
        lab, "resume", "lab.ipynb", "--run", "pm", "--question", listed["question_id"],
        "--set", "refund_approval=approve", "--script", "data/refund.script.yaml",
    )  # fmt: skip
    assert code == 3, err
    after = _run_cell(lab / "lab.ipynb")
    assert SECOND in _texts(after)
    assert not any(WIDGET_MIME in output.get("data", {}) for output in after.outputs)  # no dead form left


@pytest.mark.parametrize("client", ["nbconvert", "execute"])
def test_a_headless_client_saves_no_form_nor_queue_and_the_printed_commands_answer(tmp_path: Path, client: str) -> None:
    """A run and a batch waiting for people in a notebook ``jupyter nbconvert --execute`` (or ``jupyter execute``)
    runs: the questions and the commands are printed, no form's or queue's widget is saved into the file (nothing
    a reader could click), and a printed command answers a row in the file."""
    shutil.copytree(DATA, tmp_path / "data")
    cells = [
        nbformat.v4.new_code_cell("%load_ext mkl_notebook"),
        nbformat.v4.new_code_cell("%%mkl\n" + (DATA / "refund.mkl").read_text(encoding="utf-8")),
        nbformat.v4.new_code_cell(f"ticket = {TICKET!r}"),
        nbformat.v4.new_code_cell(RUN_CELL),
        nbformat.v4.new_code_cell(
            'rows = [{"id": f"t{n}", "ticket": f"Parcel A-{n} arrived broken"} for n in range(3)]\n'
            "%mkl map refund --over $rows --key id --hitl --script data/refund.script.yaml"
        ),
    ]
    notebook = nbformat.v4.new_notebook(cells=cells)
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(notebook, tmp_path / "nb.ipynb")
    if client == "nbconvert":
        _nbconvert(tmp_path, "nb.ipynb", "--inplace")
    else:  # nbclient's own command
        _client(tmp_path, "jupyter", "execute", "--inplace", "nb.ipynb")

    saved = nbformat.read(tmp_path / "nb.ipynb", as_version=4)
    models = saved.metadata.get("widgets", {}).get("application/vnd.jupyter.widget-state+json", {}).get("state", {})
    assert not [m for m in models.values() if "mkl-form" in m["state"].get("_dom_classes", [])], models
    run_cell, map_cell = saved.cells[3], saved.cells[4]
    assert not any(WIDGET_MIME in output.get("data", {}) for output in run_cell.outputs)
    # nor an empty place kept for a form: the question, the run's view and its diagram, each saying something
    assert [bool("".join(o.get("data", {}).get("text/plain", ""))) for o in run_cell.outputs] == [True] * 3
    shown = [o for o in map_cell.outputs if o.output_type == "display_data"]
    assert shown and all("".join(o.get("data", {}).get("text/plain", "")) for o in shown), shown  # none empty
    printed = _texts(map_cell)
    commands = re.findall(r"mkl resume nb\.ipynb --run (\S+) .*--question (q-[0-9a-f]+) .*--reply approve", printed)
    assert len(commands) == 3, printed  # each row's question, with the command that answers it
    assert FIRST in _texts(run_cell) and "mkl resume nb.ipynb --run pm" in _texts(run_cell)

    run_id, question = commands[0]
    code, status, _, err = mkl_cli(
        tmp_path, "resume", "nb.ipynb", "--run", run_id, "--question", question,
        "--set", "refund_approval=approve", "--script", "data/refund.script.yaml",
    )  # fmt: skip
    assert (code, status["ask"]) == (3, SECOND), err


@pytest.mark.parametrize("tutorial", ["02-human-approval", "03-share-and-resume", "04-diagnostics", "waiting"])
@pytest.mark.parametrize("inplace", [True, False], ids=["inplace", "to-output"])
def test_nbconvert_execute_twice_shows_the_same_and_calls_nothing_the_second_time(
    tmp_path: Path, tutorial: str, inplace: bool
) -> None:
    shutil.copytree(DATA, tmp_path / "data")
    name = f"{tutorial}.ipynb"
    if tutorial == "waiting":
        _parameterised(tmp_path / name)
    else:
        shutil.copy(ROOT / "notebooks" / name, tmp_path / name)
    written = tmp_path / (name if inplace else f"{tutorial}.nbconvert.ipynb")
    flags = ["--inplace"] if inplace else []
    first_run = _nbconvert(tmp_path, name, *flags)
    first, journal = _outputs(written), _journal(tmp_path)
    second_run = _nbconvert(tmp_path, name, *flags)
    assert _journal(tmp_path) == journal  # every run taken up from the store: no call made, nothing re-run
    assert _outputs(written) == first
    for run in (first_run, second_run):
        assert COMM_WARNING not in run.stderr
        assert "Traceback" not in "\n".join(_texts(cell) for cell in nbformat.read(written, as_version=4).cells)


# -- runs that live only in outputs, and the tools that strip outputs ------------------------------------------


CLEAR_METADATA_CONFIG = """\
c.ClearMetadataPreprocessor.enabled = True
c.ClearMetadataPreprocessor.preserve_nb_metadata_mask = {("language_info", "name"), "mkl"}
"""  # as docs/notebooks.md gives it


NBCONVERT_CLEARING = ["jupyter", "nbconvert", "--to", "notebook", "--inplace", "--ClearOutputPreprocessor.enabled=True"]


def _strip(folder: Path, name: str, how: str) -> None:
    (folder / "strip_config.py").write_text(CLEAR_METADATA_CONFIG, encoding="utf-8")
    commands = {
        "nbstripout": ["nbstripout", name],
        "nbstripout --keep-output": ["nbstripout", "--keep-output", name],
        "nbconvert --clear-output": ["jupyter", "nbconvert", "--clear-output", "--inplace", name],
        "ClearMetadataPreprocessor": [*NBCONVERT_CLEARING, "--config", "strip_config.py", name],
    }
    _client(folder, *commands[how])


STRIPPERS = ["nbstripout", "nbstripout --keep-output", "nbconvert --clear-output", "ClearMetadataPreprocessor"]


@pytest.mark.parametrize("how", STRIPPERS)
def test_a_papermill_output_kept_with_mkl_keep_survives_stripping_and_its_run_finishes(
    folder: Path, tmp_path: Path, how: str
) -> None:
    shutil.copytree(DATA, tmp_path / "data")  # another folder: no store, the file alone carries the run
    shutil.copy(folder / "out-1.ipynb", tmp_path / "out.ipynb")
    code, _, out, err = mkl_cli(tmp_path, "runs", "out.ipynb")
    assert code == 0 and "stripping them (nbstripout, nbconvert --clear-output) would lose it" in out, err
    assert "`mkl keep out.ipynb` keeps it" in out

    code, status, out, err = mkl_cli(tmp_path, "keep", "out.ipynb")
    assert (code, status["kept"]) == (0, {"out.ipynb": ["pm"]}), err
    kept = (tmp_path / "out.ipynb").read_bytes()
    assert mkl_cli(tmp_path, "keep", "out.ipynb")[1]["kept"] == {"out.ipynb": []}
    assert (tmp_path / "out.ipynb").read_bytes() == kept  # a second call changes no byte
    carried = nbfile.find_run(tmp_path / "out.ipynb", "pm")
    assert carried.in_metadata and all(stretch.seal and stretch.seal.holds for stretch in signatures(carried.records))
    assert json.loads(kept)["metadata"]["mkl"]["runs"]["pm"] == nbfile.find_run(folder / "out-1.ipynb", "pm").raw

    _strip(tmp_path, "out.ipynb", how)
    code, listing, out, err = mkl_cli(tmp_path, "runs", "out.ipynb")
    assert code == 0 and "would lose it" not in out, err
    [listed] = listing["runs"]
    assert listed["ask"] == FIRST
    for reply in (["--set", "refund_approval=approve"], ["--reply", "approve"]):
        code, status, _, err = mkl_cli(
            tmp_path, "resume", "out.ipynb", "--run", "pm", "--question", listed["question_id"], *reply,
            "--script", "data/refund.script.yaml",
        )  # fmt: skip
        assert code in (0, 3), err
        listed = {"question_id": status.get("question_id")}
    assert status["status"] == "done" and status["calls"]["replayed"] >= 2


@pytest.mark.parametrize("how", ["nbstripout", "nbconvert --clear-output"])
def test_without_mkl_keep_stripping_loses_the_run_as_mkl_runs_said(folder: Path, tmp_path: Path, how: str) -> None:
    shutil.copy(folder / "out-1.ipynb", tmp_path / "out.ipynb")
    _strip(tmp_path, "out.ipynb", how)
    code, _, out, err = mkl_cli(tmp_path, "runs", "out.ipynb")
    assert code == 0 and "no run checkpoints" in out, err


def test_mkl_resume_keeps_every_run_the_file_carries_only_in_outputs(folder: Path, tmp_path: Path) -> None:
    shutil.copytree(DATA, tmp_path / "data")
    notebook = nbformat.read(folder / "out-1.ipynb", as_version=4)
    # A second run, its cell as tutorial 02 has it, run elsewhere (the tutorial ships without its runs)
    elsewhere = tmp_path / "elsewhere"
    shutil.copytree(DATA, elsewhere / "data")
    tutorial = nbformat.read(ROOT / "notebooks" / "02-human-approval.ipynb", as_version=4)
    cells = [cell for cell in tutorial.cells if cell.cell_type == "code"][:3]  # %load_ext, the machine, the run
    assert "--id approval-demo" in cells[-1].source
    nbformat.write(nbformat.v4.new_notebook(cells=cells), elsewhere / "02.ipynb")
    ran = run_all(elsewhere / "02.ipynb")
    notebook.cells += [cell for cell in ran.cells if "--id approval-demo" in cell.source]
    nbformat.write(notebook, tmp_path / "out.ipynb")
    assert nbfile.only_in_outputs(tmp_path / "out.ipynb") == ["approval-demo", "pm"]
    code, listing, _, err = mkl_cli(tmp_path, "runs", "out.ipynb")
    [question] = [listed["question_id"] for listed in listing["runs"] if listed["run"] == "pm"]
    code, _, _, err = mkl_cli(
        tmp_path, "resume", "out.ipynb", "--run", "pm", "--question", question,
        "--set", "refund_approval=approve", "--script", "data/refund.script.yaml",
    )  # fmt: skip
    assert code == 3, err
    assert nbfile.only_in_outputs(tmp_path / "out.ipynb") == []  # the other run too, as the file held it
    runs = json.loads((tmp_path / "out.ipynb").read_text(encoding="utf-8"))["metadata"]["mkl"]["runs"]
    assert runs["approval-demo"] == nbfile.find_run(elsewhere / "02.ipynb", "approval-demo").raw


def test_a_notebook_paired_with_jupytext_carries_its_kept_runs_in_the_text_file(folder: Path, tmp_path: Path) -> None:
    shutil.copytree(DATA, tmp_path / "data")
    shutil.copy(folder / "out-1.ipynb", tmp_path / "out.ipynb")
    assert mkl_cli(tmp_path, "keep", "out.ipynb")[0] == 0
    pairing = {"jupytext": {"formats": "ipynb,py:percent", "notebook_metadata_filter": "mkl"}}  # as the docs give it
    _client(tmp_path, "jupytext", "--update-metadata", json.dumps(pairing), "out.ipynb")
    _client(tmp_path, "jupytext", "--sync", "out.ipynb")
    assert "#     notebook_metadata_filter: mkl" in (tmp_path / "out.py").read_text(encoding="utf-8")
    (tmp_path / "out.ipynb").unlink()  # a clone of a repository that keeps only the text file
    _client(tmp_path, "jupytext", "--to", "ipynb", "out.py")
    code, listing, _, err = mkl_cli(tmp_path, "runs", "out.ipynb")
    assert code == 0, err
    [listed] = listing["runs"]
    assert (listed["ask"], listed["in_metadata"]) == (FIRST, True)
    code, status, _, err = mkl_cli(
        tmp_path, "resume", "out.ipynb", "--run", "pm", "--question", listed["question_id"],
        "--set", "refund_approval=approve", "--script", "data/refund.script.yaml",
    )  # fmt: skip
    assert (code, status["ask"], status["calls"]["replayed"]) == (3, SECOND, 2), err


def test_papermill_writing_into_another_folder_names_its_output_and_the_command_pastes(tmp_path: Path) -> None:
    """``papermill param.ipynb runs/today.ipynb``: the commands its output prints name that output as the person
    types it in their folder (``runs/today.ipynb``), not the template beside them, and pasted they answer it."""
    folder = tmp_path / "work"
    shutil.copytree(DATA, folder / "data")
    _parameterised(folder / "param.ipynb")
    (folder / "runs").mkdir()
    _papermill(folder, "param.ipynb", "runs/today.ipynb")
    shown = _texts(_run_cell(folder / "runs" / "today.ipynb"))
    assert FIRST in shown and UNCLEAR not in shown
    [command] = [line.strip() for line in shown.splitlines() if line.strip().endswith("--reply approve")]
    assert command.startswith("mkl resume runs/today.ipynb --run pm "), command
    assert "param.ipynb" not in shown
    code, _, _, err = mkl_cli(folder, *shlex.split(command)[1:])
    assert code == 3, err  # answered: the next question waits in that file
    assert SECOND in json.dumps(nbformat.read(folder / "runs" / "today.ipynb", as_version=4).metadata["mkl"])


def _with_a_planted_notebook(folder: Path) -> Path:
    """``folder`` with ``mine.ipynb``, and ``evil.ipynb`` left beside it by someone else: the same cells, and
    papermill's metadata claiming it is being written with each of its cells running."""
    shutil.copytree(DATA, folder / "data")
    _parameterised(folder / "mine.ipynb")
    evil = nbformat.read(folder / "mine.ipynb", as_version=4)
    evil.metadata["papermill"] = {"output_path": "evil.ipynb", "start_time": "2026-12-01T00:00:00", "end_time": None}
    for cell in evil.cells:
        cell.metadata["papermill"] = {"status": "running"}
    nbformat.write(evil, folder / "evil.ipynb")
    return folder


def test_a_notebook_planted_beside_the_one_executed_does_not_decide_which_file_the_kernel_runs(tmp_path: Path) -> None:
    """``jupyter nbconvert --execute mine.ipynb`` in a folder where someone left ``evil.ipynb``: the same cells,
    and papermill's metadata claiming it is being written with this very cell running. The command line names
    the notebook a person chose; a file merely lying there, whatever it says of itself, never wins over it."""
    folder = _with_a_planted_notebook(tmp_path / "work")
    _nbconvert(folder, "mine.ipynb", "--inplace")
    shown = _texts(_run_cell(folder / "mine.ipynb"))
    assert "mkl resume mine.ipynb --run pm" in shown and "evil.ipynb" not in shown and UNCLEAR not in shown


def test_a_notebook_planted_beside_papermills_input_neither_stops_the_job_nor_decides_its_file(tmp_path: Path) -> None:
    """``papermill mine.ipynb out.ipynb`` in a folder where someone left ``evil.ipynb`` claiming papermill is
    writing it with this very cell running: papermill's own command line names its input and output, and the
    output it writes is where the run goes; the planted file neither wins nor stops the job."""
    folder = _with_a_planted_notebook(tmp_path / "work")
    done = _papermill(folder, "mine.ipynb", "out.ipynb")
    assert done.returncode == 0, done.stderr[-2000:]
    shown = _texts(_run_cell(folder / "out.ipynb"))
    assert "mkl resume out.ipynb --run pm" in shown and "evil.ipynb" not in shown and UNCLEAR not in shown


def test_papermill_re_executing_an_outputs_only_notebook_in_a_fresh_folder_takes_its_run_up(tmp_path: Path) -> None:
    """A papermill output (its run in its outputs only) executed again by papermill where no store is: the run is
    taken up from the notebook papermill was given, whose outputs the copy it writes no longer has; replayed,
    with no call, the same history, not made anew."""
    first = tmp_path / "first"
    shutil.copytree(DATA, first / "data")
    _parameterised(first / "param.ipynb")
    _papermill(first, "param.ipynb", "out.ipynb")
    made = _journal(first)
    fresh = tmp_path / "fresh"
    shutil.copytree(DATA, fresh / "data")
    shutil.copy(first / "out.ipynb", fresh / "in.ipynb")  # the outputs carry the run; no store here
    _papermill(fresh, "in.ipynb", "again.ipynb")
    shown = _texts(_run_cell(fresh / "again.ipynb"))
    assert FIRST in shown and "mkl resume again.ipynb --run pm" in shown
    assert _journal(fresh) == made  # taken up as the file had it: no call made, nothing signed anew


def test_an_edit_of_the_paired_text_file_is_named_by_mkl_resume_and_kept_by_the_command_it_gives(
    folder: Path, tmp_path: Path
) -> None:
    """A notebook paired with a .py by jupytext; the person edits the .py, then answers with ``mkl resume``: the
    notebook written back is now the newer file, so ``jupytext --sync`` would take its cells over the edit. The
    resume says so on stderr, with the command that keeps the edit and the answer both."""
    shutil.copytree(DATA, tmp_path / "data")
    shutil.copy(folder / "out-1.ipynb", tmp_path / "out.ipynb")
    assert mkl_cli(tmp_path, "keep", "out.ipynb")[0] == 0
    pairing = {"jupytext": {"formats": "ipynb,py:percent", "notebook_metadata_filter": "mkl"}}
    _client(tmp_path, "jupytext", "--update-metadata", json.dumps(pairing), "out.ipynb")
    _client(tmp_path, "jupytext", "--sync", "out.ipynb")
    text = tmp_path / "out.py"
    edited = text.read_text(encoding="utf-8").replace('ticket = "nothing yet"', 'ticket = "edited in the .py"')
    assert edited != text.read_text(encoding="utf-8")
    text.write_text(edited, encoding="utf-8")
    os.utime(text, (time.time() + 5, time.time() + 5))  # (changed after the notebook, as a person's edit is)
    code, listing, _, err = mkl_cli(tmp_path, "runs", "out.ipynb")
    question = listing["runs"][0]["question_id"]
    code, _, _, err = mkl_cli(
        tmp_path, "resume", "out.ipynb", "--run", "pm", "--question", question,
        "--set", "refund_approval=approve", "--script", "data/refund.script.yaml",
    )  # fmt: skip
    assert code == 3, err
    [warning] = [line for line in err.splitlines() if line.startswith("mkl: warning: ")]
    assert "out.py (paired with out.ipynb by jupytext) was changed after out.ipynb" in warning
    keep = warning.split("keep them with `")[1].split("`")[0]
    assert keep == "jupytext --update --to ipynb out.py"
    _client(tmp_path, *shlex.split(keep))
    kept = nbformat.read(tmp_path / "out.ipynb", as_version=4)
    assert any('ticket = "edited in the .py"' in cell.source for cell in kept.cells)  # the edit is kept
    [listed] = mkl_cli(tmp_path, "runs", "out.ipynb")[1]["runs"]
    assert listed["ask"] == SECOND  # and so is the answer
