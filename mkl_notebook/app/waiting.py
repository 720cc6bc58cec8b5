"""Where approvals wait: every question a run waits on, in the notebooks and stores under a folder."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ..durable import nbfile
from ..durable.stores import SQLiteStore, StoreError
from .runs import summary
from .trust import Keyring

SKIPPED_FOLDERS = frozenset({".git", ".hg", "node_modules", "__pycache__", ".ipynb_checkpoints", ".tox", ".mypy_cache"})
STORE_NAME = "runs.sqlite"


def _files(folder: Path) -> Iterator[Path]:
    """Notebooks and run stores under ``folder``, in a stable order; links to folders are not followed."""
    for current, folders, files in os.walk(folder):
        folders[:] = sorted(name for name in folders if name not in SKIPPED_FOLDERS and not name.startswith(".venv"))
        for name in sorted(files):
            path = Path(current) / name
            if name.endswith(".ipynb") or (name == STORE_NAME and Path(current).name == ".mkl"):
                yield path


def waiting_questions(folder: Path, keyring: Keyring | None = None) -> tuple[list[dict[str, Any]], list[str]]:
    """Each question waiting under ``folder`` (where, the run, the question, the command that answers it,
    and for a notebook's run who made it), and one line for each file that could not be read."""
    keyring = keyring or Keyring()
    questions: list[dict[str, Any]] = []
    problems: list[str] = []
    for path in _files(folder):
        shown = os.path.relpath(path)
        try:
            if path.suffix == ".ipynb":
                embedded, damaged = nbfile.scan(path)
                problems += [f"{shown}, {bad.where}: {bad.reason}" for bad in damaged]
                listed = [
                    summary(run.run_id, run.records, f"mkl resume {shown} --run {run.run_id}", keyring.judge(run.seal))
                    for run in embedded
                ]
            else:
                store = SQLiteStore(path)
                flag = f" --store {shown}" if shown != os.path.join(".mkl", STORE_NAME) else ""
                listed = [
                    summary(item.run_id, store.read(item.run_id), f"mkl resume --id {item.run_id}{flag}")
                    for item in store.runs()
                    if item.status == "suspended"
                ]
        except (nbfile.NotebookFileError, StoreError) as exc:
            problems.append(str(exc))
            continue
        questions += [{"where": shown, **item} for item in listed if item.get("question_id")]
    return questions, problems
