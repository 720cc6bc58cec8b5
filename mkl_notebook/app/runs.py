"""Resuming runs the same way from every front end, and carrying them in and out of files."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, NamedTuple, cast

from ..durable import nbfile, places
from ..durable import runs as durable
from ..durable.places import Place
from ..durable.records import RunState, canonical, run_state, spent
from ..durable.replay import JournalIndex
from ..durable.runs import Observer, Outcome, Resolution, not_pending
from ..durable.seals import Seal, Signer
from ..durable.stores import RunStore, SQLiteStore, StoreError
from ..engine.options import DEFAULT_MAX_WORKERS, Hitl, RunOptions
from ..engine.oracle import Oracle
from ..lang.findings import MachineError
from ..lang.loader import load_file
from ..lang.model import Machine
from ..lang.siblings import load_siblings
from .errors import UsageProblem
from .replies import parse_resolve, reply_from_flags, require_question, who
from .status import answers_to, form_place, run_output
from .trust import Keyring, Provenance, Untrusted
from .values import parse_budget, parse_cost

HITL_MODES = ("none", "asking", "all")


def run_options(
    *,
    max_steps: Any = None,
    max_tokens: Any = None,
    max_cost: Any = None,
    suspend: bool = False,
    hitl: str = "none",
    on_untrusted_flow: str = "report",
    ask_human: bool = False,
    max_workers: int | None = None,
) -> RunOptions:
    """The options of a new run from what a front end was given; budgets as flag text or numbers."""
    if hitl not in HITL_MODES:
        raise UsageProblem(f"hitl must be one of {', '.join(HITL_MODES)}, not {hitl!r}")
    if on_untrusted_flow not in ("report", "halt"):
        raise UsageProblem(f"--on-untrusted-flow must be 'report' or 'halt', not {on_untrusted_flow!r}")
    return RunOptions(
        cost_budget=parse_budget("max_tokens", "--max-tokens", max_tokens),
        max_cost=parse_cost(max_cost),
        max_steps=parse_budget("max_steps", "--max-steps", max_steps),
        suspendable=suspend,
        hitl=cast(Hitl, hitl),
        on_untrusted_flow="halt" if on_untrusted_flow == "halt" else "report",
        ask_human=ask_human,
        max_workers=max_workers or DEFAULT_MAX_WORKERS,
    )


def state(store: RunStore, run_id: str) -> RunState:
    """Where run ``run_id`` stands, as its journal says."""
    return run_state(store.read(run_id))


def resume(
    store: RunStore,
    run_id: str,
    oracle: Oracle,
    *,
    reply: Any = None,
    set_values: Mapping[str, Any] | None = None,
    question: str | None = None,
    by: str | None = None,
    via: str = "api",
    max_steps: Any = None,
    max_tokens: Any = None,
    max_cost: Any = None,
    resolve: str | Resolution | None = None,
    registry: Mapping[str, Machine] | None = None,
    observer: Observer | None = None,
    place: Place | None = None,
    known: Mapping[str, Machine] | None = None,
) -> Outcome:
    """Continue a run: answer its question, give it more budget, or settle a tool call in doubt.

    Everything given is checked before anything is journaled, so a mistake records nothing.
    ``reply`` is ``--reply TEXT`` or a form's or the API's value; ``set_values`` is ``--set
    PATH=VALUE`` parsed. A reply must name the ``question`` it answers, and is taken only while
    the run waits on exactly that one; it is journaled with who gave it (``by``, default
    :func:`who`) and through what (``via``). Budgets (and ``max_cost``, in dollars) are flag text or
    numbers; ``resolve`` is ``--resolve`` text. A notebook cell (``place``) that already asked for exactly this is shown
    the run as it left it, and nothing is checked or recorded again. ``known`` machines, already loaded (the
    files as :func:`edited_machines` found them), stand in for the pinned copies of the same hash, so that no
    machine is parsed twice.
    """
    asked = {
        "reply": reply,
        "set": dict(set_values or {}),
        "question": question,
        "max_steps": max_steps,
        "max_tokens": max_tokens,
        **({"max_cost": max_cost} if max_cost is not None else {}),
        "resolve": resolve if isinstance(resolve, str) or resolve is None else [resolve.action, resolve.value],
    }
    request = places.request_digest("resume", asked)
    shown = durable.replay_cell(
        store, run_id, place, request, known={**(known or {}), **(registry or {})}, observer=observer
    )
    if shown is not None:
        return shown
    steps = parse_budget("max_steps", "--max-steps", max_steps)
    tokens = parse_budget("max_tokens", "--max-tokens", max_tokens)
    cost = parse_cost(max_cost)
    resolution = resolve if isinstance(resolve, Resolution) else parse_resolve(resolve)
    now = state(store, run_id)
    stale = question is not None and now.waits_for_reply and question != now.question_id(run_id)
    if stale and (reply is not None or set_values):
        raise UsageProblem(not_pending(run_id, question or "", now))
    value = reply_from_flags(now, run_id, reply=reply, set_values=set_values)
    if value is not None:
        question = require_question(now, run_id, question)
    return durable.resume(
        run_id,
        oracle,
        store=store,
        reply=value,
        has_reply=value is not None,
        question=question,
        by=who(by) if value is not None else None,
        via=via if value is not None else None,
        max_steps=steps,
        max_tokens=tokens,
        max_cost=cost,
        resolution=resolution,
        registry=registry,
        observer=observer,
        place=places.tag(place, request),
        known=known,
    )


def spent_on(store: RunStore, run_id: str) -> float | None:
    """What run ``run_id``'s model calls cost in US dollars, as its journal says (None when unknown)."""
    return spent(store.read(run_id))


