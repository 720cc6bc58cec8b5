"""Runs that travel in files: taking a checkpoint up into a store, resuming a run a notebook or checkpoint
file carries and writing it back (first finishing a write-back a stopped resume in the same store left), and
the seals in a file.

Every file here is someone else's until its seal says otherwise: it is verified before anything is read,
taken up only when trusted (or by an explicit choice), and a notebook is written only under its lock.
"""

from __future__ import annotations

import contextlib
import itertools
import os
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, NamedTuple

from ..checkpoints import envelope
from ..checkpoints import notebook_file as nbfile
from ..checkpoints.marks import (
    AdvancingMark,
    advancing,
    clear_advancing,
    drop_spent_marks,
    mark_advancing,
    mark_file,
    set_side_mark,
    side_marks,
)
from ..checkpoints.notebook_cells import cell_ids, code_cells, has_form, output_data, paired_texts
from ..checkpoints.notebook_disk import NotebookFileError, locked
from ..checkpoints.seals import Signer, key_fingerprint, signatures
from ..durable import runs as durable
from ..durable.leases import file_lease
from ..durable.reading import replies, run_state
from ..durable.replay import JournalIndex
from ..durable.runs import Outcome
from ..durable.store_opening import close_store, open_store
from ..durable.stores import RunStore, SQLiteStore
from ..errors import UserError
from ..render.batch_views import batch_answered_bundle, batch_bundle, batch_waiting_bundle
from ..render.commands import on_this_terminal, resume_command
from ..render.common import answer_time
from . import batch
from .errors import UsageProblem
from .reconcile import Copy, parted_note, reconcile
from .status import answers_to, form_place, run_diagram, run_output, with_keys
from .trust import Keyring

CHECKPOINT_MIME = envelope.MIME_TYPE  # a run output's checkpoint
REFERENCE_MIME = envelope.REF_MIME_TYPE  # a run output's reference to the metadata's copy instead
BATCH_MIME = envelope.BATCH_MIME_TYPE  # a batch output's checkpoints (or references), one per row
BATCH_FORM_MIME = nbfile.BATCH_FORM_MIME  # marks where a batch form's questions are printed
BATCH_ROWS_MIME = nbfile.BATCH_ROWS_MIME  # a batch output's rows that have no run, as its table shows them
FORM_MIME = nbfile.FORM_MIME  # what stands in a form's place: {run, question_id}
WIDGET_MIME = nbfile.WIDGET_VIEW_MIME  # a widget drawn by the kernel
referring = envelope.referring  # a run output that refers to the metadata's copy of its checkpoint instead
checkpoint_of = envelope.checkpoint_of  # a run's checkpoint


def notebook_run_ids(notebook: Path, *, waiting_only: bool = False) -> list[str]:
    """The runs a notebook file carries (those that wait, with ``waiting_only``); none when it cannot be read."""
    try:
        carried = nbfile.embedded_runs(notebook)
    except NotebookFileError:
        return []
    # (where a run stands is read from its history, which its signatures cover, never from the header beside it)
    return [run.run_id for run in carried if not waiting_only or run_state(run.records).status == "suspended"]


def _take_up_one(store: RunStore, copy: Copy, keyring: Keyring, trust_file: bool) -> None:
    """Reconcile the one copy a command names with ``store``: an untrusted copy that adds to the run is refused
    (:class:`Untrusted`); one whose history parts from the store's is kept beside it, and nothing is resumed
    until the person picks which goes on."""
    reconciled = reconcile(store, copy.run_id, [copy], keyring, trust_file=trust_file)
    problem = reconciled.untrusted or reconciled.older
    if problem is not None:
        raise problem
    for parted in reconciled.parted:
        raise UsageProblem(f"{parted_note(copy.run_id, parted)} {_pick_one(copy.run_id, parted.branch, store)}")


def _pick_one(run_id: str, branch: str | None, store: RunStore) -> str:
    """How to go on with one of two histories that parted (nothing is resumed until the person picks)."""
    if branch is None:
        return f"Nothing was resumed; this store's run '{run_id}' is unchanged."
    place = store_place(store)
    return (
        f"Nothing was resumed: go on with either, `{resume_command(run_id, store=place)}` (this store's) "
        f"or `{resume_command(branch, store=place)}` (the file's)."
    )


