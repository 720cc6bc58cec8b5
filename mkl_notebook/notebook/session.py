"""The kernel's mkl session: defined machines, the run store, and :class:`Run` handles.

This is the Python API the magics are thin over; it never imports widgets or
litellm, so it is as usable from a plain script as from a notebook.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..durable import runs as durable
from ..durable.stores import DEFAULT_STORE, RunStore, SQLiteStore
from ..engine.options import RunOptions
from ..engine.oracle import Oracle
from ..engine.result import RunResult
from ..host import HostOracle, Registry, default_registry
from ..lang.findings import MachineError
from ..lang.loader import load
from ..lang.model import Machine
from ..providers.config import ConfigError, ModelConfig, load_config
from ..providers.scripted import NoModelOracle, ScriptError, oracle_from_file, oracle_from_script
from . import nbfile

NO_MODEL = (
    "no model is configured: set one with %mkl config model=openai/gpt-4o-mini (or MKL_MODEL, or "
    "[tool.mkl] in pyproject.toml), or pass --script FILE to run with scripted answers"
)


class MklUsageError(ValueError):
    """A user mistake in the notebook API; the magics show it as a one-line UsageError."""


def check_budgets(max_steps: int | None, max_tokens: int | None) -> None:
    for name, flag, value in (("max_steps", "--max-steps", max_steps), ("max_tokens", "--max-tokens", max_tokens)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
            raise MklUsageError(f"{name} ({flag}) must be a whole number of at least 1, not {value!r}")


@dataclass
class Settings:
    store: Path = DEFAULT_STORE
    hitl: str = "asking"  # notebooks suspend at escalate gates that carry an `ask:`
    max_workers: int | None = None


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

    # -- machines --------------------------------------------------------------

    def define(self, source: str) -> Machine:
        try:
            machine = load(source)
        except MachineError as exc:
            raise MklUsageError(str(exc)) from None
        self.machines[machine.name] = machine
        return machine

    def machine(self, name: str) -> Machine:
        if name not in self.machines:
            known = ", ".join(sorted(self.machines)) or "none yet"
            raise MklUsageError(
                f"no machine named '{name}' is defined (defined: {known}); define it in a %%mkl cell first"
            )
        return self.machines[name]

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

    def oracle(self, script: Any = None, model_name: str | None = None) -> Oracle:
        if isinstance(script, Oracle):
            model = script
        elif script is not None:
            try:
                model = (
                    oracle_from_script(dict(script), where="script")
                    if isinstance(script, Mapping)
                    else oracle_from_file(str(script), where=f"script {script}")
                )
            except ScriptError as exc:
                raise MklUsageError(str(exc)) from None
        elif self.model_factory is not None:
            model = self.model_factory()
        else:
            config = self.model_config(model_name)
            if config.configured:
                from ..providers.litellm_provider import LiteLLMOracle

                model = LiteLLMOracle(config)
            else:
                model = NoModelOracle(NO_MODEL)
        return HostOracle(model, self.registry)

    def model_config(self, model_name: str | None = None) -> ModelConfig:
        """Tier models from pyproject/mkl.toml, the environment, %mkl config and a run's --model."""
        overrides = dict(self.model_overrides)
        if model_name:
            overrides["model"] = model_name
        try:
            return load_config(overrides=overrides)
        except ConfigError as exc:
            raise MklUsageError(str(exc)) from None

    def has_model(self, model_name: str | None = None) -> bool:
        return self.model_factory is not None or self.model_config(model_name).configured

    # -- runs --------------------------------------------------------------------

    def run(
        self,
        name: str,
        *,
        id: str | None = None,
        input: Mapping[str, Any] | None = None,
        hitl: str | None = None,
        suspend: bool = False,
        max_steps: int | None = None,
        max_tokens: int | None = None,
        script: Any = None,
        fresh: bool = False,
        notebook: str | None = None,
        model: str | None = None,
        observer: Callable[[str, dict[str, Any]], None] | None = None,
    ) -> Run:
        machine = self.machine(name)
        run_id = id or name
        hitl = hitl or self.settings.hitl
        if hitl not in ("none", "asking", "all"):
            raise MklUsageError(f"hitl must be 'none', 'asking' or 'all', not {hitl!r}")
        if input is not None and not isinstance(input, Mapping):
            raise MklUsageError(f"input must be a dict of context keys, not {type(input).__name__}")
        check_budgets(max_steps, max_tokens)
        if not fresh:
            self._rehydrate(run_id, notebook)
        is_new = fresh or not self.store.exists(run_id)
        if is_new and script is None and not self.has_model(model):
            raise MklUsageError(NO_MODEL)
        options = RunOptions(
            cost_budget=max_tokens,
            max_steps=max_steps,
            suspendable=suspend,
            hitl=hitl,
            **({"max_workers": self.settings.max_workers} if self.settings.max_workers else {}),
        )
        handle = Run(self, run_id, name, self.oracle(script, model))
        handle.outcome = durable.start(
            machine,
            handle.oracle,
            store=self.store,
            run_id=run_id,
            registry=dict(self.machines),
            input=dict(input or {}),
            options=options,
            fresh=fresh,
            observer=observer,
        )
        self.runs[run_id] = handle
        return handle

    def _rehydrate(self, run_id: str, notebook: str | None) -> bool:
        """Bring a run back from the notebook file when this store does not know it (another machine)."""
        if self.store.exists(run_id):
            return False
        path = nbfile.notebook_path_from(self.user_ns, notebook)
        if path is None:
            return False
        try:
            embedded = nbfile.find_run(path, run_id)
        except nbfile.NotebookFileError:
            return False
        durable.import_envelope(self.store, embedded.header, embedded.records)
        return True

    def get_run(self, run_id: str, notebook: str | None = None, script: Any = None) -> Run:
        """A run by id; ``script`` (scripted answers) serves the calls it still has to make."""
        if run_id in self.runs:
            handle = self.runs[run_id]
            if script is not None:
                handle.oracle = self.oracle(script)
            return handle
        self._rehydrate(run_id, notebook)
        if not self.store.exists(run_id):
            raise MklUsageError(f"no run '{run_id}' in this session, its store or its notebook")
        handle = Run(self, run_id, "", self.oracle(script))
        handle.refresh()
        self.runs[run_id] = handle
        return handle

    def pending(self) -> list[Run]:
        found = {run.id: run for run in self.runs.values() if run.status == "suspended"}
        for summary in self.store.runs():
            if summary.status == "suspended" and summary.run_id not in found:
                found[summary.run_id] = self.get_run(summary.run_id)
        return list(found.values())


