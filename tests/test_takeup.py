"""A notebook of many waiting runs opens in a new kernel by reading and checking its file once (issue 38).

The first ``%mkl pending`` in a kernel takes up every run the notebook carries. Each run used to make the kernel
read and parse the whole file again, so a notebook of 50 runs was read 51 times and a notebook of 200 took tens
of seconds. These tests count reads of the file and checks of checkpoints, never time.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import nbformat
import pytest
from lab_client import LabClient, run_all

from mkl_notebook.checkpoints import envelope
from mkl_notebook.checkpoints import notebook_file as nbfile
from mkl_notebook.checkpoints.marks import advancing, mark_advancing
from mkl_notebook.checkpoints.notebook_cells import cell_ids
from mkl_notebook.checkpoints.notebook_disk import NotebookFileError, locked
from mkl_notebook.lang import files

from support import ROOT

DATA = ROOT / "notebooks" / "data"
FIRST = "The draft promises a refund. Approve it?"
SIZES = (5, 20)

# Run in the kernel before `%mkl pending`: count its reads of the notebook's file and its checks of checkpoints.
COUNTING = """
import collections, json
from pathlib import Path
from mkl_notebook.checkpoints import envelope as _envelope
from mkl_notebook.lang import files as _files
_counts = collections.Counter()
_read_text, _verify = _files.read_text, _envelope.verify_checkpoint
_notebook = Path("many.ipynb").resolve()

def _counting_read(path, *args, **kwargs):
    if Path(path).resolve() == _notebook:
        _counts["reads"] += 1
    return _read_text(path, *args, **kwargs)

def _counting_verify(*args, **kwargs):
    _counts["checks"] += 1
    return _verify(*args, **kwargs)

_files.read_text, _envelope.verify_checkpoint = _counting_read, _counting_verify
"""


def _notebook_of_waiting_runs(folder: Path, count: int) -> Path:
    """A notebook as JupyterLab leaves it after ``count`` runs of the refund machine, each waiting for its first
    answer, saved with no store beside it: the file alone carries the runs (a notebook someone sent)."""
    folder.mkdir()
    for name in ("refund.mkl", "refund.script.yaml"):
        shutil.copy(DATA / name, folder / name)
    cells = [
        nbformat.v4.new_code_cell("%load_ext mkl_notebook"),
        nbformat.v4.new_code_cell("%%mkl\n" + (DATA / "refund.mkl").read_text(encoding="utf-8")),
    ] + [
        nbformat.v4.new_code_cell(f"%mkl run refund --id r{index} --script refund.script.yaml --set ticket=broken")
        for index in range(count)
    ]
    path = folder / "many.ipynb"
    nbformat.write(nbformat.v4.new_notebook(cells=cells), path)
    run_all(path, timeout=300)
    shutil.rmtree(folder / ".mkl")
    return path


@pytest.fixture(scope="module")
def notebooks(tmp_path_factory: pytest.TempPathFactory) -> dict[int, Path]:
    made = tmp_path_factory.mktemp("waiting")
    return {count: _notebook_of_waiting_runs(made / f"runs{count}", count) for count in SIZES}


def _pending_in_a_new_kernel(path: Path) -> tuple[dict[str, int], list[dict[str, Any]]]:
    """A new kernel on the notebook at ``path`` (as JupyterLab starts one) runs a cell added at its end,
    ``%mkl pending``: what that kernel read and checked meanwhile, and the outputs of the cell."""
    nb = nbformat.read(path, as_version=4)
    added = [nbformat.v4.new_code_cell(source) for source in (COUNTING, "%mkl pending", "print(json.dumps(_counts))")]
    nb.cells.extend(added)
    client = LabClient(nb, path, timeout=300)
    with client.setup_kernel(env={**os.environ, "JPY_SESSION_NAME": str(path.resolve())}):
        client.execute_cell(nb.cells[0], 0)  # %load_ext mkl_notebook
        for index in range(len(nb.cells) - len(added), len(nb.cells)):
            client.execute_cell(nb.cells[index], index)
    counts = json.loads(added[-1].outputs[-1]["text"])
    return counts, added[1].outputs


def test_a_new_kernel_takes_up_every_waiting_run_reading_and_checking_the_file_once(
    notebooks: dict[int, Path], tmp_path: Path
) -> None:
    counts = {}
    for count, made in notebooks.items():
        folder = tmp_path / f"received{count}"
        shutil.copytree(made.parent, folder)
        counts[count], outputs = _pending_in_a_new_kernel(folder / made.name)
        views = [out for out in outputs if envelope.MIME_TYPE in out.get("data", {})]  # a run taken up
        asked = [out for out in outputs if FIRST in json.dumps(out.get("data", {}).get("text/html", ""))]
        assert len(views) == len(asked) == count, f"{count} runs wait; {len(views)} were taken up and asked"
        assert counts[count]["checks"] == count, counts  # each run's checkpoint is checked once
    assert counts[SIZES[0]]["reads"] == counts[SIZES[1]]["reads"] <= 2, counts


def test_our_own_write_keeps_what_was_checked_and_another_writer_is_read_again(
    notebooks: dict[int, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "received"
    shutil.copytree(notebooks[SIZES[0]].parent, folder)
    path = folder / "many.ipynb"
    reads: list[str] = []
    checks: list[str] = []
    read_text, verify = files.read_text, envelope.verify_checkpoint

    def counting_read(file: Any, *args: Any) -> str:
        if Path(file) == path:  # (the marks beside it are read too: their file is not the notebook)
            reads.append(str(file))
        return str(read_text(file, *args))

    def counting_verify(data: Any, where: str, *args: Any) -> Any:
        checks.append(where)
        return verify(data, where, *args)

    monkeypatch.setattr(files, "read_text", counting_read)
    monkeypatch.setattr(envelope, "verify_checkpoint", counting_verify)
    assert len(nbfile.find_run(path, "r3").records) > 0
    assert (len(reads), len(checks)) == (1, SIZES[0])
    with locked(path):
        mark_advancing(path, "r3", "/elsewhere/runs.db", 3)  # rewrites the file
    assert advancing(path, "r3") and not advancing(path, "r1")
    assert nbfile.find_run(path, "r1").run_id == "r1" and cell_ids(path)
    assert (len(reads), len(checks)) == (2, SIZES[0]), "the file was read or checked again after writing it"

    # Another program changes one run's journal in place: the file is read again, and the forged copy refused.
    notebook = json.loads(path.read_text(encoding="utf-8"))
    cell, output, _entry = next(place for place, _data in nbfile._carried(notebook))
    carried = notebook["cells"][cell]["outputs"][output]["data"][envelope.MIME_TYPE]
    forged = carried["run_id"]
    carried["journal"] = {"encoding": "json", "records": [{"kind": "forged"}]}
    path.write_text(json.dumps(notebook, indent=1), encoding="utf-8")
    with pytest.raises(NotebookFileError, match=rf"many\.ipynb, cell {cell + 1}: "):
        nbfile.find_run(path, forged)
    assert advancing(path, "r3")
    assert len(reads) == 3 and len(checks) == 2 * SIZES[0]