def own_run_id(run_id: str, signer: Signer | None) -> str:
    """The id of this person's own run of a cell whose file holds a run ``run_id`` they cannot use: the same on
    every execution, so that Restart & Run All replays it."""
    if signer is None:
        return nbfile.derived_id(run_id, "here", "0000")
    return nbfile.derived_id(run_id, signer.by, key_fingerprint(signer.key)[:4])


def resume_checkpoint_file(
    path: str, store: RunStore, advance: Callable[[str], Outcome], *, keyring: Keyring, trust_file: bool = False
) -> Outcome:
    """Resume the run a checkpoint file carries (``advance(run_id)`` once it is in ``store``, a store file) and
    write its new checkpoint over the file, sealed by this person. Concurrent resumes of one file take turns (a
    lock beside the store), so the later one reads what the earlier one wrote."""
    if not isinstance(store, SQLiteStore):
        raise UsageProblem("a checkpoint file is resumed in a run store file (--store PATH)")
    lock = store.path.parent / "locks" / (Path(path).resolve().name + ".checkpoint.lock")
    with file_lease(lock, f"checkpoint {path}"):
        header, records, seal = envelope.read_file(path)
        copy = Copy(header, records, seal, path)
        _take_up_one(store, copy, keyring, trust_file)
        outcome = advance(copy.run_id)
        envelope.write_file(path, envelope.checkpoint_of(outcome, keyring.signer()))
    return outcome


def write_checkpoint(path: str, outcome: Outcome, signer: Signer | None) -> None:
    """Write ``outcome``'s checkpoint to ``path`` (owner-only), sealed by ``signer``."""
    envelope.write_file(path, envelope.checkpoint_of(outcome, signer))


def check_checkpoint_folder(path: str | None) -> None:
    """Refuse a ``--checkpoint`` path that cannot be written, before anything runs or is journaled."""
    if path:
        check_file_to_write(path, "--checkpoint")


def check_file_to_write(path: str, given_as: str) -> None:
    """Refuse a path a command is to (re)write that cannot be: one in a folder that does not exist or cannot be
    written, or one that names a folder or anything else but a file. ``given_as`` names where the path came
    from (a flag, an environment variable), as the one-line message says it."""
    folder = Path(path).parent
    if not path:
        raise UsageProblem(f"{given_as}: give the path of a file")
    if not folder.is_dir():
        raise UsageProblem(f"{given_as} {path}: the folder {folder} does not exist")
    if path.endswith(os.sep) or Path(path).is_dir():
        raise UsageProblem(f"{given_as} {path}: is a folder; name the file to write in it")
    if Path(path).exists() and not Path(path).is_file():
        raise UsageProblem(f"{given_as} {path}: is not a regular file (a pipe, a device or a socket)")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise UsageProblem(f"{given_as} {path}: the folder {folder} cannot be written")


def resume_in_notebook(
    notebook: Path,
    run_id: str,
    store: RunStore,
    advance: Callable[[str], Outcome],
    *,
    keyring: Keyring,
    trust_file: bool = False,
) -> Outcome:
    """Resume a run a notebook file carries and write its new checkpoint and view back into that file.

    The file's checkpoint is taken up only when it is trusted or ``trust_file`` says to take it up anyway
    (see :func:`take_up`); what is written back is sealed with this person's key.

    ``advance(run_id)`` resumes the run once it is in ``store``. The notebook's own lock is held from
    reading the file to replacing it, so concurrent resumes of one file (from any store) take turns:
    the later one reads what the earlier one wrote. Before advancing, the file says in which store; a
    writer stopped before its write-back leaves that mark, so the file is never taken up from another
    store (that would run its effects again), and the next resume from the same store first writes
    back what the store holds.
    """
    where = store_place(store)
    with locked(notebook):
        drop_spent_marks(notebook)
        embedded = nbfile.find_run(notebook, run_id)
        marked = any(mark.holds(len(embedded.records)) for mark in advancing(notebook, run_id))
        elsewhere = advanced_elsewhere(notebook, run_id, store, len(embedded.records))
        if elsewhere is not None:
            raise AdvancedElsewhere(elsewhere)
        copy = Copy(embedded.header, embedded.records, embedded.seal, str(notebook), embedded.raw)
        _take_up_one(store, copy, keyring, trust_file)
        signer = keyring.signer()
        caught = _catch_up(notebook, embedded, store, signer, marked)
        if caught is not None:
            if run_state(caught.records).finished:
                return caught  # the stopped resume finished the run: its write-back was all that was left
            embedded = nbfile.find_run(notebook, run_id)
        mark_advancing(notebook, run_id, where, len(embedded.records))
        try:
            outcome = advance(run_id)
        except BaseException:
            if len(store.read(run_id)) == len(embedded.records):
                clear_advancing(notebook, run_id)  # refused: nothing happened, the file still holds it all
            raise
        _write_back(notebook, embedded, outcome, signer)
    return outcome


