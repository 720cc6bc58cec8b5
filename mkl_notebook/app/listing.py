"""What a listing says of runs: of a store, of a notebook file, and every question waiting under a folder.

Each listed run says where it stands, the question it waits on with the one command that answers it, every
answer a person gave, and (for a run read from a file) who made it. Listing only reads: it makes, migrates
or writes no file, opens only stores of ours (read-only), and under a folder follows no link out of it. A
notebook's paths (the store a stopped resume named) are shown, never opened.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, NamedTuple, Protocol

from ..checkpoints import notebook_file as nbfile
from ..checkpoints.marks import advancing_marks
from ..checkpoints.notebook_disk import NotebookFileError
from ..durable.errors import StoreError
from ..durable.policy import due_at, policy_said
from ..durable.reading import claimed_name, decisions, established_how, notification_failed, spent
from ..durable.replay import JournalIndex
from ..durable.store_names import is_server_store, public_store
from ..durable.store_opening import close_store, open_store
from ..durable.stores import DEFAULT_STORE, RunStore, SQLiteStore
from ..render.commands import keep_command, reply_commands, resume_command
from .continuing import drawn_on
from .errors import UsageProblem, without_secrets
from .reconcile import forgotten_phrase, older_than_forgotten, stale_note
from .status import with_keys
from .trust import Keyring, Provenance

SKIPPED_FOLDERS = frozenset({".git", ".hg", "node_modules", "__pycache__", ".ipynb_checkpoints", ".tox", ".mypy_cache"})
STORE_NAME = "runs.sqlite"


def store_flag(path: str | Path | None) -> str | None:
    """The ``--store`` a command names: none for the default store (as this folder names it); a server's URL
    without its password (its reader supplies that: see :mod:`~mkl_notebook.durable.store_opening`)."""
    if path is None:
        return None
    if is_server_store(path):
        return public_store(str(path))
    if Path(path) == DEFAULT_STORE:
        return None
    return str(path)


def stored_resume(run_id: str, records: list[dict[str, Any]], store: str | None) -> str:
    """The command that continues run ``run_id`` of a store (``store``: its ``--store``, None for the default),
    with the answers it was started with."""
    return resume_command(run_id, store=store, started_with=drawn_on(records))


def file_resume(run_id: str, records: list[dict[str, Any]], notebook: str, store: str | None, trusted: bool) -> str:
    """The command that continues a notebook file's run: ``--trust-file`` when this person does not trust it."""
    return resume_command(
        run_id, notebook=notebook, store=store, trust_file=not trusted, started_with=drawn_on(records, trusted=trusted)
    )


def run_summary(
    run_id: str,
    records: list[dict[str, Any]],
    resume: str,
    provenance: Provenance | None = None,
    known: dict[str, str] | None = None,
) -> dict[str, Any]:
    """What a listing says of one run: where it stands, the question it waits on with the command that
    answers it (``resume`` names the run, e.g. ``mkl resume --id RUN``; a gate's question has two, approve and
    reject: ``commands``), and every answer a person gave.

    A run read from a file says who made it (``provenance``): ``trusted`` and ``made_by``; each answer says the
    name the reader trusts its key under (``trusted_as``, from ``known``: :meth:`Keyring.known_as`).
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
        commands = reply_commands(resume, question, now.error == "asked")
        listed.update(ask=now.shown, reply_to=now.reply_to, question_id=question, command=commands[0])
        listed["commands"] = commands
        asked = (index.last or {}).get("time")
        if isinstance(asked, (int, float)) and not isinstance(asked, bool):
            listed["asked_at"] = asked
        deadline = due_at(records)
        if deadline is not None:  # when the run's rule decides it, unless someone answers first
            listed["deadline_at"] = deadline
        failed = notification_failed(records)
        if failed is not None:  # (the channel redacted: its journal never holds it whole)
            listed["notification_failed"] = failed
    listed["answers"] = [
        {
            "question": answer.get("question"),
            "value": answer.get("value"),
            "by": answer.get("by"),
            "established": established_how(answer),
            "claimed": claimed_name(answer),
            "key": answer.get("key"),
            "signature": answer.get("signature"),
            "trusted_as": (known or {}).get(str(answer.get("key"))),
            "via": answer.get("via"),
            "time": answer.get("time"),
            **({"note": answer["note"]} if answer.get("note") is not None else {}),
            **({"rule": policy_said(answer)} if answer.get("t") == "policy" else {}),  # (a deadline's decision)
        }
        for answer in with_keys(decisions(records), records)
    ]
    if provenance is not None:
        listed.update(trusted=provenance.trusted, made_by=provenance.mark, key=provenance.key)
        if provenance.refused is not None:  # an answer from someone the run does not let answer: not answerable
            listed["refused"] = provenance.refused
            for key in ("question_id", "command", "commands"):
                listed.pop(key, None)
    return listed


def last_changed(records: list[dict[str, Any]]) -> float:
    """When a run's journal last changed: the time of its latest record (0 when no record says)."""
    times = [r["time"] for r in records if isinstance(r.get("time"), (int, float)) and not isinstance(r["time"], bool)]
    return max(times, default=0.0)


