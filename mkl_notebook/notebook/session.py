"""The kernel's mkl session: defined machines, the run store, and :class:`Run` handles.

This is the Python API the magics are thin over; the rules it follows (which oracle
answers, how a reply is read, budgets) are the application layer's, shared with the
``mkl`` command. It never imports widgets or litellm, so it is as usable from a plain
script as from a notebook.
"""

from __future__ import annotations

import contextlib
import copy
import importlib
import os
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..app import executors, oracles
from ..app import runs as app_runs
from ..app.errors import UsageProblem
from ..app.status import run_output
from ..app.trust import Keyring, Untrusted
from ..app.values import host_input
from ..durable import envelope, nbfile, places
from ..durable import runs as durable
from ..durable.places import Place
from ..durable.runs import Observer
from ..durable.seals import Seal, Signer
from ..durable.stores import DEFAULT_STORE, RunStore, SQLiteStore, UnknownRun
from ..engine.oracle import Oracle
from ..engine.result import RunResult, TraceStep
from ..engine.result import question_id as question_id_of
from ..lang import stdlib
from ..lang.loader import load, load_file
from ..lang.model import Machine, reachable
from ..lang.siblings import load_siblings
from ..providers.config import ModelConfig
from ..providers.host import Registry, default_registry
from ..render.views import asked_again
from .metadata_link import MetadataLink

NOTEBOOK_SETTINGS = "this notebook (%mkl config, %config MklMagics)"  # where %mkl models says a model was set


@dataclass
class Settings:
    store: Path = DEFAULT_STORE
    hitl: str = "asking"  # notebooks suspend at escalate gates that carry an `ask:`
    user: str | None = None  # who answers gates from this kernel (default: $JUPYTERHUB_USER, else the OS user)
    max_workers: int | None = None
    executor: str | None = None  # None (threads here), "dask" (this kernel's Dask client) or "dask://ADDRESS"
    max_model_calls: int | None = None  # model calls in flight at once across a Dask cluster