def _refuse_if_elsewhere(notebook: Path, run_id: str, store: RunStore) -> int | None:
    """How many records of ``run_id`` the notebook's file holds (None: it holds no readable copy of it), unless
    another store is advancing it (:class:`AdvancedElsewhere`)."""
    try:
        held = len(nbfile.find_run(notebook, run_id).records)
    except NotebookFileError:
        return None  # not the file's run (or no copy of it is readable): nothing to keep apart
    elsewhere = advanced_elsewhere(notebook, run_id, store, held)
    if elsewhere is not None:
        raise AdvancedElsewhere(elsewhere)
    return held


class AdvancedElsewhere(UsageProblem):
    """A run the notebook file holds is being advanced in another store, and what it did there is not in the
    file yet: advancing it here too would do it twice."""


def advanced_elsewhere(notebook: Path, run_id: str, store: RunStore, held: int) -> str | None:
    """Why run ``run_id``, of which the notebook's file holds ``held`` records, must not be advanced in ``store``
    now, or None: the file says another store was advancing it when its writer stopped (a resume cut off
    before its write-back), or a kernel beside it advanced it from another store and the file has not been
    saved since. Call with the notebook's lock held. The store a mark in the file names is only compared, never
    opened; one a mark beside it names is read to tell a kernel's mark from one set there (:func:`_stands`)."""
    mine = (store_place(store), store.location)
    for mark in advancing(notebook, run_id):
        if mark.store in mine or not mark.holds(held) or not _stands(mark, run_id):
            continue
        if not mark.beside:
            return (
                f"{notebook}: run '{run_id}' was being advanced in the store {mark.store} when that stopped, "
                "and what it did there is not in this file; resume it with that store (--store), so that "
                "nothing it did runs twice"
            )
        since = answer_time(mark.since)
        when = f" at {since}" if since else ""
        return (
            f"{notebook}: run '{run_id}' was advanced{when} by a notebook kernel in the store {mark.store}, "
            "and the notebook has not been saved since, so what it did is not in this file: save the notebook "
            "in that kernel, then try again (or resume it with that store, --store), so that nothing it did "
            f"runs twice (the kernel says so in {mark_file(notebook).name} beside the notebook: remove "
            "it only if no kernel of that store has the notebook open)"
        )
    return None


def _stands(mark: AdvancingMark, run_id: str) -> bool:
    """Whether a mark is heeded. One in the file travels with it, and the store it names is never opened. One
    beside the file is a kernel's, which took the run up into the store it names before it marked it: unless that
    store is a run store of ours holding the run at least as far as the file held it then, the mark is not a
    kernel's (someone wrote it, or the store was since removed) and is set aside. The store is only read, as a
    listing reads one: nothing is made or written there."""
    if not mark.beside:
        return True
    try:
        named = open_store(mark.store, read_only=True)
    except (OSError, ValueError, UserError):
        return False
    try:
        held = len(named.read(run_id))
    except (OSError, ValueError, UserError):
        return False
    finally:
        close_store(named)
    return held > 0 and (mark.held is None or held >= mark.held)


