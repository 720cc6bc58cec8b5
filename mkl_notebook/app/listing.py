"""What a listing says of runs: of a store, of a notebook file, and every question waiting under a folder.

Each listed run says where it stands, the question it waits on with the one command that answers it, every
answer a person gave, and (for a run read from a file) who made it. Listing reads; the one thing it may write
is a write-back a stopped resume of this person's left unmade, from their own store into their own file.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

from ..checkpoints import notebook_file as nbfile
from ..durable.errors import StoreError
from ..durable.records import replies, spent
from ..durable.replay import JournalIndex
from ..durable.stores import DEFAULT_STORE, SQLiteStore
from ..render.commands import reply_command, resume_command
from .checkpoints import finish_write_back, stale_note
from .errors import UsageProblem
from .trust import Keyring, Provenance

SKIPPED_FOLDERS = frozenset({".git", ".hg", "node_modules", "__pycache__", ".ipynb_checkpoints", ".tox", ".mypy_cache"})
STORE_NAME = "runs.sqlite"


def store_flag(path: str | Path | None) -> str | None:
    """The ``--store`` a command names: none for the default store (as this folder names it)."""
    if path is None or Path(path) == DEFAULT_STORE:
        return None
    return str(path)


def run_summary(
    run_id: str, records: list[dict[str, Any]], resume: str, provenance: Provenance | None = None
) -> dict[str, Any]:
    """What a listing says of one run: where it stands, the question it waits on with the command that
    answers it (``resume`` names the run, e.g. ``mkl resume --id RUN``), and every answer a person gave.

    A run read from a file says who made it (``provenance``): ``trusted`` and ``made_by``.
    """
    index = JournalIndex.build(records)
    now = index.state
    listed: dict[str, Any] = {
        "run": run_id,
        "machine": index.setup.get("root"),
        "status": now.status,
        "error": now.error,
        "at": now.at,
    }
    cost = spent(records)
    if cost is not None:
        listed["cost_usd"] = round(cost, 8)
    question = now.question_id(run_id)
    if question is not None:
        listed.update(
            ask=now.shown,
            reply_to=now.reply_to,
            question_id=question,
            command=reply_command(resume, question, now.reply_to),
        )
        asked = (index.last or {}).get("time")
        if isinstance(asked, (int, float)) and not isinstance(asked, bool):
            listed["asked_at"] = asked
    listed["answers"] = [
        {
            "question": answer.get("question"),
            "value": answer.get("value"),
            "by": answer.get("by"),
            "via": answer.get("via"),
            "time": answer.get("time"),
        }
        for answer in replies(records)
    ]
    if provenance is not None:
        listed.update(trusted=provenance.trusted, made_by=provenance.mark, key=provenance.key)
    return listed


def store_runs(path: Path) -> list[dict[str, Any]]:
    """Every run of the store at ``path``, as a listing says it."""
    if not path.is_file():
        raise UsageProblem(f"{path}: no such run store")
    store = SQLiteStore(path)
    flag = store_flag(path)
    return [
        run_summary(run.run_id, store.read(run.run_id), resume_command(run.run_id, store=flag)) for run in store.runs()
    ]


class NotebookListing(NamedTuple):
    """The runs a notebook file carries, the write-backs this listing completed, and the damaged copies."""

    runs: list[dict[str, Any]]
    written_back: list[tuple[str, str]]  # (run id, the store it was written back from)
    damaged: list[dict[str, Any]]


def notebook_runs(path: Path, keyring: Keyring | None = None) -> NotebookListing:
    """Every run a notebook file carries, each with who made it, where it is shown, and whether a resume was
    left mid-advance (with the store that holds what it did)."""
    keyring = keyring or Keyring()
    written = []
    marks = nbfile.advancing_marks(path)
    embedded, damaged = nbfile.scan(path)
    for run in embedded:  # a write-back a stopped resume never made, from a store here
        done = finish_write_back(path, run.run_id, keyring) if run.run_id in marks else None
        if done is not None:
            written.append((run.run_id, done))
    if written:  # the file holds those runs as their stores do now
        marks = nbfile.advancing_marks(path)
        embedded, damaged = nbfile.scan(path)
    listing = []
    reach = _store_in_reach()
    for run in embedded:
        listed = run_summary(
            run.run_id,
            run.records,
            resume_command(run.run_id, notebook=str(path)),
            keyring.judge_history(run.records, run.seal),
        )
        _mark_stale(listed, reach, run.run_id, run.records)
        marked = marks.get(run.run_id)
        if marked is not None:
            listed["advancing_in"] = marked["store"]
        cell = None if run.cell_index is None else run.cell_index + 1
        listing.append({**listed, "where": run.where, "cell": cell, "in_metadata": run.in_metadata})
    bad = [
        {
            "run": problem.run_id,
            "status": "damaged",
            "error": problem.reason,
            "where": problem.where,
            "cell": None if problem.cell_index is None else problem.cell_index + 1,
        }
        for problem in damaged
    ]
    return NotebookListing(listing, written, bad)


def _store_in_reach() -> SQLiteStore | None:
    """This person's run store here (the default one), to tell a file's older copy of a run from a current one;
    None when there is none or it cannot be read."""
    if not DEFAULT_STORE.is_file():
        return None
    try:
        return SQLiteStore(DEFAULT_STORE)
    except StoreError:
        return None


def _mark_stale(listed: dict[str, Any], reach: SQLiteStore | None, run_id: str, records: list[dict[str, Any]]) -> None:
    """A file's copy of a run that the store in reach holds a newer history of is listed as stale, with no
    question to answer (an answer goes to the history as it stands)."""
    if reach is None or not reach.exists(run_id):
        return
    note = stale_note(reach.read(run_id), records)
    if note is not None:
        listed["stale"] = note
        for key in ("question_id", "command"):
            listed.pop(key, None)


def _files(folder: Path) -> Iterator[Path]:
    """Notebooks and run stores under ``folder``, in a stable order; links to folders are not followed."""
    for current, folders, files in os.walk(folder):
        folders[:] = sorted(name for name in folders if name not in SKIPPED_FOLDERS and not name.startswith(".venv"))
        for name in sorted(files):
            path = Path(current) / name
            if name.endswith(".ipynb") or (name == STORE_NAME and Path(current).name == ".mkl"):
                yield path


class Waiting(NamedTuple):
    """The questions waiting under a folder, one line for each file that could not be read, and the questions
    of files' older copies of runs (stale: the store in reach holds a newer history of them)."""

    questions: list[dict[str, Any]]
    problems: list[str]
    stale: list[dict[str, Any]]