def summary(
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
        target = f"--set {now.reply_to}=…" if now.reply_to else "--reply …"
        listed.update(
            ask=now.shown,
            reply_to=now.reply_to,
            question_id=question,
            command=f"{resume} --question {question} {target}",
        )
    listed["answers"] = [
        {
            "question": record.get("question"),
            "value": record.get("value"),
            "by": record.get("by"),
            "via": record.get("via"),
            "time": record.get("time"),
        }
        for record in records
        if record.get("t") == "reply"
    ]
    if provenance is not None:
        listed.update(trusted=provenance.trusted, made_by=provenance.mark, key=provenance.key)
    return listed


class Imported(NamedTuple):
    """The run a checkpoint brought into a store, and whose the checkpoint is (None: nothing was taken)."""

    run_id: str
    provenance: Provenance | None


def import_checkpoint(
    store: RunStore,
    header: Mapping[str, Any],
    records: list[dict[str, Any]],
    source: str,
    *,
    seal: Seal | None,
    keyring: Keyring,
    trust_file: bool = False,
) -> Imported:
    """Bring a verified checkpoint's run into ``store``, unless the store already holds it as far or further.

    What the store does not hold yet is taken from the file only when the checkpoint is trusted (sealed by
    this person's key or one they trust) or ``trust_file`` says they chose to take it up anyway; otherwise
    :class:`Untrusted` says whose it is. A store whose copy of the run went another way is refused, naming both.
    """
    run_id = str(header["run_id"])
    if store.exists(run_id):
        held = [canonical(record) for record in store.read(run_id)]
        given = [canonical(record) for record in records]
        if held[: len(given)] == given:
            return Imported(run_id, None)  # the file adds nothing to what this store holds
        if given[: len(held)] != held:
            raise UsageProblem(
                f"run '{run_id}' in {store.location} has a different history than {source}; pass --store PATH "
                "to resume it in another store"
            )
    provenance = keyring.judge(seal)
    if not provenance.trusted and not trust_file:
        raise Untrusted(run_id, source, provenance, run_state(records))
    return Imported(durable.import_envelope(store, header, records), provenance)


class Edits(NamedTuple):
    """How a run's machine files stand now against the copies the run pinned."""

    changed: list[str]  # pinned machines whose file changed (or can no longer be loaded)
    current: dict[str, Machine]  # the machines as their files are now
    unloadable: list[str]  # one line for each file that cannot be loaded now


def edited_machines(records: list[dict[str, Any]]) -> Edits:
    """The pinned machines whose file changed since the run pinned them, and the machines as they are now.

    Only a run started from a file knows where its machines live; others report no change. A file that
    can no longer be loaded counts as a change of the machines it held (the pinned copies still run).
    """
    index = JournalIndex.build(records)
    origin = (index.start.get("origin") or {}).get("path")
    if not origin or not Path(origin).is_file():
        return Edits([], {}, [])
    root = str(index.setup.get("root") or "")
    try:
        current_root = load_file(origin, strict=False)
    except MachineError as exc:
        return Edits([root], {}, [str(exc)])
    current, unloadable = load_siblings(Path(origin), current_root)
    changed = [
        name
        for name, pin in index.machines.items()
        if (name in current and current[name].sha256 != pin["sha256"]) or (name not in current and unloadable)
    ]
    return Edits(changed, current, unloadable)


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
    (see :func:`import_checkpoint`); what is written back is sealed with this person's key.

    ``advance(run_id)`` resumes the run once it is in ``store``. The notebook's own lock is held from
    reading the file to replacing it, so concurrent resumes of one file (from any store) take turns:
    the later one reads what the earlier one wrote. Before advancing, the file says in which store; a
    writer stopped before its write-back leaves that mark, so the file is never taken up from another
    store (that would run its effects again), and the next resume from the same store first writes
    back what the store holds.
    """
    where = store_place(store)
    with nbfile.locked(notebook):
        embedded = nbfile.find_run(notebook, run_id)
        marked = nbfile.advancing(notebook, run_id)
        if marked is not None and marked["store"] not in (where, store.location):
            raise UsageProblem(
                f"{notebook}: run '{run_id}' was being advanced in the store {marked['store']} when that stopped, "
                "and what it did there is not in this file; resume it with that store (--store), so that "
                "nothing it did runs twice"
            )
        import_checkpoint(
            store,
            embedded.header,
            embedded.records,
            str(notebook),
            seal=embedded.seal,
            keyring=keyring,
            trust_file=trust_file,
        )
        signer = keyring.signer()
        if _catch_up(notebook, embedded, store, signer, marked is not None):
            embedded = nbfile.find_run(notebook, run_id)
        nbfile.mark_advancing(notebook, run_id, where)
        try:
            outcome = advance(run_id)
        except BaseException:
            if len(store.read(run_id)) == len(embedded.records):
                nbfile.clear_advancing(notebook, run_id)  # refused: nothing happened, the file still holds it all
            raise
        _write_back(notebook, embedded, outcome, signer)
    return outcome


def store_place(store: RunStore) -> str:
    """Where a store is, as a notebook's mid-advance mark names it: a store file's absolute path."""
    path = getattr(store, "path", None)
    return str(Path(path).resolve()) if isinstance(path, Path) else store.location


def finish_write_back(notebook: Path, run_id: str, keyring: Keyring) -> str | None:
    """Complete the write-back of a run the file says was left mid-advance, when the store it names is on
    this machine: the file then holds the run as that store does. The store's place, or None (nothing done)."""
    marked = nbfile.advancing(notebook, run_id)
    if marked is None or not Path(marked["store"]).is_absolute() or not Path(marked["store"]).is_file():
        return None
    try:
        store = SQLiteStore(Path(marked["store"]))
        with nbfile.locked(notebook):
            if nbfile.advancing(notebook, run_id) != marked or not store.exists(run_id):
                return None
            _catch_up(notebook, nbfile.find_run(notebook, run_id), store, keyring.signer(), True)
    except StoreError:
        return None  # not a store (any more): the listing says where the run was left instead
    return marked["store"]


def _catch_up(notebook: Path, embedded: nbfile.EmbeddedRun, store: RunStore, signer: Signer, marked: bool) -> bool:
    """A write-back never came (the file is ``marked`` mid-advance, or the store holds more than it): put
    the store's state of the run in the file. Whether it wrote."""
    held = store.read(embedded.run_id)
    if not marked and len(held) <= len(embedded.records):
        return False
    shown = durable.show_prefix(embedded.run_id, held, len(held))
    if shown is None:
        return False
    _write_back(notebook, embedded, shown, signer)
    return True


def _write_back(notebook: Path, embedded: nbfile.EmbeddedRun, outcome: Outcome, signer: Signer) -> None:
    """Write ``outcome``'s checkpoint and view over the run's output, and its state where its forms were."""
    run_id = outcome.run_id
    root = str(embedded.header.get("machine"))
    machine = outcome.machines.get(root)  # the machine the run just ran; a journal's pinned copy otherwise
    if machine is None:
        machine = durable.machines_from_pins(JournalIndex.build(outcome.records).machines, run_id).get(root)
    name = notebook.name

    def form_place_now(marker: dict[str, Any]) -> dict[str, Any] | None:
        if not marker.get("question_id"):
            return None  # it already says what became of its question
        answered = answers_to(outcome.records, marker.get("question_id"))
        return form_place(run_id, outcome, notebook=name, answers=answered)

    forms_shown = nbfile.has_form(notebook, run_id)
    view = run_output(run_id, machine, outcome, notebook=name, question_above=forms_shown, signer=signer)
    nbfile.write_run(notebook, embedded, view, form_place_now)