def unheeded_marks(notebook: Path, run_id: str) -> list[str]:
    """One line for each mark beside ``notebook`` of ``run_id`` that is set aside (see :func:`_stands`), naming
    its file: a resume goes on as if it were not there."""
    try:
        marks = advancing(notebook, run_id)
    except NotebookFileError:
        return []
    return [
        f"{mark_file(notebook)}: says run '{run_id}' is being advanced in the store {mark.store}, which "
        "holds no such advance of it; set aside"
        for mark in marks
        if mark.beside and not _stands(mark, run_id)
    ]


@contextlib.contextmanager
def kernel_advance(notebook: Path | None, run_id: str, store: RunStore) -> Iterator[None]:
    """Advance run ``run_id`` in a kernel's ``store`` while its notebook file (``notebook``) holds it: refused
    (:class:`AdvancedElsewhere`) when another store is advancing it, else said beside the file for as long as
    the file does not hold what this advance did, so no other kernel or ``mkl resume`` of the file does it
    again. A notebook that does not hold the run is not involved."""
    if notebook is None:
        yield
        return
    _refuse_if_elsewhere(notebook, run_id, store)  # before waiting for the lock: a resume holds it while it works
    with locked(notebook):
        drop_spent_marks(notebook)
        held = _refuse_if_elsewhere(notebook, run_id, store)
        if held is not None:
            before = len(store.read(run_id))
            set_side_mark(notebook, run_id, store_place(store), held)
    if held is None:
        yield
        return
    try:
        yield
    except BaseException:
        if len(store.read(run_id)) == before:  # refused: nothing happened here, the file holds it all
            with locked(notebook):
                set_side_mark(notebook, run_id, None)
        raise


def tidy_beside(notebook: Path | None) -> None:
    """The marks a kernel left beside its notebook that the file now holds past (its page saved what the kernel
    did) are taken back, and the file of marks with the last one: nothing stays beside the person's notebook."""
    if notebook is None or not side_marks(notebook):
        return
    with contextlib.suppress(NotebookFileError), locked(notebook, wait=1.0):
        drop_spent_marks(notebook)


def paired_edits(notebook: Path) -> str | None:
    """What a write-back of ``notebook`` would put at risk, said before it is written: a text file jupytext pairs
    it with that was changed after it (an edit not synced yet). Once the notebook is written it is the newer, and
    ``jupytext --sync`` would take its cells over the text's edits; the edits are kept by updating the notebook
    from the text instead. None when nothing is paired, or nothing is newer."""
    try:
        written = notebook.stat().st_mtime
        newer = [text for text in paired_texts(notebook) if text.stat().st_mtime > written]
    except (OSError, NotebookFileError):
        return None
    if not newer:
        return None
    text = newer[0]
    return (
        f"{text} (paired with {notebook.name} by jupytext) was changed after {notebook.name}, which this resume has "
        f"now written: `jupytext --sync` would take the notebook's cells over those edits; keep them with "
        f"`jupytext --update --to ipynb {text}` (it keeps the notebook's outputs and its runs)"
    )


def notebook_run_names(notebook: Path) -> str:
    """The ids of the runs a notebook carries, for a message ("none" when it carries none)."""
    return ", ".join(run.run_id for run in nbfile.embedded_runs(notebook)) or "none"


def store_place(store: RunStore) -> str:
    """Where a store is, as a notebook's mid-advance mark names it: a store file's absolute path."""
    path = getattr(store, "path", None)
    return str(Path(path).resolve()) if isinstance(path, Path) else store.location


def _catch_up(
    notebook: Path, embedded: nbfile.EmbeddedRun, store: RunStore, signer: Signer, marked: bool
) -> Outcome | None:
    """A write-back never came (the file is ``marked`` mid-advance, or the store holds more than it): put
    the store's state of the run in the file. What it wrote (None: nothing)."""
    held = store.read(embedded.run_id)
    if not marked and len(held) <= len(embedded.records):
        return None
    shown = durable.show_prefix(embedded.run_id, held, len(held))
    if shown is None:
        return None
    _write_back(notebook, embedded, shown, signer)
    return shown


def _write_back(notebook: Path, embedded: nbfile.EmbeddedRun, outcome: Outcome, signer: Signer) -> None:
    """Write ``outcome``'s checkpoint, view and diagram over the run's outputs, and its state where its forms
    were: what the file shows of the run is what it now holds (its commands as plain ``mkl``: the file travels)."""
    with on_this_terminal(False):
        _write_view(notebook, embedded, outcome, signer)