def listed_runs(store: RunStore, flag: str | None, *, waiting_only: bool = False) -> list[dict[str, Any]]:
    """Every run of ``store`` (those suspended, with ``waiting_only``) as a listing says it, in the order they
    last changed, the most recent last; ``flag`` is the ``--store`` its commands name."""
    runs = [run for run in store.runs() if not waiting_only or run.status == "suspended"]
    runs.sort(key=lambda run: run.updated)  # a store's own clock of each run's last change (every store has it)
    journals = [(run.run_id, store.read(run.run_id)) for run in runs]
    return [run_summary(run_id, records, stored_resume(run_id, records, flag)) for run_id, records in journals]


def store_runs(path: str | Path, *, waiting_only: bool = False) -> list[dict[str, Any]]:
    """Every run of the store at ``path`` (a file, or a server's URL; those suspended, with ``waiting_only``), as
    a listing says it, the most recently changed last. The store is opened read-only, and refused when there is
    none or the file is not a store of ours (a server's database without runs lists none)."""
    store = open_store(path, read_only=True)
    try:
        return listed_runs(store, store_flag(path), waiting_only=waiting_only)
    finally:
        close_store(store)


class NotebookListing(NamedTuple):
    """The runs a notebook file carries and the damaged copies."""

    runs: list[dict[str, Any]]
    damaged: list[dict[str, Any]]


def notebook_runs(path: Path, keyring: Keyring | None = None) -> NotebookListing:
    """Every run a notebook file carries, the most recently changed last, each with who made it and where it is
    shown, and, when it is carried only in outputs (``only_in_outputs``), the command that keeps it in the
    file's metadata. A run a resume left mid-advance says in which store (``advancing_in``), and its command
    resumes it there: the store the file names is not opened (the file is anyone's, and so is the path it
    names)."""
    keyring = keyring or Keyring()
    known = keyring.known_as()
    marks = advancing_marks(path)
    embedded, damaged = nbfile.scan(path)
    embedded = sorted(embedded, key=lambda run: last_changed(run.records))  # the most recently changed last
    listing = []
    stale = _stale(embedded)
    outputs_only = set(nbfile.only_in_outputs(path))
    for run in embedded:
        marked = [mark for mark in marks.get(run.run_id, []) if mark.holds(len(run.records))]
        left_in = marked[0].store if marked else None
        provenance = keyring.judge_history(run.records, run.seal)
        listed = run_summary(
            run.run_id,
            run.records,
            file_resume(run.run_id, run.records, str(path), left_in, provenance.trusted),
            provenance,
            known,
        )
        _mark_stale(listed, stale.get(run.run_id))
        if left_in is not None:
            listed["advancing_in"] = left_in
            listed["finish"] = file_resume(run.run_id, run.records, str(path), left_in, provenance.trusted)
        if run.run_id in outputs_only:  # stripping outputs would take it away; what keeps it
            listed["only_in_outputs"] = keep_command(str(path))
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
    return NotebookListing(listing, bad)


def _stale(embedded: list[nbfile.EmbeddedRun]) -> dict[str, str]:
    """Of a file's runs, those whose copy is older than the history this person's run store here (the default
    one, read-only) holds, each with what the newer holds; none when there is no store to read."""
    if not DEFAULT_STORE.is_file():
        return {}
    try:
        store = SQLiteStore(DEFAULT_STORE, read_only=True)
    except StoreError:
        return {}
    try:
        notes = {run.run_id: _stale_one(store, run) for run in embedded}
    finally:
        store.close()
    return {run_id: note for run_id, note in notes.items() if note is not None}


def _stale_one(store: RunStore, run: nbfile.EmbeddedRun) -> str | None:
    """What makes a file's copy of a run older than what ``store`` holds, or held and dropped (None: nothing)."""
    gone = older_than_forgotten(store, run.run_id, run.records)
    if gone is not None:
        return f"an older copy than the history of this run your store held and forgot ({forgotten_phrase(gone)})"
    return stale_note(store.read(run.run_id), run.records) if store.exists(run.run_id) else None


def _mark_stale(listed: dict[str, Any], note: str | None) -> None:
    """A file's copy of a run that the store in reach holds a newer history of is listed as stale, with no
    question to answer (an answer goes to the history as it stands)."""
    if note is not None:
        listed["stale"] = note
        for key in ("question_id", "command", "commands"):
            listed.pop(key, None)


def _files(folder: Path) -> Iterator[Path]:
    """Notebooks and run stores under ``folder``, in a stable order. Links to folders are not followed, but
    a store's folder that is a link is named (the store in it is then refused, as a link out of ``folder``)."""
    for current, folders, files in os.walk(folder):
        here = Path(current)
        if ".mkl" in folders and (here / ".mkl").is_symlink() and os.path.lexists(here / ".mkl" / STORE_NAME):
            yield here / ".mkl" / STORE_NAME
        folders[:] = sorted(name for name in folders if name not in SKIPPED_FOLDERS and not name.startswith(".venv"))
        for name in sorted(files):
            path = here / name
            if name.endswith(".ipynb") or (name == STORE_NAME and here.name == ".mkl"):
                yield path


