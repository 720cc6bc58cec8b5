"""The workspace: every use case the ``mkl`` command and the ``%mkl`` magics share, each in one place.

A workspace holds the run store and the settings, and three rooms: its machines (:class:`~.shelf.Shelf`,
``ws.shelf``), what its runs answer with (:class:`~.equipment.Equipment`, ``ws.equipment``: keys, tools,
models, executors) and the copies of its runs in reach (:class:`~.copies.Copies`, ``ws.copies``). Its methods
are what a person does with runs: start a run, continue it, answer its question, read it without running it (a
trace), plan a re-run, list what waits, forget a run, run a machine over many rows; each takes one request
(:mod:`.requests`). Front ends parse what they are given, call one of these, and render what comes back.

A notebook kernel's workspace is given the notebook's knowledge as an object (:class:`~.cells.Cells`: the cell
a request comes from, what shows a run, the notebook's own copies of its runs); a command's has none
(:class:`~.cells.NoCells`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from pathlib import Path
from typing import Any

from ..durable import places
from ..durable import runs as durable
from ..durable.places import Place
from ..durable.plan import Plan
from ..durable.replay import JournalIndex
from ..durable.runs import Observer, Outcome, Preparation, Resolution
from ..durable.store_names import is_server_store, public_store
from ..durable.store_opening import open_store, reading_store, store_there
from ..durable.stores import RunStore, UnknownRun
from ..engine.oracle import Oracle
from ..lang.model import Machine
from ..providers.host import Registry
from . import batch, checkpoints, notifying, oracles
from .cells import Cells, NoCells, answered_in, as_cells_left
from .channel_places import tell_stderr
from .checkpoints import own_run_id
from .continuing import changed_files
from .copies import Copies
from .equipment import Equipment
from .errors import USER_ERRORS, Superseded, UsageProblem
from .handle import Run, what_happened
from .listing import listed_runs, store_flag, store_runs
from .replies import answerer, approvers_of, check_approver, checked_note, parse_resolve, read_reply
from .requests import ContinueRequest, MapRequest, StartRequest, asked
from .settings import Settings
from .shelf import Shelf
from .status import run_output
from .trust import Keyring, Untrusted
from .values import host_input, parse_budget, parse_cost


class Workspace:
    """Machines, a run store, settings and keys: every use case of a run, for both front ends.

    ``follow_files`` is the command line's way with machines: a run remembers the file it was started from,
    and continuing it reads that file again (an edited file is refused unless forced). Without it (a
    notebook), the machines defined in the workspace take over when a run is continued. ``start_local``
    starts a Dask LocalCluster for ``executor=dask`` (the command line); otherwise ``dask`` is the process's
    current Dask client (a notebook's).
    """

    def __init__(
        self,
        settings: Settings | None = None,
        *,
        registry: Registry | None = None,
        keyring: Keyring | None = None,
        model_factory: Callable[[], Oracle] | None = None,
        follow_files: bool = False,
        start_local: bool = False,
        cells: Cells | None = None,
    ) -> None:
        self.settings = settings or Settings()
        self.shelf = Shelf(self.settings)
        self.machines = self.shelf.machines  # (one dict: what a handle reads its runs' machines from)
        self.equipment = Equipment(
            self.settings, registry=registry, keyring=keyring, model_factory=model_factory, start_local=start_local
        )
        self.keyring = self.equipment.keyring
        self.follow_files = follow_files
        self.start_local = start_local
        self.runs: dict[str, Run] = {}
        self.cells: Cells = cells or NoCells()
        self.copies = Copies(lambda: self.store, self.keyring, self.machines, self.cells, self._unopened)
        self._store: RunStore | None = None
        self._lock = threading.Lock()
        self.notified: dict[str, notifying.Report] = {}  # what announcing each run's latest question did
        self.tell: Callable[[str], None] = tell_stderr  # what a run's start shows its starter

    def __enter__(self) -> Workspace:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Let go of what the workspace started: the streams to Dask workers, a LocalCluster."""
        self.equipment.close()

    # -- the store -------------------------------------------------------------------

    @property
    def store(self) -> RunStore:
        """The run store, opened on first use."""
        with self._lock:
            if self._store is None:
                self._store = open_store(self.settings.store, durability=self.settings.store_durability())
            return self._store

    def store_opened(self) -> RunStore | None:
        """The run store when it is open already, else None (a listing then reads its file, changing nothing)."""
        with self._lock:
            return self._store

    def reading(self) -> AbstractContextManager[RunStore | None]:
        """The store to read runs from, writing nothing: the store when it is open, else its file read only, for
        one read (None: there is none; see :func:`~mkl_notebook.durable.store_opening.reading_store`). A server's
        store is opened as it is to be written, once, and kept (so the kernel is told when its runs move)."""
        served = is_server_store(self.settings.store)
        return reading_store(self.store if served else self.store_opened(), self.settings.store)

    def _unopened(self) -> AbstractContextManager[RunStore | None]:
        """The store's file read only, for one read, while it is not open to be written (else None)."""
        unopened = self.store_opened() is None and not is_server_store(self.settings.store)
        return reading_store(None, self.settings.store) if unopened else nullcontext()

    @contextmanager
    def reading_run(self, run_id: str) -> Iterator[RunStore]:
        """The store to read run ``run_id`` from, writing nothing (:meth:`reading`); :class:`UnknownRun` when it
        holds none of it."""
        with self.reading() as store:
            if store is None or not store.exists(run_id):
                raise UnknownRun(run_id, store.location if store else public_store(str(self.settings.store)))
            yield store

    def reset_store(self) -> None:
        """Open ``settings.store`` afresh on next use (after the setting changed)."""
        with self._lock:
            self._store = None

    def store_flag(self) -> str | None:
        """The ``--store`` a command continuing this workspace's runs names (None: the default store)."""
        return store_flag(self.settings.store)

    def _origin(self, machine: Machine, script: Any, model: str | None) -> dict[str, str] | None:
        made_from = self.shelf.files.get(machine.name) if self.follow_files else None
        return self.equipment.origin(made_from, script, model)

    # -- runs ----------------------------------------------------------------------------

    def start(self, name: str, request: StartRequest | None = None, /, **options: Any) -> Run:
        """Run (or replay) machine ``name`` as the :class:`StartRequest` says (``options``: its fields, as
        keywords); ``retry`` makes the calls that failed before (a provider's error, replayed as it was
        otherwise) again.

        The run is first reconciled with a copy in reach (a notebook file): what the copy holds past the
        store's history is taken up when trusted, or ``trust_file`` says to take it up anyway. An untrusted
        copy is never taken up without that. When the store holds none of the run, a scripted run (or, with
        ``anew``, any) is then made as a new run of its own id, leaving the file's its id (``Run.set_aside``
        says so); otherwise :class:`Untrusted` is raised and nothing runs.
        """
        asks = asked(StartRequest, request, options)
        script, model, fresh, trust_file = asks.script, asks.model, asks.fresh, asks.trust_file
        machine = self.shelf.machine(name)
        callees = self.shelf.callees(machine)  # (a library file that does not load stops the run before it starts)
        run_id = asks.id or self.cells.run_id_for(name)
        if fresh:
            self.cells.let_go(run_id)
            self.copies.taken_up.pop(run_id, None)  # the new run is this person's own
        host_values = host_input(asks.input or {}, "input")
        flow = {"on_untrusted_flow": asks.on_untrusted_flow, "ask_human": asks.ask_human}
        run_settings = notifying.start_options(self, asks, machine, **flow)
        set_aside = None
        if not fresh:
            try:
                self.take_up(run_id, asks.notebook, trust_file)
            except Untrusted as problem:
                if (not oracles.readable(script) and not asks.anew) or problem.added is not None:
                    # Running it afresh would call a model and replace what its author saw; going on with the
                    # copy held here would part from the file's, which holds more: ask first.
                    raise
                # A new run of this cell's own (scripted: it costs nothing) under an id of its own, so that the
                # file's run keeps its id and can be taken up later.
                mine = own_run_id(run_id, self.equipment.signer())
                set_aside = (
                    f"Not the run saved in {problem.source}: that one is {problem.provenance.mark}, so it was "
                    f"not taken up (it stays in the file as run '{run_id}'). This is a new run of this cell's "
                    f"own, '{mine}'."
                )
                self.copies.own_runs[run_id] = mine
                if problem.checkpoint is not None:  # what shows the new run carries the file's along, as it was
                    self.copies.carried[mine] = [(run_id, problem.checkpoint)]
                run_id = mine
            set_aside = self.copies.parted.pop(run_id, None) or set_aside
        needs_model = oracles.starts_anew(self.store, run_id, fresh)
        handle = self.new_handle(
            run_id,
            name,
            self.equipment.oracle(script, model, needs_model=needs_model, machine=machine, **asks.calls_made()),
        )
        handle.set_aside = set_aside
        handle.carried = self.copies.carried.pop(run_id, [])
        handle.outcome = durable.start(
            machine,
            handle.oracle,
            store=self.store,
            run_id=run_id,
            registry=callees,
            input=host_values,
            options=run_settings,
            fresh=fresh,
            observer=asks.observer,
            origin=self._origin(machine, script, model),
            place=None if fresh else self.place(run_id),
            retry=asks.retry,
            endorse=self.equipment.endorser(),
        )
        self.reached(run_id, handle.outcome)
        notifying.announce(self, handle.outcome)
        self.runs[run_id] = handle
        self.cells.kept(handle)  # shown or not (`mkl_notebook.run()` displays nothing), the notebook keeps it
        return handle

    def get_run(
        self,
        run_id: str,
        notebook: str | None = None,
        script: Any = None,
        *,
        trust_file: bool = False,
        model: str | None = None,
    ) -> Run:
        """A run by id, as it stands (or as the cells above left it, in a notebook); nothing runs. ``script``
        (scripted answers) or ``model`` serves the calls it still has to make; ``trust_file`` takes it up from a
        notebook file even when its checkpoint is not trusted."""
        run_id = run_id if trust_file else self.copies.meant(run_id)
        self.take_up(run_id, notebook, trust_file)
        if run_id in self.runs:
            handle = self.runs[run_id]
            if script is not None or model is not None:
                handle.oracle = self.equipment.oracle(script, model)
            return handle
        with self.reading_run(run_id):  # (none: nor here, nor in a file in reach)
            pass
        handle = self.new_handle(run_id, "", self.equipment.oracle(script, model))
        if not self.cells.show_found(handle):
            handle.reload()
        self.runs[run_id] = handle
        return handle

    def read(self, run_id: str, *, trust_file: bool = False) -> Outcome:
        """Run ``run_id`` as its journal stands, calling or making nothing (a trace; a late answer's check): a run cut
        off mid-advance shows its steps so far; a newer copy in reach signed by a key not trusted is not read."""
        run_id = run_id if trust_file else self.copies.meant(run_id)
        if (
            self.store_opened() is None
            and not store_there(self.settings.store)
            and not self.cells.copies_of(run_id, None)
        ):
            raise UnknownRun(run_id, public_store(str(self.settings.store)))
        try:
            self.take_up(run_id, None, trust_file, reload=False)
        except Untrusted as problem:
            if problem.added is None:
                raise  # the store holds none of it: there is nothing else to read
        with self.reading_run(run_id) as store:
            return durable.read_run(run_id, store.read(run_id), known=self.machines)

    def replay_outcome(self, run_id: str, oracle: Oracle, observer: Observer | None = None) -> Outcome:
        """Run ``run_id`` again from its journal, asking ``oracle`` only for what it does not hold."""
        return durable.replay(self.store, run_id, oracle, observer=observer)

    def continue_run(
        self, run_id: str, oracle: Oracle, request: ContinueRequest | None = None, /, **options: Any
    ) -> Outcome:
        """Continue a run as the :class:`ContinueRequest` says (``options``: its fields, as keywords): answer its
        question, give it more budget, or settle a tool call in doubt.

        Everything given is checked against the journal, read once under the run's lease, before anything is
        journaled, so a mistake records nothing. ``reply`` is ``--reply TEXT`` or a form's or the API's value;
        ``set_values`` is ``--set PATH=VALUE`` parsed. A reply must name the ``question`` it answers, and is
        taken only while the run waits on exactly that one; it is journaled with who gave it (as :func:`answerer`
        establishes it, ``by`` or the setting claimed beside it), through what (``via``) and the ``note`` beside
        it (at most 4,000 characters). Budgets are flag text or numbers; ``resolve`` is ``--resolve`` text. The
        run goes on in the machines it pinned (``pinned``), the machines defined here, or (``follow_files``)
        its files as they are now (changed ones refused unless ``force``). A notebook cell (``place``) that
        already asked for exactly this is shown the run as it left it, and nothing is checked or recorded again.
        """
        asks = asked(ContinueRequest, request, options)
        run_id = self.copies.meant(run_id)
        self.copies.abreast(run_id)
        digest = places.request_digest("resume", asks.said())
        known = {**self.machines, **(asks.known or {})}
        defined = None if asks.pinned or self.follow_files else dict(self.machines) or None
        shown = durable.replay_cell(
            self.store, run_id, asks.place, digest, known={**known, **(defined or {})}, observer=asks.observer
        )
        if shown is not None:
            return shown
        steps = parse_budget("max_steps", "--max-steps", asks.max_steps)
        tokens = parse_budget("max_tokens", "--max-tokens", asks.max_tokens)
        cost = parse_cost(asks.max_cost)
        resolve = asks.resolve
        resolution = resolve if isinstance(resolve, Resolution) else parse_resolve(resolve)
        given = asks.reply is not None or bool(asks.set_values)
        noted = checked_note(asks.note, replied=given)

        def prepare(index: JournalIndex) -> Preparation:
            registry, current = defined, None
            if self.follow_files and not asks.pinned and self.keyring.started_here(index.journal):
                # (a run taken up from someone's file names a path of theirs: never followed)
                current, changed = changed_files(run_id, index, asks.force)
                registry = current if changed else None
            value, named, answering = None, None, {}
            rule: tuple[str, ...] = ()
            if given:
                value, named = read_reply(index, run_id, asks.question, reply=asks.reply, set_values=asks.set_values)
                who = answerer(asks.by or self.settings.user, via=asks.via)  # who, and how that is known
                rule = approvers_of(index)
                check_approver(run_id, named, rule, who)  # (someone the run does not let answer: nothing recorded)
                answering = who._asdict()
            records = durable.resume_records(
                run_id,
                index,
                reply=value,
                has_reply=given,
                question=named,
                **answering,
                via=asks.via if given else None,
                note=noted,
                max_steps=steps,
                max_tokens=tokens,
                max_cost=cost,
                resolution=resolution,
                registry=registry,
                approvers=rule,
            )
            return Preparation(records, registry, current)

        with checkpoints.kernel_advance(self.cells.file_holding(run_id), run_id, self.store):
            outcome = durable.advance(
                self.store,
                run_id,
                oracle,
                observer=asks.observer,
                before=prepare,
                place=places.tag(asks.place, digest),
                known=known,
                endorse=self.equipment.endorser(),
            )
        notifying.announce(self, outcome)  # (a new question, durable now: its notifications go)
        return outcome

    def submit(
        self,
        handle: Run,
        reply: Any,
        request: ContinueRequest | None = None,
        /,
        *,
        form_of: str | None = None,
        **options: Any,
    ) -> Run:
        """Journal a person's reply (and the ``note`` beside it) to ``handle``'s run and let it go on in the
        machines it was started with; ``form_of`` is the notebook cell whose form gave the reply. A reply to a
        question the run no longer waits on is refused, naming both (see :meth:`answer` for a form's)."""
        place = Place(form_of, form=True) if form_of else self.place(handle.id)
        known = handle.outcome.machines if handle.outcome is not None else {}
        given = {**options, "reply": reply, "place": place, "pinned": True, "known": known}
        asks = asked(ContinueRequest, request, given)
        return handle.advanced(lambda: self.continue_run(handle.id, handle.oracle, asks), request=form_of is None)

    def answer(
        self,
        handle: Run,
        reply: Any,
        question: str | None,
        *,
        via: str = "form",
        note: str | None = None,
        observer: Observer | None = None,
        form_of: str | None = None,
    ) -> Run:
        """A reply (and the ``note`` typed beside it) from a form or a queue's row that showed ``question``:
        journaled as :meth:`submit` does. When it came too late (another path answered the question, or the run
        moved past it), every view of the run catches up and :class:`Superseded` says what became of the
        question; any other refusal is raised as it is."""
        try:
            return self.submit(handle, reply, question=question, via=via, note=note, observer=observer, form_of=form_of)
        except USER_ERRORS:
            handle.reload()  # the run as it stands now: every form and view of it catches up
            if handle.question_id == question:
                raise  # still the question asked: the refusal was about something else, and says so
            raise Superseded(what_happened(handle, question)) from None

    def resume(self, run_id: str, request: ContinueRequest | None = None, /, **options: Any) -> Outcome:
        """Continue run ``run_id`` of the store, its calls answered as the request says (see
        :meth:`continue_run` for the rest of it)."""
        asks = asked(ContinueRequest, request, options)
        return self.continue_run(run_id, self.equipment.oracle(asks.script, asks.model, **asks.calls_made()), asks)

    def resume_checkpoint(self, path: str, request: ContinueRequest | None = None, /, **options: Any) -> Outcome:
        """Continue the run a checkpoint file carries, and write its new checkpoint over the file."""
        asks = asked(ContinueRequest, request, options)
        return checkpoints.resume_checkpoint_file(
            path,
            self.store,
            lambda run_id: self.resume(run_id, asks),
            keyring=self.keyring,
            trust_file=asks.trust_file,
        )

    def resume_notebook(
        self, notebook: Path, run_id: str | None, request: ContinueRequest | None = None, /, **options: Any
    ) -> Outcome:
        """Continue a run a notebook nobody has open carries, and write its new checkpoint back into it."""
        if not run_id:
            raise UsageProblem(
                f"name the run to resume with --run ID (runs in {notebook}: {checkpoints.notebook_run_names(notebook)})"
            )
        asks = asked(ContinueRequest, request, {"via": "notebook-file", **options})
        return checkpoints.resume_in_notebook(
            notebook,
            run_id,
            self.store,
            lambda found: self.resume(found, asks),
            keyring=self.keyring,
            trust_file=asks.trust_file,
        )

    def plan(self, run_id: str) -> Plan:
        """What running ``run_id`` again with the machines as defined now would replay, call anew and ask again;
        nothing is called or journaled, nor the store opened to be written."""
        with self.reading_run(run_id) as store:
            return durable.plan_run(store, run_id, dict(self.machines) or None)

    def waiting(self) -> tuple[list[Run], list[Untrusted]]:
        """The runs that wait for a person now, as their journals stand (this store's, reconciled with the copies
        in reach: what a trusted copy holds past the store's history is taken up first), and the copies not
        taken up because no key this person trusts signed them (each says whose it is)."""
        if self.store_opened() is None and not store_there(self.settings.store) and not self.cells.carried_waiting():
            return [], []  # no store, and no copy waits: nothing to make a store for
        untrusted: list[Untrusted] = []
        with self.reading() as store:  # (a copy with nothing to take up is only read: listing writes nothing)
            summaries = list(store.runs()) if store is not None else []
        waiting_here = {summary.run_id for summary in summaries if summary.status == "suspended"}
        for run_id in dict.fromkeys([*self.cells.carried_waiting(), *sorted(waiting_here & self.cells.carried_runs())]):
            try:
                self.take_up(run_id, None)  # a copy may hold what answered it since
            except Untrusted as problem:
                untrusted.append(problem)
        found = []
        held_back = {problem.run_id for problem in untrusted if problem.added is not None}
        with self.reading() as store:
            summaries = list(store.runs()) if store is not None else []
        for summary in summaries:
            if summary.status != "suspended" or summary.run_id in held_back:
                continue  # (a copy in reach answered it, by a key not trusted yet: it is not asked again here)
            handle = self.runs.get(summary.run_id)
            if handle is None:
                handle = self.get_run(summary.run_id)
            elif handle.outcome is None or handle.outcome.latest is not None:
                handle.reload()
            found.append(handle)
        return found, untrusted

    def forget(self, run_id: str) -> None:
        """Delete run ``run_id`` from the store; it is not taken up from a copy in reach again."""
        if not self.store.exists(run_id) and run_id not in self.runs and not self.cells.holds_copy(run_id):
            raise UnknownRun(run_id, self.store.location)
        if self.store.exists(run_id):
            with self.store.lease(run_id):
                self.store.delete(run_id)
        self.runs.pop(run_id, None)
        self.copies.taken_up.pop(run_id, None)
        self.copies.forgotten.add(run_id)
        self.cells.let_go(run_id)

    def listing(self) -> list[dict[str, Any]]:
        """Every run of the store, as a listing says it (status, question, answers, what it spent), the most
        recently changed last. A store not opened yet is read from its file, if there is one, and not made or
        changed."""
        if self.store_opened() is None:
            return store_runs(self.settings.store) if store_there(self.settings.store) else []
        return listed_runs(self.store, self.store_flag())

    def map(self, name: str, over: Any, request: MapRequest | None = None, /, **options: Any) -> batch.Ran:
        """Every row of :meth:`map_rows` (the same options), kept: each row's outcome and a handle on its run, as a
        notebook shows a batch and carries each row's checkpoint."""
        running = self.map_rows(name, over, request, **options)
        rows = sorted(running, key=lambda row: row.index)
        handles: dict[str, Run] = {}
        for row in rows:
            if row.outcome is None:
                continue
            handle = self.new_handle(row.run_id, name, running.oracle_for())
            handle.outcome = row.outcome
            self.runs[row.run_id] = handle
            handles[row.run_id] = handle
        return batch.Ran(running.name, rows, handles)

    def map_rows(self, name: str, over: Any, request: MapRequest | None = None, /, **options: Any) -> batch.Running:
        """Run machine ``name`` once per row of ``over`` (a list of dicts, a DataFrame, or a .jsonl, .json or
        .csv path), as the :class:`MapRequest` says: a durable run per row, ``concurrency`` at a time; the
        batch's id (``id``, default the machine's name) and the row's ``key`` column, or the row's content, name
        each run, so running the same rows again replays them. The rows are checked and named first; iterating
        what this returns runs them and gives each row as it stops, to be dropped once used (a batch of any size
        holds the rows running). ``progress(done, total)`` is told, on the iterating thread, as rows finish.

        A row's run the store does not hold but a copy in reach does is taken up from it when trusted.
        """
        asks = asked(MapRequest, request, options)
        script, model, fresh, concurrency = asks.script, asks.model, asks.fresh, asks.concurrency
        machine = self.shelf.machine(name)
        callees = self.shelf.callees(machine)
        plan = batch.RowPlan(over, asks.id or name, asks.key)
        carried = self.cells.carried_runs() if not fresh else set()
        for row in plan if carried else ():
            if row.run_id in carried and not self.store.exists(row.run_id):
                try:
                    self.take_up(row.run_id, None)
                except Untrusted:
                    if script is None:
                        raise  # running it afresh would call a model instead of the file's run: ask first
        run_settings = notifying.start_options(self, asks, machine)
        needs_model = any(oracles.starts_anew(self.store, row.run_id, fresh) for row in plan)
        make_oracle = self.equipment.oracle_factory(
            script,
            model,
            needs_model=needs_model,
            machine=machine,
            **asks.calls_made(),
            calls=min(concurrency, len(plan)),
        )
        start = batch.RowStart(
            machine,
            self.store,
            make_oracle,
            registry=callees,
            options=run_settings,
            input=host_input(asks.input or {}, "input"),
            fresh=fresh,
            origin=self._origin(machine, script, model),
            endorse=self.equipment.endorser(),
        )
        stops = batch.run_rows(start, plan, concurrency=concurrency)
        told = batch.told(stops, len(plan), asks.progress)
        return batch.Running(asks.id or name, len(plan), told, make_oracle)

    # -- copies of runs in reach ------------------------------------------------------------

    def take_up(
        self, run_id: str, notebook: str | None = None, trust_file: bool = False, *, reload: bool = True
    ) -> bool:
        """Reconcile run ``run_id`` of the store with every copy in reach (see :meth:`Copies.take_up`); whether
        anything was taken from them. A handle on the run shows what was (unless not to ``reload`` it)."""
        extended = self.copies.take_up(run_id, notebook, trust_file)
        if extended and reload and run_id in self.runs:
            self.runs[run_id].reload()  # what the copies added is the run's history now
        return extended

    # -- notebook cells --------------------------------------------------------------------------

    def as_cells_left(self, run_id: str, cells: list[str]) -> Outcome | None:
        """Run ``run_id`` as the cells above ``cells`` left it (see :func:`~.cells.as_cells_left`)."""
        with self.reading() as store:
            return as_cells_left(store, run_id, cells, self.machines) if store is not None else None

    def answered_in(self, cell: str) -> list[Outcome]:
        """Each run whose question a form of ``cell`` answered, as that form left it (what the cells below see)."""
        with self.reading() as store:  # (no store: no form answered anything, and looking makes none)
            return answered_in(store, cell, self.machines) if store is not None else []

    # -- what the notebook's cells add (nothing, for a command) ------------------------------------

    def place(self, run_id: str) -> Place | None:
        """The notebook cell a request made now comes from (None: not a cell)."""
        return self.cells.place(run_id)

    def reached(self, run_id: str, outcome: Outcome) -> None:
        """The executing cell has shown run ``run_id`` up to where ``outcome`` stands."""
        self.cells.reached(run_id, outcome)

    def moved(self, handle: Run) -> None:
        """A run changed (by any path): what shows it catches up."""
        self.cells.moved(handle)

    def output_bundle(self, handle: Run) -> dict[str, Any]:
        """A run's display output: its view as HTML and text, carrying its checkpoint (as the notebook keeps it)."""
        assert handle.outcome is not None
        bundle = run_output(handle.id, handle.machine, handle.outcome, signer=self.equipment.signer())
        return self.cells.carry(handle, bundle)

    def new_handle(self, run_id: str, machine_name: str, oracle: Oracle) -> Run:
        """A handle on run ``run_id`` of this workspace."""
        return self.cells.new_handle(self, run_id, machine_name, oracle)