def _write_view(notebook: Path, embedded: nbfile.EmbeddedRun, outcome: Outcome, signer: Signer) -> None:
    run_id = outcome.run_id
    index = JournalIndex.build(outcome.records)
    root = str(index.setup.get("root"))  # (from the history its signatures cover, not the header beside it)
    machine = outcome.machines.get(root)  # the machine the run just ran; a journal's pinned copy otherwise
    if machine is None:
        machine = durable.machines_from_pins(index.machines, run_id).get(root)
    name = notebook.name

    def form_place_now(marker: dict[str, Any]) -> dict[str, Any] | None:
        if "runs" in marker:
            return _batch_place(notebook, marker["runs"], outcome)
        if not marker.get("question_id"):
            return None  # it already says what became of its question
        answered = answers_to(outcome.records, marker.get("question_id"))
        return form_place(run_id, outcome, notebook=name, answers=answered)

    forms_shown = has_form(notebook, run_id)
    view = run_output(run_id, machine, outcome, notebook=name, question_above=forms_shown, signer=signer)
    diagram = run_diagram(machine, outcome) if machine is not None else None
    table = _batch_table(notebook, embedded, outcome) if embedded.entry_index is not None else None
    nbfile.write_run(notebook, embedded, view, form_place_now, diagram, table)


def batch_place(waiting: list[tuple[str, Any]], runs: list[str], notebook: str | None) -> dict[str, Any]:
    """What stands where a batch's form is, readable without a kernel, marked with the batch's ``runs`` asked
    there and how many questions still wait (so a headless answer to one row can rewrite it)."""
    return {**batch_waiting_bundle(waiting, notebook), BATCH_FORM_MIME: {"runs": runs, "waiting": len(waiting)}}


def _batch_place(notebook: Path, runs: list[str], outcome: Outcome) -> dict[str, Any] | None:
    """Where a batch's form asked ``runs``' questions, now that ``outcome`` moved one of them: the questions that
    still wait, else what each run was answered (None: a run the file cannot show, left as it was)."""
    carried = {run.run_id: run for run in nbfile.scan(notebook)[0]}
    shown: list[Outcome] = []
    for run_id in runs:
        run = carried.get(run_id)
        now = outcome if run_id == outcome.run_id else None
        if now is None and run is not None:
            now = durable.show_prefix(run_id, run.records, len(run.records))
        if now is None:
            return None
        shown.append(now)
    waiting = [(now.run_id, now.result) for now in shown if now.result.waits_for_person]
    if waiting:
        return batch_place(waiting, runs, notebook.name)
    # a reply record is said as an answer is
    answered = [(now.run_id, with_keys(replies(now.records), now.records)) for now in shown]
    said = [(run_id, given) for run_id, given in answered if given]
    return batch_answered_bundle(said, "No question of this batch waits here any more. Its runs were answered:")


def _batch_table(notebook: Path, embedded: nbfile.EmbeddedRun, outcome: Outcome) -> dict[str, str] | None:
    """The table of the batch output that carries ``embedded`` (a row's run), with that run as ``outcome`` and
    every other row as the file holds it: its entries' runs, and the rows that have no run in their places."""
    assert embedded.cell_index is not None and embedded.output_index is not None
    data = output_data(notebook, embedded.cell_index, embedded.output_index)
    kept = data.get(BATCH_ROWS_MIME)
    without_run = (
        [row for row in kept if isinstance(row, dict) and type(row.get("row")) is int] if isinstance(kept, list) else []
    )
    taken = {row.get("row") for row in without_run}
    here = (embedded.cell_index, embedded.output_index)
    carried = sorted(
        (
            run
            for run in nbfile.scan(notebook)[0]
            if run.entry_index is not None and (run.cell_index, run.output_index) == here
        ),
        key=lambda run: run.entry_index or 0,
    )
    numbers = (number for number in itertools.count(1) if number not in taken)  # the rows with a run, in order
    rows = []
    for number, run in zip(numbers, carried, strict=False):
        shown = (
            outcome if run.run_id == outcome.run_id else durable.show_prefix(run.run_id, run.records, len(run.records))
        )
        if shown is None:
            return None  # a row the file cannot show: its table is left as it was
        rows.append(batch.row_summary(batch.RowRun(number - 1, run.run_id, {}, shown)))
    rows = sorted([*rows, *without_run], key=lambda row: int(row["row"]))
    return batch_bundle(rows, dict(Counter(str(row.get("status")) for row in rows).most_common()))