def waiting_questions(folder: Path, keyring: Keyring | None = None) -> Waiting:
    """Each question waiting under ``folder`` (where, the run, the question, the command that answers it,
    and for a notebook's run who made it), and one line for each file that could not be read."""
    keyring = keyring or Keyring()
    questions: list[dict[str, Any]] = []
    problems: list[str] = []
    stale: list[dict[str, Any]] = []
    reach = _store_in_reach()
    for path in _files(folder):
        shown = os.path.relpath(path)
        try:
            if path.suffix == ".ipynb":
                embedded, damaged = nbfile.scan(path)
                problems += [f"{shown}, {bad.where}: {bad.reason}" for bad in damaged]
                listed = [
                    run_summary(
                        run.run_id,
                        run.records,
                        resume_command(run.run_id, notebook=shown),
                        keyring.judge_history(run.records, run.seal),
                    )
                    for run in embedded
                ]
                for item, run in zip(listed, embedded, strict=True):
                    _mark_stale(item, reach, run.run_id, run.records)
                    if "stale" in item and item.get("ask"):
                        stale.append({"where": shown, **item})
            else:
                store = SQLiteStore(path)
                flag = store_flag(shown)
                listed = [
                    run_summary(item.run_id, store.read(item.run_id), resume_command(item.run_id, store=flag))
                    for item in store.runs()
                    if item.status == "suspended"
                ]
        except (nbfile.NotebookFileError, StoreError) as exc:
            problems.append(str(exc))
            continue
        questions += [{"where": shown, **item} for item in listed if item.get("question_id")]
    return Waiting(questions, problems, stale)
