"""Advancing marks: which store a notebook's run is being advanced in, until the file holds what that did.

A writer of the file (``mkl resume``) keeps its mark in the notebook's metadata; a notebook kernel, which cannot
write its notebook, keeps its mark in a file beside it. Both kinds, and the check of when a mark is spent, are
here, apart from the run checkpoints they guard (:mod:`checkpoints.notebook_file`, which also takes a file's mark
away as it writes the run back, in the same write).
"""

from __future__ import annotations

import json
import os
import stat
import time
from pathlib import Path
from typing import Any, NamedTuple

from ..lang import files
from .notebook_disk import NotebookFileError, _document, _Index, _index, _keep, _replace, dumps_notebook, read_json
from .notebook_file import ADVANCING_KEY, _set_advancing, embedded_runs

# -- which store a file's run is being advanced in ---------------------------------------------------


class AdvancingMark(NamedTuple):
    """That run's history is being advanced in ``store`` from a copy of ``held`` records the notebook held: until
    the file holds more of it, no other store may take the run up from this file (what the advance did would be
    lost, its effects done twice). One mark, kept where its writer can write: in the file's metadata by a writer
    of the file (``mkl resume``, so a file sent on after a stopped resume still says it), beside the file by a
    notebook kernel, which cannot write its notebook (``beside``)."""

    store: str
    since: float | None
    held: int | None  # None: a mark written before its copy's length was (it holds until it is taken back)
    beside: bool

    def holds(self, in_file: int) -> bool:
        """Whether the mark still holds while the file's copy of the run has ``in_file`` records."""
        return self.held is None or in_file <= self.held


def _read_marks(found: Any, beside: bool) -> dict[str, AdvancingMark]:
    """The marks an object of marks (run id -> ``{store, since, held}``) holds; misshapen ones count as none."""
    if not isinstance(found, dict):
        return {}
    marks = {}
    for run_id, where in found.items():
        if not (isinstance(run_id, str) and isinstance(where, dict) and isinstance(where.get("store"), str)):
            continue
        held, since = where.get("held"), where.get("since")
        if beside and not isinstance(held, int):
            continue
        marks[run_id] = AdvancingMark(
            where["store"],
            float(since) if isinstance(since, int | float) and not isinstance(since, bool) else None,
            held if isinstance(held, int) and not isinstance(held, bool) else None,
            beside,
        )
    return marks


def advancing(path: str | Path, run_id: str) -> list[AdvancingMark]:
    """The marks of run ``run_id`` of the notebook (in the file first, then beside it): where it is being
    advanced while the file does not hold what that did."""
    return advancing_marks(path).get(run_id, [])


def advancing_marks(path: str | Path) -> dict[str, list[AdvancingMark]]:
    """Every run the notebook has marks of, by id: the file's own (a resume stopped before its write-back), then
    those beside it (a kernel advanced it since the file was last saved)."""
    metadata = _document(path).get("metadata")
    mkl = metadata.get("mkl") if isinstance(metadata, dict) else None
    marks: dict[str, list[AdvancingMark]] = {}
    for run_id, mark in _read_marks(mkl.get(ADVANCING_KEY) if isinstance(mkl, dict) else None, False).items():
        marks.setdefault(run_id, []).append(mark)
    for run_id, mark in side_marks(path).items():
        marks.setdefault(run_id, []).append(mark)
    return marks


def mark_advancing(path: str | Path, run_id: str, store: str, held: int) -> None:
    """Say in the file, before a run is advanced from its copy of ``held`` records, in which store: until the
    write-back, no other store may take the run up from this file (its progress would be lost, its effects
    repeated)."""
    _write_advancing(Path(path), run_id, {"store": store, "since": time.time(), "held": held})


def clear_advancing(path: str | Path, run_id: str) -> None:
    """The advance recorded nothing (it was refused): the file is the run's state again."""
    _write_advancing(Path(path), run_id, None)


def _write_advancing(path: Path, run_id: str, where: dict[str, Any] | None) -> None:
    """Write the file's mark of run ``run_id`` (None: take it away). Its index is updated, not thrown away: the
    mark changes nothing else, so what was found in the file (its runs, checked, and its cells) holds for
    what is written, when the file this writer read is the one indexed."""
    index = _index(path)
    notebook = read_json(path)  # this writer's own copy, to change
    unchanged = notebook == index.document
    _set_advancing(notebook, run_id, where)
    written = _replace(path, dumps_notebook(notebook))
    if unchanged and written is not None:
        _keep(path, _Index(written, notebook, dict(index.found)))


# -- which store a kernel is advancing a file's run in ---------------------------------------------------

SIDE_MARK_LIMIT = 256 * 1024


def mark_file(path: Path) -> Path:
    """The file beside notebook ``path`` where a kernel keeps its marks."""
    return path.with_name(f".{path.name}.mkl-advancing.json")


def side_marks(path: str | Path) -> dict[str, AdvancingMark]:
    """The marks a notebook kernel left beside the file (:class:`AdvancingMark`): a kernel does not write the
    notebook (its front end saves it), so it says beside the file which runs it advanced from its own store
    since the file last held them. Unreadable or misshapen marks count as none."""
    try:
        found = files.parse_json(files.read_text(mark_file(Path(path)), SIDE_MARK_LIMIT))
    except (OSError, ValueError):  # (an unfit file is an OSError, unfit JSON a ValueError)
        return {}
    return _read_marks(found, True)


def drop_spent_marks(path: str | Path) -> None:
    """Take back the marks beside the notebook that are spent (the file holds more of the run than the copy the
    advance started from: its front end saved what the advance did), and the file of marks once none is left.
    Call with the notebook's lock held."""
    marks = side_marks(path)
    if not marks:
        return
    try:
        runs = {run.run_id: len(run.records) for run in embedded_runs(path)}
    except NotebookFileError:
        return  # the file cannot be read now: the marks stay
    for run_id, mark in list(marks.items()):
        if not mark.holds(runs.get(run_id, -1)):
            set_side_mark(path, run_id, None)


def set_side_mark(path: str | Path, run_id: str, store: str | None, held: int = 0) -> None:
    """Say beside the notebook that run ``run_id`` is being advanced in ``store`` from a copy of ``held``
    records (``store`` None: take the mark back). Call with the notebook's lock held."""
    path = Path(path)
    marks = {run: {"store": m.store, "since": m.since, "held": m.held} for run, m in side_marks(path).items()}
    if store is None:
        if marks.pop(run_id, None) is None:
            return
    else:
        marks[run_id] = {"store": store, "since": time.time(), "held": held}
    side = mark_file(path)
    try:
        found = os.lstat(side)
    except FileNotFoundError:
        found = None
    if found is not None and not stat.S_ISREG(found.st_mode):  # never written, or removed, through what is there
        raise NotebookFileError(
            f"{side}: is not a regular file (a link, a folder), so the mark that says a run of {path.name} is "
            "being advanced cannot be kept there and nothing was advanced; move it away"
        )
    if not marks:
        side.unlink(missing_ok=True)
        return
    _replace(side, json.dumps(marks, sort_keys=True) + "\n", mode=0o644)
