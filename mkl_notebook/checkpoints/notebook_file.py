"""Reading run checkpoints out of a saved ``.ipynb``, and writing an updated one back.

The kernel only ever reads notebook files.  The headless CLI may rewrite a
notebook nobody has open: it replaces one output's data and writes the file
atomically with the same JSON conventions as Jupyter, so every other cell stays
byte-identical.

The file itself (read once per state on disk, replaced, locked) is handled in :mod:`checkpoints.notebook_disk`,
the marks of runs being advanced in :mod:`checkpoints.marks`, and what a kernel reads of the cells besides the
runs in :mod:`checkpoints.notebook_cells`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from ..durable.chain import chain_digest, common_prefix
from ..durable.stores import RUN_ID_MAX
from ..lang import files
from ..render.diagram import MERMAID_MIME, SVG_MIME
from . import envelope
from .envelope import BATCH_MIME_TYPE, MIME_TYPE, REF_MIME_TYPE, EnvelopeError
from .notebook_disk import NotebookFileError, _document, _Index, _once_per_state, _replace, dumps_notebook, read_json
from .seals import Seal, signatures

WIDGET_VIEW_MIME = "application/vnd.jupyter.widget-view+json"  # a widget drawn by a kernel (ipywidgets)
BATCH_ROWS_MIME = "application/vnd.mkl.batch-rows+json"  # a batch table's rows that have no run (and no entry)
BATCH_FORM_MIME = "application/vnd.mkl.batch-form+json"  # marks where a batch form's questions are: {runs}
FORM_MIME = "application/vnd.mkl.form+json"  # marks the output that stands in a question's form: {run, question_id}


@dataclass(frozen=True)
class DamagedRun:
    """An embedded checkpoint that failed verification: shown, never used."""

    run_id: str | None
    reason: str
    cell_index: int | None  # None: the copy in the notebook's metadata

    @property
    def where(self) -> str:
        return "metadata" if self.cell_index is None else f"cell {self.cell_index + 1}"


@dataclass(frozen=True)
class EmbeddedRun:
    """A verified run checkpoint a notebook carries, with its seal when it has one: the newest of its copies
    (in the notebook's metadata and in cell outputs), and where its output copy is (None: only in metadata)."""

    run_id: str
    header: dict[str, Any]
    records: list[dict[str, Any]]
    cell_index: int | None
    output_index: int | None
    seal: Seal | None = None
    in_metadata: bool = False
    entry_index: int | None = None  # in a batch's output: which row's entry
    raw: Any = None  # the checkpoint as the file holds it (a JSON object), to carry on unchanged

    @property
    def where(self) -> str:
        return "metadata" if self.cell_index is None else f"cell {self.cell_index + 1}"


def _cell_outputs(cell: Any) -> list[Any]:
    """A cell's outputs, or none when the file holds something else there (``"outputs": 5``)."""
    outputs = cell.get("outputs") if isinstance(cell, dict) else None
    return outputs if isinstance(outputs, list) else []


def _outputs(notebook: dict[str, Any], mime: str = MIME_TYPE) -> Iterator[tuple[int, int, dict[str, Any]]]:
    """The outputs carrying ``mime`` (a run's checkpoint, or a reference to the metadata's copy of it)."""
    for cell_index, cell in enumerate(notebook.get("cells") or []):
        for output_index, output in enumerate(_cell_outputs(cell)):
            if isinstance(output, dict) and isinstance(output.get("data"), dict) and mime in output["data"]:
                yield cell_index, output_index, output


OutputAt = tuple[int, int, int | None]  # cell, output, entry of a batch output (None: a run's own output)


def _batch_entries(notebook: dict[str, Any]) -> Iterator[tuple[OutputAt, Any]]:
    for cell_index, output_index, output in _outputs(notebook, BATCH_MIME_TYPE):
        entries = output["data"][BATCH_MIME_TYPE]
        for entry_index, entry in enumerate(entries if isinstance(entries, list) else []):
            yield (cell_index, output_index, entry_index), entry


def _carried(notebook: dict[str, Any]) -> Iterator[tuple[OutputAt, Any]]:
    """Every checkpoint an output carries: a run's own output's, and each of a batch output's."""
    for cell_index, output_index, output in _outputs(notebook):
        yield (cell_index, output_index, None), output["data"][MIME_TYPE]
    for place, entry in _batch_entries(notebook):
        if not envelope.is_reference(entry):
            yield place, entry


def _referred(notebook: dict[str, Any]) -> Iterator[tuple[OutputAt, Any]]:
    """Every reference an output makes to the metadata's copy of a run: a run's own output's, a batch's."""
    for cell_index, output_index, output in _outputs(notebook, REF_MIME_TYPE):
        yield (cell_index, output_index, None), output["data"][REF_MIME_TYPE]
    for place, entry in _batch_entries(notebook):
        if envelope.is_reference(entry):
            yield place, entry


def _metadata_runs(notebook: dict[str, Any]) -> dict[str, Any]:
    """The run checkpoints in a notebook's metadata (``metadata.mkl.runs``: run id -> envelope)."""
    metadata = notebook.get("metadata")
    mkl = metadata.get("mkl") if isinstance(metadata, dict) else None
    runs = mkl.get(RUNS_KEY) if isinstance(mkl, dict) else None
    return runs if isinstance(runs, dict) else {}


def _parsed(data: Any) -> Any:
    if isinstance(data, str):  # some front ends save a JSON mime type as text
        try:
            return files.parse_json(data, depth=files.DOCUMENT_DEPTH, values=files.document_values(len(data)))
        except ValueError:
            return None
    return data


def _checked(data: Any, where: str, inflation: envelope.Inflation) -> envelope.Checkpoint:
    return envelope.verify_checkpoint(_parsed(data), where, inflation)


def _extends(longer: list[dict[str, Any]], shorter: list[dict[str, Any]]) -> bool:
    return len(longer) >= len(shorter) and common_prefix(longer, shorter) == len(shorter)


@dataclass(frozen=True)
class _Scan:
    runs: tuple[EmbeddedRun, ...]
    damaged: tuple[DamagedRun, ...]
    by_id: dict[str, EmbeddedRun]


def _scanned(path: Path, index: _Index) -> _Scan:
    runs, damaged = _scan_document(path, index.document, index.state[1])
    return _Scan(tuple(runs), tuple(damaged), {run.run_id: run for run in runs})


def scan(path: str | Path) -> tuple[list[EmbeddedRun], list[DamagedRun]]:
    """:func:`scan_file`, found once per state of the file on disk: a kernel taking up many runs from one
    notebook reads and checks it once, not once per run."""
    found: _Scan = _once_per_state(_scanned, path)
    return list(found.runs), list(found.damaged)


def scan_file(path: str | Path) -> tuple[list[EmbeddedRun], list[DamagedRun]]:
    """Every run checkpoint in a notebook, verified: from its metadata and from its cell outputs.

    Of a run's copies the one with the longest journal wins (cells that replay show prefixes of it; the
    last output on a tie, the metadata copy over an output of the same length). Copies whose histories part
    are both kept: the metadata's (else the longer) under the run's id, the other under :func:`branch_id`. An
    output that only refers to the metadata's copy (written with the
    JupyterLab extension) names where the run is shown; a reference the metadata cannot answer is reported.
    """
    notebook = read_json(path)
    return _scan_document(path, notebook, Path(path).stat().st_size)


def _scan_document(path: str | Path, notebook: dict[str, Any], size: int) -> tuple[list[EmbeddedRun], list[DamagedRun]]:
    found: dict[str, EmbeddedRun] = {}
    damaged: list[DamagedRun] = []
    inflation = envelope.Inflation(size)  # what its compressed journals inflate to, together
    for (cell_index, output_index, entry_index), data in _carried(notebook):
        try:
            header, records, seal = _checked(data, f"{path}, cell {cell_index + 1}", inflation)
        except EnvelopeError as exc:
            claimed = data.get("run_id") if isinstance(data, dict) else None
            damaged.append(DamagedRun(claimed if isinstance(claimed, str) else None, str(exc), cell_index))
            continue
        run_id = str(header["run_id"])
        run = EmbeddedRun(run_id, header, records, cell_index, output_index, seal, False, entry_index, _parsed(data))
        held = found.get(run_id)
        if held is not None and not (_extends(records, held.records) or _extends(held.records, records)):
            _keep_apart(found, held if len(held.records) < len(records) else run)  # two histories: both kept
            if len(held.records) >= len(records):
                continue
        if held is None or len(records) >= len(held.records):
            found[run_id] = run
    for run_id, data in sorted(_metadata_runs(notebook).items()):
        where = f"{path}, metadata run '{run_id}'"
        try:
            header, records, seal = _checked(data, where, inflation)
            if header["run_id"] != run_id:
                raise EnvelopeError(f"{where}: holds the checkpoint of run '{header['run_id']}'; it is not used")
        except EnvelopeError as exc:
            damaged.append(DamagedRun(str(run_id), str(exc), None))
            continue
        copy = found.get(run_id)
        if copy is not None and not (_extends(records, copy.records) or _extends(copy.records, records)):
            _keep_apart(found, copy)  # the metadata's keeps the id (an extension wrote it last): both are kept
            copy = None
        if copy is None or len(records) >= len(copy.records):
            at = (copy.cell_index, copy.output_index) if copy is not None else (None, None)
            found[run_id] = EmbeddedRun(run_id, header, records, *at, seal, in_metadata=True, raw=_parsed(data))
        else:
            found[run_id] = replace(copy, in_metadata=True)
    for (cell_index, output_index, entry_index), data in _referred(notebook):
        where = f"{path}, cell {cell_index + 1}"
        try:
            run_id, count = envelope.read_reference(data, where)
        except EnvelopeError as exc:
            damaged.append(DamagedRun(None, str(exc), cell_index))
            continue
        copy = found.get(run_id)
        if copy is None or not copy.in_metadata:
            if not any(bad.run_id == run_id and bad.cell_index is None for bad in damaged):
                damaged.append(
                    DamagedRun(
                        run_id,
                        f"{where}: shows run '{run_id}', whose checkpoint was kept in the "
                        "notebook's metadata, and the metadata no longer holds it",
                        cell_index,
                    )
                )
            continue
        if count > len(copy.records):
            damaged.append(
                DamagedRun(
                    run_id,
                    f"{where}: shows {count} records of run '{run_id}'; the notebook's "
                    f"metadata holds only {len(copy.records)}, so it may be older than the cell",
                    cell_index,
                )
            )
        elif copy.cell_index is None or (cell_index, output_index) > (copy.cell_index, copy.output_index or 0):
            found[run_id] = replace(copy, cell_index=cell_index, output_index=output_index, entry_index=entry_index)
    return list(found.values()), damaged


def _keep_apart(found: dict[str, EmbeddedRun], run: EmbeddedRun) -> None:
    """Keep ``run``, a copy whose history parts from another copy of its run in the same notebook, under the id
    :func:`branch_id` derives for it (the other keeps the run's id)."""
    branch = branch_id(run.run_id, run.records, common_prefix(run.records, found[run.run_id].records))
    found[branch] = replace(run, run_id=branch, header={**run.header, "run_id": branch}, raw=None)
    if found[run.run_id] is run:
        del found[run.run_id]


def branch_id(run_id: str, records: list[dict[str, Any]], shared: int) -> str:
    """The id a copy of run ``run_id`` whose history parts from another's at record ``shared`` is kept under:
    the run's id, who signed what it goes on with, and a digest of it (the same copy gets the same id on every
    machine)."""
    stretches = [s for s in signatures(records) if s.end >= shared and s.seal is not None]
    by = stretches[0].seal.by if stretches and stretches[0].seal is not None else "unsigned"
    return derived_id(run_id, by, chain_digest(records[: shared + 1]).hex()[:6])


def derived_id(run_id: str, name: str, tail: str) -> str:
    """``RUN:NAME-TAIL``: the id of a run kept or made beside run ``run_id`` (the name as a run id may spell it,
    the whole within a run id's 80 characters)."""
    shown = re.sub(r"[^A-Za-z0-9_.-]+", "-", name).strip("-.")[:16] or "someone"
    suffix = f":{shown}-{tail}"
    return run_id[: RUN_ID_MAX - len(suffix)] + suffix


def embedded_runs(path: str | Path) -> list[EmbeddedRun]:
    return scan(path)[0]


def find_run(path: str | Path, run_id: str) -> EmbeddedRun:
    """The checkpoint of run ``run_id`` a notebook carries; a damaged copy of it in a later cell is refused
    rather than passed over for an older one (the damaged copy may hold the run's newest state)."""
    found: _Scan = _once_per_state(_scanned, path)
    runs, damaged = found.runs, found.damaged
    run = found.by_id.get(run_id)
    if run is not None:
        later = [bad for bad in damaged if bad.run_id == run_id and _maybe_newer(bad, run)]
        if later:
            raise NotebookFileError(
                f"{later[-1].reason}; it may hold run '{run_id}''s newest state, so the older copy in "
                f"{run.where} is not resumed in its place"
            )
        return run
    for bad in damaged:
        if bad.run_id == run_id or bad.run_id is None:
            raise NotebookFileError(bad.reason)
    names = ", ".join(sorted(run.run_id for run in runs)) or "none"
    raise NotebookFileError(f"{path}: holds no checkpoint of run '{run_id}' (runs found: {names})")


def _maybe_newer(bad: DamagedRun, run: EmbeddedRun) -> bool:
    """Whether a damaged copy may hold a newer state than ``run``: a metadata copy always may (it is written
    last), an output copy when it is below every copy ``run`` was read from."""
    if bad.cell_index is None or run.cell_index is None:
        return True
    return bad.cell_index > run.cell_index


def _lines(text: str) -> list[str]:
    """Jupyter stores multi-line text as a list of lines, each keeping its newline."""
    return text.splitlines(keepends=True)


def _jupyter_data(bundle: dict[str, Any]) -> dict[str, Any]:
    return {
        mime: _lines(value) if isinstance(value, str) and mime.startswith("text/") else value
        for mime, value in bundle.items()
    }


def write_run(
    path: str | Path,
    run: EmbeddedRun,
    bundle: dict[str, Any],
    form_place: Callable[[dict[str, Any]], dict[str, Any] | None] | None = None,
    diagram: dict[str, Any] | None = None,
    table: dict[str, Any] | None = None,
) -> None:
    """Replace one run's output data with ``bundle`` and atomically rewrite the notebook.

    ``form_place(marker)`` gives what now stands where a form of this run was shown (None: leave it): a single
    run's (its marker names the run and question) or a batch's (``{"runs": [...]}``, the batch's runs asked there);
    ``diagram`` replaces the run's diagram, the output drawn right below its view (its SVG image); ``table``
    the HTML and text of the batch table a row's run is carried in.
    """
    path = Path(path)
    notebook = read_json(path)
    if run.cell_index is not None:
        try:
            output = notebook["cells"][run.cell_index]["outputs"][run.output_index]
        except (IndexError, KeyError, TypeError):
            raise NotebookFileError(f"{path}: changed while the run was resumed; nothing was written") from None
        data = output.get("data")
        if run.entry_index is not None:  # a row of a batch: its entry alone changes (the table shows the batch)
            entries = data.get(BATCH_MIME_TYPE) if isinstance(data, dict) else None
            if not isinstance(entries, list) or run.entry_index >= len(entries):
                raise NotebookFileError(f"{path}: changed while the run was resumed; nothing was written")
            was = entries[run.entry_index]
            entries[run.entry_index] = (
                envelope.reference(bundle[MIME_TYPE]) if envelope.is_reference(was) else bundle[MIME_TYPE]
            )
            if table is not None:
                data.update(_jupyter_data(table))
        elif not isinstance(data, dict) or not (MIME_TYPE in data or REF_MIME_TYPE in data):
            raise NotebookFileError(f"{path}: changed while the run was resumed; nothing was written")
        else:
            # the output keeps referring to the metadata's one copy, or carries a copy that says what it says
            output["data"] = _jupyter_data(envelope.referring(bundle) if REF_MIME_TYPE in data else bundle)
            below = _cell_outputs(notebook["cells"][run.cell_index])[(run.output_index or 0) + 1 :]
            if diagram is not None and below and _is_diagram(below[0]):
                below[0]["data"] = _jupyter_data(diagram)
    for other, checkpoint in _only_in_outputs(path, notebook).items():  # kept too, while the file is written
        _set_metadata_run(notebook, other, checkpoint)
    _set_metadata_run(notebook, run.run_id, bundle[MIME_TYPE])  # survives Clear All Outputs and nbstripout
    _set_advancing(notebook, run.run_id, None)  # the file now holds the run as the store does
    if form_place is not None:
        for cell in notebook.get("cells") or []:
            outputs = _cell_outputs(cell)
            for index, other in enumerate(outputs):
                data = other.get("data") if isinstance(other, dict) else None
                marker = data.get(FORM_MIME) if isinstance(data, dict) else None
                batch = data.get(BATCH_FORM_MIME) if isinstance(data, dict) else None
                if isinstance(batch, dict) and isinstance(batch.get("runs"), list) and run.run_id in batch["runs"]:
                    marker = {"runs": [name for name in batch["runs"] if isinstance(name, str)]}
                elif not (isinstance(marker, dict) and marker.get("run") == run.run_id):
                    continue
                replaced = form_place(marker)
                if replaced is not None:
                    other["data"] = _jupyter_data(replaced)
                    settled = BATCH_FORM_MIME not in replaced or not replaced[BATCH_FORM_MIME].get("waiting")
                    if settled and index + 1 < len(outputs) and _is_form_controls(outputs[index + 1]):
                        outputs[index + 1]["data"] = {"text/plain": ""}  # no dead form below what it says
    _replace(path, dumps_notebook(notebook))


def _is_form_controls(output: Any) -> bool:
    """Whether an output is a form's controls as a kernel draws them below the question's place: a widget view
    with nothing to read without its kernel."""
    data = output.get("data") if isinstance(output, dict) else None
    return isinstance(data, dict) and set(data) == {WIDGET_VIEW_MIME, "text/plain"} and not data["text/plain"]


def _is_diagram(output: Any) -> bool:
    """Whether an output is a run's diagram as its view draws it below itself (an SVG image and its text twin; a
    mermaid source too, as earlier versions drew it)."""
    data = output.get("data") if isinstance(output, dict) else None
    if not isinstance(data, dict):
        return False
    drawing = data.get(SVG_MIME)
    drawing = "".join(drawing) if isinstance(drawing, list) else drawing
    return MERMAID_MIME in data or (isinstance(drawing, str) and "<title>State diagram of machine " in drawing[:2000])


def _only_in_outputs(path: Path, notebook: dict[str, Any]) -> dict[str, Any]:
    """The runs of the notebook at ``path`` (read as ``notebook``) whose newest verified copy is in an output and
    not in its metadata, each with that copy as the output holds it (its seals and all); a copy kept apart as
    another history (:func:`branch_id`) is left where it is."""
    runs, _damaged = scan(path)
    held = _metadata_runs(notebook)
    return {
        run.run_id: run.raw
        for run in runs
        if isinstance(run.raw, dict) and run.cell_index is not None and _parsed(held.get(run.run_id)) != run.raw
    }


def only_in_outputs(path: str | Path) -> list[str]:
    """The ids of the runs a notebook carries only in its outputs (or newer there than in its metadata): those
    that Clear All Outputs, ``nbstripout`` or ``jupyter nbconvert --clear-output`` would take away."""
    return sorted(_only_in_outputs(Path(path), _document(path)))


def keep_in_metadata(path: str | Path) -> list[str]:
    """Put the runs the notebook carries only in its outputs (see :func:`only_in_outputs`) into its metadata
    (``metadata.mkl.runs``), each copy as verified, seals and all; the ids kept. A notebook with a damaged copy
    of any run is not written (its newest state may be the damaged one), nor one with nothing to keep: a second
    call changes no byte. Call with the notebook's lock held."""
    path = Path(path)
    notebook = read_json(path)
    damaged = scan(path)[1]
    if damaged:
        raise NotebookFileError(f"{damaged[0].reason}; nothing was kept")
    kept = _only_in_outputs(path, notebook)
    if kept:
        for run_id, checkpoint in kept.items():
            _set_metadata_run(notebook, run_id, checkpoint)
        _replace(path, dumps_notebook(notebook))
    return sorted(kept)


# -- the notebook's metadata (metadata.mkl): its runs, and the marks of runs being advanced -----------

ADVANCING_KEY = "advancing"  # under the notebook's metadata.mkl: run id -> {store, since}
RUNS_KEY = "runs"  # under the notebook's metadata.mkl: run id -> its checkpoint envelope


def _set_metadata_run(notebook: dict[str, Any], run_id: str, checkpoint: dict[str, Any]) -> None:
    metadata = notebook.setdefault("metadata", {})
    if not isinstance(metadata, dict):
        raise NotebookFileError("the notebook's metadata is not an object; nothing was written")
    mkl = metadata.get("mkl")
    if not isinstance(mkl, dict):
        mkl = metadata["mkl"] = {}
    runs = mkl.get(RUNS_KEY)
    if not isinstance(runs, dict):
        runs = mkl[RUNS_KEY] = {}
    runs[run_id] = checkpoint


def _set_advancing(notebook: dict[str, Any], run_id: str, where: dict[str, Any] | None) -> None:
    metadata = notebook.setdefault("metadata", {})
    if not isinstance(metadata, dict):
        return
    mkl = metadata.get("mkl")
    if not isinstance(mkl, dict):
        if where is None:
            return
        mkl = metadata["mkl"] = {}
    advancing = mkl.get(ADVANCING_KEY)
    if not isinstance(advancing, dict):
        advancing = mkl[ADVANCING_KEY] = {}
    if where is None:
        advancing.pop(run_id, None)
        if not advancing:
            mkl.pop(ADVANCING_KEY, None)
        if not mkl:
            metadata.pop("mkl", None)
    else:
        advancing[run_id] = where
