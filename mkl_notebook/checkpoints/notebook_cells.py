"""What a kernel reads of its notebook besides the runs' checkpoints: its cells, a form's place, one output.

A kernel asks these at every cell it executes and every run it shows: the ids and code of the cells (to know
which cell it runs), whether a form's place is shown, one output's data, and what papermill and jupytext say of
the file. They only read the document as its index holds it (:mod:`checkpoints.notebook_disk`) and never a
checkpoint, so they live apart from :mod:`checkpoints.notebook_file`, which reads and writes the runs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .notebook_disk import _document, _Index, _once_per_state
from .notebook_file import FORM_MIME, _cell_outputs


def has_form(path: str | Path, run_id: str) -> bool:
    """Whether a notebook shows a form's place for run ``run_id`` (see :data:`FORM_MIME`)."""
    for cell in _document(path).get("cells") or []:
        for output in _cell_outputs(cell):
            data = output.get("data") if isinstance(output, dict) else None
            marker = data.get(FORM_MIME) if isinstance(data, dict) else None
            if isinstance(marker, dict) and marker.get("run") == run_id:
                return True
    return False


def cell_ids(path: str | Path) -> list[str]:
    """The ids of a notebook's cells, top to bottom (nbformat 4.5 gives every cell one); read once per state of
    the file, as a kernel asks for them for every run it shows."""
    return list(_once_per_state(_read_cell_ids, path))


def _read_cell_ids(path: Path, index: _Index) -> tuple[str, ...]:
    cells = index.document.get("cells") or []
    return tuple(cell["id"] for cell in cells if isinstance(cell, dict) and isinstance(cell.get("id"), str))


def code_cells(path: str | Path) -> list[tuple[str, str]]:
    """The id and source of each code cell of a notebook, top to bottom (cells without an id are left out); read
    once per state of the file, as a kernel asks for them at every cell it executes."""
    return list(_once_per_state(_read_code_cells, path))


def _read_code_cells(path: Path, index: _Index) -> tuple[tuple[str, str], ...]:
    found = []
    for cell in index.document.get("cells") or []:
        if not isinstance(cell, dict) or cell.get("cell_type") != "code" or not isinstance(cell.get("id"), str):
            continue
        source = cell.get("source")
        text = "".join(source) if isinstance(source, list) else source
        if isinstance(text, str):
            found.append((cell["id"], text))
    return tuple(found)


def paired_texts(path: str | Path) -> list[Path]:
    """The text files jupytext pairs the notebook with (``metadata.jupytext.formats``, e.g. ``ipynb,py:percent``
    or ``ipynb,scripts//py``), those that exist; none when it is not paired. Only read, never followed to write."""
    path = Path(path)
    metadata = _document(path).get("metadata")
    jupytext = metadata.get("jupytext") if isinstance(metadata, dict) else None
    formats = jupytext.get("formats") if isinstance(jupytext, dict) else None
    if not isinstance(formats, str):
        return []
    found = []
    for entry in formats.split(",")[:8]:
        where, _, extension = entry.strip().rpartition("//")
        extension = extension.split(":")[0].strip().lstrip(".")
        if not extension or extension == "ipynb" or not extension.isalnum():
            continue
        folder = path.parent / where if where and ".." not in Path(where).parts else path.parent
        paired = folder / f"{path.stem}.{extension}"
        if paired.is_file():
            found.append(paired)
    return found


def papermill_writing(path: str | Path) -> tuple[str, list[str]] | None:
    """What a notebook papermill is writing now says of itself: the output path its metadata names
    (``metadata.papermill.output_path``) and the sources of its cells papermill marks as running; None when
    papermill is not writing it (no papermill metadata, or its run ended: ``end_time`` is set). Papermill saves
    its output as each cell starts, so a kernel executing a cell for papermill finds that cell marked there."""
    notebook = _document(path)
    metadata = notebook.get("metadata")
    papermill = metadata.get("papermill") if isinstance(metadata, dict) else None
    if not isinstance(papermill, dict) or papermill.get("end_time") is not None:
        return None
    output = papermill.get("output_path")
    if not isinstance(output, str) or not papermill.get("start_time"):
        return None
    running = []
    for cell in notebook.get("cells") or []:
        meta = cell.get("metadata") if isinstance(cell, dict) else None
        state = meta.get("papermill") if isinstance(meta, dict) else None
        if isinstance(state, dict) and state.get("status") == "running":
            source = cell.get("source")
            text = "".join(source) if isinstance(source, list) else source
            if isinstance(text, str):
                running.append(text)
    return output, running


def output_data(path: str | Path, cell_index: int, output_index: int) -> dict[str, Any]:
    """The data of one output of a notebook (empty when the file holds no such output)."""
    try:
        data = _cell_outputs(_document(path)["cells"][cell_index])[output_index].get("data")
    except (IndexError, KeyError, TypeError, AttributeError):
        return {}
    return dict(data) if isinstance(data, dict) else {}