@dataclass
class Session:
    """Everything one kernel knows about machines and runs."""

    settings: Settings = field(default_factory=Settings)
    machines: dict[str, Machine] = field(default_factory=dict)
    runs: dict[str, Run] = field(default_factory=dict)
    registry: Registry = field(default_factory=lambda: default_registry)
    user_ns: dict[str, Any] = field(default_factory=dict)
    model_factory: Callable[[], Oracle] | None = None  # tests and embedders may supply their own model oracle
    model_overrides: dict[str, Any] = field(default_factory=dict)  # %mkl config / %config MklMagics.model
    _store: RunStore | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)
    # Per run: what shows it (forms, views), told whenever the run moves; each says when it is done following.
    _followers: dict[str, list[Callable[[Run], bool]]] = field(default_factory=dict)
    # The notebook cell executing now and an id of this execution of it (None outside a notebook cell).
    current_cell: Callable[[], tuple[str, str] | None] = lambda: None
    _execution: str | None = None
    _reached: dict[str, int] = field(default_factory=dict)  # run id -> journal position this execution reached
    keyring: Keyring = field(default_factory=Keyring)  # this person's signing key and the keys they trust
    link: MetadataLink = field(default_factory=MetadataLink)  # to the notebook's metadata, through the extension
    keyring_problem: str | None = None
    _forgotten: set[str] = field(default_factory=set)  # runs forgotten here: never taken up from the file again
    taken_up: dict[str, str] = field(default_factory=dict)  # run id -> why it is not trusted, though taken up
    # The streams to the workers of each Dask cluster this session has used, by the --executor that named it.
    _dask_calls: dict[str, executors.DaskCalls] = field(default_factory=dict)

    # -- where requests come from: notebook cells ------------------------------------------

    def place(self, run_id: str) -> Place | None:
        """The cell a request made now comes from, and how far in the run's journal its execution got."""
        current = self.current_cell()
        if current is None:
            return None
        cell, execution = current
        if execution != self._execution:
            self._execution, self._reached = execution, {}
        return Place(cell, self._reached.get(run_id, 0))

    def reached(self, run_id: str, outcome: durable.Outcome) -> None:
        """This cell's execution has shown run ``run_id`` up to where ``outcome`` stands."""
        if self.current_cell() is not None:
            self._reached[run_id] = len(outcome.records)

    def notebook_path(self, explicit: str | None = None) -> Path | None:
        """The notebook file this kernel runs, when Jupyter (or ``explicit``) says."""
        return nbfile.notebook_path_from(self.user_ns, explicit)

    def _cells_from_here(self) -> list[str]:
        """The executing cell and every cell below it in the saved notebook (just it, when the file is unknown)."""
        current = self.current_cell()
        if current is None:
            return []
        cell = current[0]
        path = self.notebook_path()
        try:
            order = nbfile.cell_ids(path) if path is not None else []
        except nbfile.NotebookFileError:
            order = []
        return order[order.index(cell) :] if cell in order else [cell]

    def follow(self, run_id: str, follower: Callable[[Run], bool]) -> None:
        """Tell ``follower(run)`` of every change of run ``run_id`` until it returns True."""
        with self._lock:
            self._followers.setdefault(run_id, []).append(follower)

    def moved(self, run: Run) -> None:
        """Run ``run`` changed (by any path): every form and view that shows it catches up."""
        with self._lock:
            followers = list(self._followers.get(run.id, ()))
        done = [follower for follower in followers if follower(run)]
        with self._lock:
            self._followers[run.id] = [f for f in self._followers.get(run.id, ()) if f not in done]

    # -- machines --------------------------------------------------------------

    def define(self, source: str) -> Machine:
        machine = load(source)
        self.machines[machine.name] = machine
        return machine

    def load(self, path: str | os.PathLike[str]) -> Machine:
        """Define the machine of a ``.mkl`` file, and the machines beside it that it calls and this session
        has not defined (as ``mkl run FILE`` would find them)."""
        machine = load_file(Path(path))
        siblings, _broken = load_siblings(Path(path), machine)  # a broken sibling is reported if called
        for name, found in reachable(machine, lambda name: self.machines.get(name) or siblings.get(name)).items():
            self.machines.setdefault(name, found)
        self.machines[machine.name] = machine
        return machine

    def machine(self, name: str) -> Machine:
        """The machine defined in the notebook by that name, else the standard library's (taken into the
        session, as if defined, so its runs show and replay like any other)."""
        if name in self.machines:
            return self.machines[name]
        if name in stdlib.NAMES:
            self.machines[name] = stdlib.machine(name)
            return self.machines[name]
        known = ", ".join(sorted(self.machines)) or "none yet"
        raise UsageProblem(
            f"no machine named '{name}' is defined (defined: {known}; the standard library: %mkl stdlib); "
            "define it in a %%mkl cell first"
        )

    # -- store -------------------------------------------------------------------

    @property
    def store(self) -> RunStore:
        with self._lock:
            if self._store is None:
                self._store = SQLiteStore(self.settings.store)
            return self._store

    def use_store(self, store: RunStore) -> None:
        with self._lock:
            self._store = store

    def reset_store(self) -> None:
        """Open ``settings.store`` afresh on next use (after the setting changed)."""
        with self._lock:
            self._store = None

    # -- oracles -----------------------------------------------------------------

    def oracle(
        self,
        script: Any = None,
        model_name: str | None = None,
        *,
        needs_model: bool = False,
        machine: Machine | None = None,
        executor: str | None = None,
    ) -> Oracle:
        """The oracle of this session's runs: a script, the session's model factory, or the configured model;
        its calls made where ``executor`` (else ``%mkl config executor=``) says."""
        return self.oracle_factory(script, model_name, needs_model=needs_model, machine=machine, executor=executor)()

    def executor(self, chosen: str | None = None) -> Callable[[Oracle], Oracle] | None:
        """Where calls are made: here (None), or on the Dask cluster ``chosen`` (else ``%mkl config executor=``)
        names: this kernel's current client, or a scheduler's address, connected to once."""
        chosen = executors.check_executor(chosen or self.settings.executor)
        if chosen is None:
            return None
        known = self._dask_calls.get(chosen)
        if chosen == executors.LOCAL:
            client, _ = executors.client_for(chosen, start_local=False)
            if known is None or known.client is not client:  # the notebook made a new Client since
                known = self._dask_calls[chosen] = executors.DaskCalls(client)
        elif known is None:
            known = self._dask_calls[chosen] = executors.DaskCalls(executors.client_for(chosen, start_local=False)[0])
        calls, limit = known, self.settings.max_model_calls
        return lambda oracle: executors.DaskExecutor(oracle, calls, limit)

    def oracle_factory(
        self,
        script: Any = None,
        model_name: str | None = None,
        *,
        needs_model: bool = False,
        machine: Machine | None = None,
        executor: str | None = None,
    ) -> Callable[[], Oracle]:
        """A maker of one oracle per run of a batch (a script read once, a model checked once)."""
        return oracles.factory(
            script=script,
            config=None if script is not None or self.model_factory else self.model_config(model_name),
            model_factory=self.model_factory,
            needs_model=needs_model,
            machine=machine,
            registry=self.registry,
            executor=self.executor(executor),
        )

    def model_config(self, model_name: str | None = None) -> ModelConfig:
        """Tier models from pyproject/mkl.toml, the environment, %mkl config and a run's --model."""
        if model_name:
            return oracles.model_config({**self.model_overrides, "model": model_name}, "--model")
        return oracles.model_config(self.model_overrides, NOTEBOOK_SETTINGS)

    # -- runs --------------------------------------------------------------------

    def run(
        self,
        name: str,
        *,
        id: str | None = None,
        input: Mapping[str, Any] | None = None,
        hitl: str | None = None,
        suspend: bool = False,
        max_steps: int | str | None = None,
        max_tokens: int | str | None = None,
        max_cost: float | str | None = None,
        script: Any = None,
        fresh: bool = False,
        notebook: str | None = None,
        model: str | None = None,
        observer: Observer | None = None,
        trust_file: bool = False,
        executor: str | None = None,
    ) -> Run:
        """Run (or replay) machine ``name`` as run ``id`` (default: the machine's name).

        A run this kernel's store does not know is taken up from the notebook file when the file holds
        it and its checkpoint is trusted, or ``trust_file`` says to take it up anyway. An untrusted one is
        never taken up without that: a scripted run is then made anew (``Run.set_aside`` says so), and
        otherwise :class:`~mkl_notebook.app.trust.Untrusted` is raised and nothing runs.
        """
        machine = self.machine(name)
        run_id = id or name
        host_values = host_input(input or {}, "input")
        options = app_runs.run_options(
            max_steps=max_steps,
            max_tokens=max_tokens,
            max_cost=max_cost,
            suspend=suspend,
            hitl=hitl or self.settings.hitl,
            max_workers=self.settings.max_workers,
        )
        set_aside = None
        if fresh:
            self.link.delete(run_id)  # the new run's checkpoint takes its place in the metadata
            self.taken_up.pop(run_id, None)  # and it is this person's own
        else:
            try:
                self._rehydrate(run_id, notebook, trust_file)
            except Untrusted as problem:
                if script is None:
                    raise  # running it afresh would call a model and replace what its author saw: ask first
                # Scripted, a new run costs nothing and is only what this cell says: make it, and say so.
                set_aside = (
                    f"Not the run saved in {problem.source}: that one is {problem.provenance.mark}, so it was "
                    "not taken up, and this is a new run of this cell's own script."
                )
        needs_model = oracles.starts_anew(self.store, run_id, fresh)
        oracle = self.oracle(script, model, needs_model=needs_model, machine=machine, executor=executor)
        handle = Run(self, run_id, name, oracle)
        handle.set_aside = set_aside
        handle.outcome = durable.start(
            machine,
            handle.oracle,
            store=self.store,
            run_id=run_id,
            registry=dict(self.machines),
            input=host_values,
            options=options,
            fresh=fresh,
            observer=observer,
            place=None if fresh else self.place(run_id),
        )
        self.reached(run_id, handle.outcome)
        self.runs[run_id] = handle
        return handle

    def runs_in_notebook(self) -> set[str]:
        """The runs the notebook carries, as the extension handed them over or as its file holds them (read
        once); none outside a notebook."""
        held = set(self.link.runs)
        path = nbfile.notebook_path_from(self.user_ns, None)
        if path is not None:
            with contextlib.suppress(nbfile.NotebookFileError):  # an unreadable file carries nothing to take up
                held |= {run.run_id for run in nbfile.embedded_runs(path)}
        return held

    def rehydrate(self, run_id: str, notebook: str | None = None, trust_file: bool = False) -> bool:
        """Bring run ``run_id`` back from the notebook file when this store does not know it (trusted only,
        unless ``trust_file``); whether it did. :class:`Untrusted` says whose an untrusted one is."""
        return self._rehydrate(run_id, notebook, trust_file)

    def _rehydrate(self, run_id: str, notebook: str | None, trust_file: bool = False) -> bool:
        """Bring a run back from the notebook file when this store does not know it (another machine);
        only a trusted checkpoint, unless ``trust_file``."""
        if self.store.exists(run_id) or run_id in self._forgotten:
            return False
        path = nbfile.notebook_path_from(self.user_ns, notebook)
        held = self.link.held(run_id) if notebook is None else None
        if held is not None:  # the notebook's metadata, as the extension handed it over: checked like a file
            name = path.name if path is not None else "this notebook"
            checkpoint = envelope.check(held, f"{name}, metadata run '{run_id}'")
            self._take_up(checkpoint.header, checkpoint.records, name, checkpoint.seal, trust_file)
            return True
        if path is None:
            return False
        try:
            embedded = nbfile.find_run(path, run_id)
        except nbfile.NotebookFileError:
            return False
        self._take_up(embedded.header, embedded.records, path.name, embedded.seal, trust_file)
        return True

    def _take_up(
        self,
        header: dict[str, Any],
        records: list[dict[str, Any]],
        source: str,
        seal: Seal | None,
        trust_file: bool,
    ) -> None:
        """Import a checkpoint from the notebook; one taken up by choice though untrusted stays marked."""
        run_id, provenance = app_runs.import_checkpoint(
            self.store, header, records, source, seal=seal, keyring=self.keyring, trust_file=trust_file
        )
        if provenance is not None and not provenance.trusted:
            self.taken_up[run_id] = f"taken up from {source} by your choice; it is {provenance.mark}"

    def forget(self, run_id: str) -> None:
        """Delete run ``run_id`` from this store and the notebook's metadata; this kernel will not take it up
        from the notebook's outputs again (a new run of that id starts afresh)."""
        known = self.store.exists(run_id) or self.link.held(run_id) is not None or run_id in self.runs
        if not known:
            raise UnknownRun(run_id, self.store.location)
        if self.store.exists(run_id):
            with self.store.lease(run_id):
                self.store.delete(run_id)
        self.runs.pop(run_id, None)
        self.taken_up.pop(run_id, None)
        self.link.delete(run_id)
        self._forgotten.add(run_id)

    def signer(self) -> Signer | None:
        """What seals this kernel's checkpoints: this person's key (None when it cannot be made or read,
        and the checkpoints then go unsigned; :attr:`keyring_problem` says why)."""
        try:
            return self.keyring.signer(self.settings.user)
        except (OSError, UsageProblem) as exc:
            self.keyring_problem = str(exc)
            return None

    def get_run(self, run_id: str, notebook: str | None = None, script: Any = None, *, trust_file: bool = False) -> Run:
        """A run by id; ``script`` (scripted answers) serves the calls it still has to make. ``trust_file``
        takes it up from the notebook file even when its checkpoint is not trusted."""
        if run_id in self.runs:
            handle = self.runs[run_id]
            if script is not None:
                handle.oracle = self.oracle(script)
            return handle
        self._rehydrate(run_id, notebook, trust_file)
        if not self.store.exists(run_id):
            raise UnknownRun(run_id, self.store.location)  # nor in this session, nor in its notebook file
        handle = Run(self, run_id, "", self.oracle(script))
        if not handle.show_as_found(self._cells_from_here()):
            handle.refresh()
        self.runs[run_id] = handle
        return handle

    def pending(self) -> list[Run]:
        """The runs that wait for a person now, as their journals stand: this store's, and those the
        notebook file carries (in its metadata or outputs) that this store does not hold yet, when trusted."""
        return self.waiting()[0]

    def waiting(self) -> tuple[list[Run], list[Untrusted]]:
        """:meth:`pending`, and the waiting runs the notebook carries that are not taken up because no key
        this person trusts sealed them (each says whose it is and how the file shows it)."""
        untrusted = self._rehydrate_waiting()
        found = []
        for summary in self.store.runs():
            if summary.status != "suspended":
                continue
            handle = self.runs.get(summary.run_id)
            if handle is None or handle.outcome is None or handle.outcome.latest is not None:
                handle = self.get_run(summary.run_id) if handle is None else handle.refresh()
            found.append(handle)
        return found, untrusted

    def _rehydrate_waiting(self) -> list[Untrusted]:
        """Take up the waiting runs of this kernel's notebook file that the store lacks; the untrusted ones
        are left in the file, and returned."""
        waiting = [
            run_id
            for run_id, held in sorted(self.link.runs.items())
            if held.get("status") == "suspended" and held.get("run_id") == run_id
        ]
        path = self.notebook_path()
        if path is not None:
            with contextlib.suppress(nbfile.NotebookFileError):  # an unreadable file carries nothing to take up
                waiting += [run.run_id for run in nbfile.embedded_runs(path) if run.header.get("status") == "suspended"]
        left: list[Untrusted] = []
        for run_id in dict.fromkeys(waiting):
            if self.store.exists(run_id):
                continue
            try:
                self._rehydrate(run_id, None)
            except Untrusted as problem:
                left.append(problem)
        return left

    def answered_here(self) -> list[Run]:
        """The runs whose questions the executing cell's forms answered, each as those forms left it."""
        current = self.current_cell()
        if current is None:
            return []
        shown = []
        for summary in self.store.runs():
            records = self.store.read(summary.run_id)
            cut = places.form_cut(records, current[0])
            outcome = None if cut is None else durable.show_prefix(summary.run_id, records, cut, known=self.machines)
            if outcome is not None:  # the cells below see the run as this cell left it
                handle = self.runs.setdefault(summary.run_id, Run(self, summary.run_id, "", self.oracle()))
                shown.append(handle.showing(outcome))
        return shown