def _leaves(path: Path, folder: Path) -> bool:
    """Whether ``path`` (found under ``folder``) is, or lies in, a link that leads out of ``folder``."""
    return not path.resolve().is_relative_to(folder.resolve())


def files_under(folder: Path) -> Iterator[tuple[Path, str, str | None]]:
    """The notebooks and run stores a listing of ``folder`` reads, in a stable order: each file's path, the
    path as shown (relative to here), and why it is refused (a link out of ``folder``), None when it is read."""
    for path in _files(folder):
        shown = os.path.relpath(path)
        yield path, shown, f"{shown}: a link out of {folder}, not followed" if _leaves(path, folder) else None


class Gatherer(Protocol):
    """What gathers runs from the notebooks and stores :func:`reach_into` finds."""

    def notebook(self, path: Path, shown: str) -> None:
        """Read the runs of the notebook at ``path`` (shown as ``shown``)."""

    def store(self, location: str | Path, shown: str, *, named: bool = False) -> None:
        """Read the runs of the store at ``location`` (``named``: the person named it, so it must open)."""


def reach_into(folders: Iterable[str], stores: Iterable[str | Path], reach: Gatherer, problems: list[str]) -> None:
    """Hand ``reach`` every notebook and run store under ``folders`` and each store of ``stores``; a file
    refused (a link out of its folder) is said in ``problems``, a folder that is not there refused at once."""
    for folder in folders:
        path = Path(folder)
        if not path.is_dir():
            raise UsageProblem(f"{folder}: no such folder")
        for file, shown, refused in files_under(path):
            if refused is not None:
                problems.append(refused)
            elif file.suffix == ".ipynb":
                reach.notebook(file, shown)
            else:
                reach.store(Path(shown), shown)
    for location in stores:
        shown = public_store(str(location)) if is_server_store(str(location)) else str(location)
        reach.store(location, shown, named=True)  # (one that cannot be opened is refused, with its own words)


def open_once(location: str | Path, opened: set[str], problems: list[str], *, named: bool = False) -> RunStore | None:
    """The store at ``location`` opened read-only, unless a walk opened it already (``opened`` holds where, by
    its resolved path or URL): None then, or when it cannot be opened, said in ``problems``; a store the
    person ``named`` that cannot be opened is refused."""
    same = str(location) if is_server_store(str(location)) else str(Path(location).resolve())
    if same in opened:
        return None
    opened.add(same)
    try:
        return open_store(location, read_only=True)
    except StoreError as exc:
        if named:
            raise
        problems.append(without_secrets(str(exc)))  # (a server's URL may be in it)
        return None


class Waiting(NamedTuple):
    """The questions waiting under a folder, one line for each file that could not be read, and the questions
    of files' older copies of runs (stale: the store in reach holds a newer history of them)."""

    questions: list[dict[str, Any]]
    problems: list[str]
    stale: list[dict[str, Any]]
    refused: list[dict[str, Any]]  # files' runs holding an answer from someone their run does not let answer


def waiting_questions(folder: Path, keyring: Keyring | None = None) -> Waiting:
    """Each question waiting under ``folder`` (where, the run, the question, the command that answers it,
    and for a notebook's run who made it), and one line for each file that could not be read or was refused:
    a link out of ``folder``, or a store file that is not one of ours. Stores are opened read-only."""
    keyring = keyring or Keyring()
    known = keyring.known_as()
    questions: list[dict[str, Any]] = []
    problems: list[str] = []
    stale: list[dict[str, Any]] = []
    refused: list[dict[str, Any]] = []
    for path, shown, left_out in files_under(folder):
        if left_out is not None:
            problems.append(left_out)
            continue
        try:
            if path.suffix == ".ipynb":
                embedded, damaged = nbfile.scan(path)
                problems += [f"{shown}, {bad.where}: {bad.reason}" for bad in damaged]
                listed = []
                for run in embedded:
                    provenance = keyring.judge_history(run.records, run.seal)
                    resume = file_resume(run.run_id, run.records, shown, None, provenance.trusted)
                    listed.append(run_summary(run.run_id, run.records, resume, provenance, known))
                older = _stale(embedded)
                for item, run in zip(listed, embedded, strict=True):
                    _mark_stale(item, older.get(run.run_id))
                    if "stale" in item and item.get("ask"):
                        stale.append({"where": shown, **item})
                refused += [{"where": shown, **item} for item in listed if "refused" in item]
            else:
                listed = store_runs(Path(shown), waiting_only=True)
        except (NotebookFileError, StoreError) as exc:
            problems.append(str(exc))
            continue
        questions += [{"where": shown, **item} for item in listed if item.get("question_id")]
    return Waiting(questions, problems, stale, refused)
