"""Which oracle answers a run: a script, a real model, or none (and whether a model can be called at all)."""

from __future__ import annotations

import runpy
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from ..durable.stores import RunStore
from ..engine.oracle import Oracle
from ..engine.result import NO_MODEL_REASON
from ..lang.model import Machine
from ..providers.config import ModelConfig, load_config
from ..providers.host import HostOracle, Registry
from ..providers.scripted import NoModelOracle, ScriptMissing, oracle_from_file, oracle_from_script, read_script
from .errors import UsageProblem

NO_MODEL = (
    f"{NO_MODEL_REASON}: set MKL_MODEL (e.g. MKL_MODEL=openai/gpt-4o-mini), pass --model MODEL, or set "
    "a model under [tool.mkl] in pyproject.toml (in a notebook also %mkl config model=…); or pass --script "
    "FILE to run offline with scripted answers"
)

Script = Oracle | Mapping[str, Any] | str | Path


def model_config(overrides: Mapping[str, Any] | None = None, source: str = "flags") -> ModelConfig:
    """Tier models from ``mkl.toml`` / ``[tool.mkl]``, the environment, then ``overrides`` (flags, settings;
    ``source`` says which, for ``%mkl models``)."""
    given = {key: value for key, value in (overrides or {}).items() if value is not None}
    return load_config(overrides=given, overrides_source=source)


def scripted(script: Script) -> Oracle:
    """Scripted answers: an oracle as given, a mapping of docs/language.md §8 keys, or a YAML file of them."""
    if isinstance(script, Oracle):
        return script
    if isinstance(script, Mapping):
        return oracle_from_script(dict(script), where="script")
    return oracle_from_file(script, where=f"--script {script}")


def readable(script: Script | None) -> bool:
    """Whether ``script`` is a script here: given as answers, or a file this machine can read."""
    if script is None or isinstance(script, (Oracle, Mapping)):
        return script is not None
    try:
        read_script(script, where=f"--script {script}")
    except ScriptMissing:
        return False
    return True


def starts_anew(store: RunStore, run_id: str | None, fresh: bool) -> bool:
    """Whether running ``run_id`` starts from nothing (so its first call needs a model at once)."""
    return fresh or run_id is None or not store.exists(run_id)


def preflight(config: ModelConfig, machine: Machine | None) -> None:
    """A model that cannot be called says what to set, in one line, before anything runs."""
    from ..providers.litellm_provider import missing_keys  # imports litellm: only when a model will be called

    tiers = {machine.tier_of(state) for state in machine.states.values()} if machine else set()
    for tier in sorted(tiers) or ["balanced"]:
        model = config.model_for(tier)
        if not model:
            raise UsageProblem(
                f"no model is configured for tier '{tier}': set MKL_MODEL or MKL_MODEL_{tier.upper()}, pass "
                "--model, or pass --script FILE for scripted answers"
            )
        if config.api_base_for(tier):
            continue  # local and OpenAI-compatible servers often need no real key
        missing = missing_keys(model)
        if missing:
            raise UsageProblem(f"model {model} needs {' and '.join(missing)}: set it in the environment")


def choose(
    *,
    script: Script | None = None,
    config: ModelConfig | None = None,
    model_factory: Callable[[], Oracle] | None = None,
    needs_model: bool = False,
    machine: Machine | None = None,
    registry: Registry | None = None,
    executor: Callable[[Oracle], Oracle] | None = None,
) -> Oracle:
    """The oracle of a run: the host's tools and hooks, over a script, a model, or nothing.

    ``needs_model`` says the run will call a model at once (it starts anew): then a missing model
    or API key is refused now, in one line; otherwise a run with no model still replays what its
    journal holds and suspends, resumable, at the first new call. A machine that can never call a
    model needs none. ``executor`` makes the calls elsewhere (see :mod:`.executors`).
    """
    model: Oracle
    if machine is not None and not machine.may_call_a_model():
        needs_model = False  # tools and otherwise-gates only: it runs without a model
    if script is not None:
        model = scripted(script)
    elif model_factory is not None:
        model = model_factory()
    else:
        config = config or model_config()
        if config.configured:
            if needs_model:
                preflight(config, machine)
            from ..providers.litellm_provider import LiteLLMOracle  # litellm itself loads on the first call

            model = LiteLLMOracle(config)
        elif needs_model:
            raise UsageProblem(NO_MODEL)
        else:
            model = NoModelOracle(NO_MODEL)
    host = HostOracle(model, registry)
    return executor(host) if executor is not None else host


def makes_calls(oracle: Oracle) -> bool:
    """Whether ``oracle`` can make a run's new calls here (a script or a model), not only replay its journal."""
    inner: Any = oracle
    while inner is not None and not isinstance(inner, NoModelOracle):
        inner = getattr(inner, "model", None) or getattr(inner, "inner", None)  # (HostOracle, an executor)
    return inner is None


def factory(
    *,
    script: Script | None = None,
    config: ModelConfig | None = None,
    model_factory: Callable[[], Oracle] | None = None,
    needs_model: bool = False,
    machine: Machine | None = None,
    registry: Registry | None = None,
    executor: Callable[[Oracle], Oracle] | None = None,
) -> Callable[[], Oracle]:
    """A maker of one oracle per run, for a batch of runs: a script is read once and each run gets its own
    copy (its answers in order, as for a single run); a model is checked once and shared (it keeps no state).
    """
    if script is not None and not isinstance(script, (Oracle, Mapping)):
        try:
            script = read_script(script, where=f"--script {script}")
        except ScriptMissing as missing:
            if needs_model:
                raise  # the run starts anew: its first call needs those answers at once
            # Replaying needs no script: a run taken up from a notebook that came without its files shows, and
            # is answered, here; it stops at the first new call, and goes on where the script (or a model) is.
            script = NoModelOracle(f"{NO_MODEL_REASON} here: {missing}; it goes on where that file is")
    if script is not None:
        given = script
        return lambda: choose(
            script=given if isinstance(given, Oracle) else dict(given), registry=registry, executor=executor
        )
    shared = choose(
        config=config,
        model_factory=model_factory,
        needs_model=needs_model,
        machine=machine,
        registry=registry,
        executor=executor,
    )
    return lambda: shared


def load_tools_file(path: str | Path) -> None:
    """Run a Python file whose ``@mkl_notebook.tool`` / ``@mkl_notebook.hook`` functions register themselves."""
    if not Path(path).is_file():
        raise UsageProblem(f"--tools {path}: no such file")
    try:
        runpy.run_path(str(path), run_name="mkl_tools")
    except Exception as exc:
        raise UsageProblem(f"--tools {path}: failed to load ({type(exc).__name__}: {exc})") from None