class Run:
    """A handle on one durable run: read its state, answer its gate, give it more budget."""

    def __init__(self, session: Session, run_id: str, machine_name: str, oracle: Oracle) -> None:
        self.session = session
        self.id = run_id
        self.machine_name = machine_name
        self.oracle = oracle
        self.outcome: durable.Outcome | None = None
        self.set_aside: str | None = None  # why the notebook's saved copy of this run was not taken up
        self.drawn_in: int | None = None  # the cell execution whose magic drew this run's view live
        self._lock = threading.Lock()

    # -- reading -------------------------------------------------------------------

    @property
    def result_object(self) -> RunResult:
        if self.outcome is None:
            self.refresh()
        assert self.outcome is not None
        return self.outcome.result

    @property
    def status(self) -> str:
        return self.result_object.status

    @property
    def result(self) -> Any:
        return self.result_object.result

    @property
    def error(self) -> str | None:
        return self.result_object.error

    @property
    def at(self) -> str | None:
        return self.result_object.at

    @property
    def context(self) -> dict[str, Any]:
        """The run's context as it stands (a copy)."""
        return copy.deepcopy(dict(self.result_object.context))

    @property
    def trace(self) -> list[TraceStep]:
        """The steps of the run, each a plain dict (state, gate, policy, to, tokens, output, …)."""
        return copy.deepcopy(list(self.result_object.trace))

    def trace_frame(self) -> Any:
        """The trace as a pandas DataFrame, one row per step (pandas is optional: ``pip install pandas``)."""
        return pandas_for("Run.trace_frame()").DataFrame(self.trace)

    @property
    def visits(self) -> dict[str, int]:
        return dict(self.result_object.visits)

    @property
    def calls(self) -> dict[str, int]:
        return dict(self.outcome.calls) if self.outcome else {"made": 0, "replayed": 0}

    @property
    def pending(self) -> dict[str, Any] | None:
        """What the run waits for, or None: reason, at, the authored ask, reply_to, a model question, what the
        question is about (``about``), and answers given before about something that has changed since."""
        result = self.result_object
        if result.status != "suspended":
            return None
        return {
            "reason": result.error,
            "at": result.at,
            "ask": result.ask,
            "reply_to": result.reply_to,
            "question": result.question,
            "question_id": result.question_id(self.id),
            "about": result.about,
            "asked_again": asked_again(result),
        }

    @property
    def machine(self) -> Machine | None:
        return self.session.machines.get(self.machine_name)

    def envelope(self) -> dict[str, Any]:
        if self.outcome is None:
            self.refresh()
        assert self.outcome is not None
        return self.outcome.envelope(self.session.signer())

    def refresh(self) -> Run:
        """Replay the run from its journal (no calls are made for what is recorded)."""
        return self._advance(lambda: durable.replay(self.id, self.oracle, store=self.session.store))

    def showing(self, outcome: durable.Outcome) -> Run:
        """This handle, showing ``outcome`` (the run as a cell left it)."""
        return self._advance(lambda: outcome)

    def show_as_found(self, cells: list[str]) -> bool:
        """Show the run as the cells above ``cells`` (the executing cell and those below it) left it, when
        the journal holds requests from them; False when it does not (the run is then shown as it stands)."""
        records = self.session.store.read(self.id)
        cut = places.entry(records, cells)
        if cut is None or cut >= len(records):
            return False
        shown = durable.show_prefix(self.id, records, cut, known=self.session.machines)
        if shown is None:
            return False
        self.showing(shown)
        return True

    # -- acting ----------------------------------------------------------------------

    @property
    def question_id(self) -> str | None:
        """The id of the question this handle last saw the run wait on (None when it waits for no one)."""
        return self.result_object.question_id(self.id)

    def submit(
        self,
        reply: Any,
        *,
        question: str | None = None,
        by: str | None = None,
        via: str = "api",
        observer: Observer | None = None,
        form_of: str | None = None,
    ) -> Run:
        """Journal the person's reply, and let the run go on in the machines it was started with.

        The reply answers ``question`` (by default the one this handle last showed); if the run has
        moved on since, it is refused and nothing is recorded. ``by`` names who answers;
        ``form_of`` is the notebook cell whose form gave the reply.
        """
        place = Place(form_of, form=True) if form_of else self.session.place(self.id)
        return self._advance(
            lambda: app_runs.resume(
                self.session.store,
                self.id,
                self.oracle,
                reply=reply,
                question=question or self.question_id,
                by=by or self.session.settings.user,
                via=via,
                observer=observer,
                place=place,
            ),
            request=form_of is None,
        )

    def resume(
        self,
        *,
        reply: Any = None,
        set_values: Mapping[str, Any] | None = None,
        question: str | None = None,
        by: str | None = None,
        via: str = "notebook",
        max_steps: int | str | None = None,
        max_tokens: int | str | None = None,
        max_cost: float | str | None = None,
        resolve: str | durable.Resolution | None = None,
        observer: Observer | None = None,
    ) -> Run:
        """Continue a suspended run (with a reply, new budgets, or neither) or settle an in-doubt tool call.

        Machines redefined in this session since the run started take over (the edit-and-rerun path).
        """
        return self._advance(
            lambda: app_runs.resume(
                self.session.store,
                self.id,
                self.oracle,
                reply=reply,
                set_values=set_values,
                question=question,
                by=by or self.session.settings.user,
                via=via,
                max_steps=max_steps,
                max_tokens=max_tokens,
                max_cost=max_cost,
                resolve=resolve,
                registry=dict(self.session.machines) or None,
                observer=observer,
                place=self.session.place(self.id),
            ),
            request=True,
        )

    def answer_to(self, question_id: str | None) -> dict[str, Any] | None:
        """A person's answer to question ``question_id`` of this run (who, when, how), if it was answered."""
        for answer in self.result_object.answers:
            shown = answer.get("question") or ""
            asked = question_id_of(self.id, answer["position"], shown, answer.get("about"))
            if question_id is not None and question_id == asked:
                return answer
        return None

    def _advance(self, step: Callable[[], durable.Outcome], *, request: bool = False) -> Run:
        """Take the outcome of ``step``; a ``request`` of the executing cell moves that cell's place on."""
        with self._lock:
            self.outcome = step()
        if not self.machine_name:
            self.machine_name = str(self.outcome.header().get("machine") or "")
        if request:
            self.session.reached(self.id, self.outcome)
        if self.outcome.latest is None:
            self.session.moved(self)  # shown as it stands: every form and view of it catches up
        return self

    def _ipython_display_(self) -> None:
        """Show the run's view, unless the magic that returned this run drew it live in this very cell
        (``%mkl run …`` at the end of a cell shows one view, not two)."""
        from IPython import get_ipython
        from IPython.display import display

        shell = get_ipython()
        if shell is not None and self.drawn_in is not None and shell.execution_count == self.drawn_in:
            return
        display(self._repr_mimebundle_(), raw=True)

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any]:
        if self.outcome is None:
            self.refresh()
        assert self.outcome is not None
        bundle = run_output(self.id, self.machine, self.outcome, signer=self.session.signer())
        return self.session.link.carry(self.id, bundle, as_it_stands=self.outcome.latest is None)

    def __repr__(self) -> str:
        if self.outcome is None:
            return f"<Run {self.id}>"
        result = self.outcome.result
        where = f" at {result.at}" if result.at else ""
        error = f" ({result.error})" if result.error else ""
        return f"<Run {self.id} of {self.machine_name}: {result.status}{error}{where}>"


def pandas_for(what: str) -> Any:
    """pandas, which ``what`` needs; it is optional, never a dependency of the package."""
    try:
        return importlib.import_module("pandas")
    except ImportError:
        raise UsageProblem(f"{what} needs pandas, which is not installed: pip install pandas") from None


_SESSION: Session | None = None


def current_session() -> Session:
    """The one session of this Python process (a kernel runs one notebook)."""
    global _SESSION
    if _SESSION is None:
        _SESSION = Session()
    return _SESSION