class Stretch(NamedTuple):
    """A stretch of a run's history that one key signed: records ``start`` up to ``end`` (not included), and
    when (None: the whole checkpoint's seal, which says no time)."""

    run_id: str
    start: int
    end: int
    time: float | None


class FileKey(NamedTuple):
    """A key that signed runs in a file: the names its signatures claim (a claim, not proof) and what it signed."""

    key: str
    names: tuple[str, ...]
    stretches: tuple[Stretch, ...]

    @property
    def fingerprint(self) -> str:
        return key_fingerprint(self.key)


def keys_in(path: Path) -> list[FileKey]:
    """Every key that signed the runs a notebook or checkpoint file carries, in the order first met, each with
    the names it claims and the stretches it signed; a run with a stretch of its history unsigned, or whose
    signature does not hold, is refused."""
    if path.suffix == ".ipynb":
        runs, damaged = nbfile.scan(path)
        found = [(run.run_id, run.records, run.seal) for run in runs]
        if damaged:
            raise UsageProblem(f"{damaged[0].reason}; nothing was trusted")
    else:
        checkpoint = envelope.read_file(path)
        found = [(str(checkpoint.header["run_id"]), checkpoint.records, checkpoint.seal)]
    if not found:
        raise UsageProblem(f"{path}: carries no run checkpoint")
    names: dict[str, dict[str, None]] = {}
    signed: dict[str, dict[Stretch, None]] = {}
    for run_id, records, envelope_seal in found:
        for stretch in signatures(records, envelope_seal):
            seal = stretch.seal
            if seal is None:
                raise UsageProblem(
                    f"{path}: run '{run_id}' is unsigned, so no key says who made it; nothing was trusted"
                )
            if not seal.holds:
                raise UsageProblem(
                    f"{path}: run '{run_id}' was changed after it was signed (key {seal.fingerprint}); "
                    "nothing was trusted"
                )
            names.setdefault(seal.key, {})[seal.by] = None
            signed.setdefault(seal.key, {})[Stretch(run_id, stretch.start, stretch.end, stretch.time)] = None
    return [FileKey(key, tuple(names[key]), tuple(signed[key])) for key in names]


def cell_running(code: str, notebook: Path, after: int) -> tuple[int, str] | None:
    """The position and id of the code cell of ``notebook`` whose source is ``code``: the first such below
    position ``after`` (cells execute top to bottom), else the first; None when none is."""
    try:
        cells = code_cells(notebook)
    except NotebookFileError:
        return None
    matches = [(position, cell) for position, (cell, source) in enumerate(cells) if source == code]
    later = [match for match in matches if match[0] > after]
    return (later or matches)[0] if matches else None


def cell_order(notebook: Path | None) -> list[str]:
    """The ids of a saved notebook's cells, in order (none when the file is unknown or unreadable)."""
    if notebook is None:
        return []
    try:
        return cell_ids(notebook)
    except NotebookFileError:
        return []


def keep_runs(notebook: Path) -> list[str]:
    """``mkl keep``: under the notebook's lock, put the runs it carries only in its outputs into its metadata,
    where stripping outputs (nbstripout, ``jupyter nbconvert --clear-output``) leaves them; the ids kept (see
    :func:`~mkl_notebook.checkpoints.notebook_file.keep_in_metadata`)."""
    if notebook.suffix != ".ipynb":
        raise UsageProblem(f"{notebook}: is not a notebook (.ipynb); mkl keep keeps a notebook's runs")
    if not notebook.is_file():
        raise UsageProblem(f"{notebook}: no such notebook file")
    with locked(notebook):
        return nbfile.keep_in_metadata(notebook)