class Run:
    """A handle on one durable run: read its state, answer its gate, give it more budget."""

    def __init__(self, session: Session, run_id: str, machine_name: str, oracle: Oracle) -> None:
        self.session = session
        self.id = run_id
        self.machine_name = machine_name
        self.oracle = oracle
        self.outcome: durable.Outcome | None = None
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
    def trace(self) -> list[dict[str, Any]]:
        return self.result_object.trace

    @property
    def visits(self) -> dict[str, int]:
        return dict(self.result_object.visits)

    @property
    def calls(self) -> dict[str, int]:
        return dict(self.outcome.calls) if self.outcome else {"made": 0, "replayed": 0}

    @property
    def pending(self) -> dict[str, Any] | None:
        """What the run waits for, or None: reason, at, the authored ask, reply_to, a model question."""
        result = self.result_object
        if result.status != "suspended":
            return None
        return {
            "reason": result.error,
            "at": result.at,
            "ask": result.ask,
            "reply_to": result.reply_to,
            "question": result.question,
        }

    @property
    def machine(self) -> Machine | None:
        return self.session.machines.get(self.machine_name)

    def envelope(self) -> dict[str, Any]:
        if self.outcome is None:
            self.refresh()
        assert self.outcome is not None
        return self.outcome.envelope()

    def refresh(self) -> Run:
        """Replay the run from its journal (no calls are made for what is recorded)."""
        return self._advance(lambda: durable.replay(self.id, self.oracle, store=self.session.store))

    # -- acting ----------------------------------------------------------------------

    def submit(self, reply: Any, observer: Callable[[str, dict[str, Any]], None] | None = None) -> Run:
        """Journal the person's reply at ``reply_to`` and let the run go on."""
        if self.status != "suspended" or self.result_object.error not in ("escalated", "asked"):
            raise MklUsageError(
                f"run '{self.id}' is not waiting for a reply (it is {self.status}"
                f"{': ' + self.error if self.error else ''})"
            )
        return self._advance(
            lambda: durable.resume(
                self.id, self.oracle, store=self.session.store, reply=reply, has_reply=True, observer=observer
            )
        )

    def resume(
        self,
        *,
        max_steps: int | None = None,
        max_tokens: int | None = None,
        resolve: tuple[str, Any] | None = None,
        observer: Callable[[str, dict[str, Any]], None] | None = None,
    ) -> Run:
        """Continue a suspended run, with new budgets; or settle an in-doubt tool call."""
        check_budgets(max_steps, max_tokens)
        return self._advance(
            lambda: durable.resume(
                self.id,
                self.oracle,
                store=self.session.store,
                max_steps=max_steps,
                max_tokens=max_tokens,
                resolve=resolve,
                registry=dict(self.session.machines) or None,
                observer=observer,
            )
        )

    def _advance(self, step: Callable[[], durable.Outcome]) -> Run:
        with self._lock:
            try:
                self.outcome = step()
            except durable.RunStateError as exc:
                raise MklUsageError(str(exc)) from None
        if not self.machine_name and self.outcome is not None:
            self.machine_name = str(self.outcome.header().get("machine") or "")
        return self

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any]:
        from .views import run_bundle

        return run_bundle(self.id, self.machine, self.result_object, envelope=self.envelope())

    def __repr__(self) -> str:
        if self.outcome is None:
            return f"<Run {self.id}>"
        result = self.outcome.result
        where = f" at {result.at}" if result.at else ""
        error = f" ({result.error})" if result.error else ""
        return f"<Run {self.id} of {self.machine_name}: {result.status}{error}{where}>"


_SESSION: Session | None = None


def current_session() -> Session:
    """The one session of this Python process (a kernel runs one notebook)."""
    global _SESSION
    if _SESSION is None:
        _SESSION = Session()
    return _SESSION
