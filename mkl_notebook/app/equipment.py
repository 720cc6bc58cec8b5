"""What a workspace answers with: this person's key, the tools, the models, and where calls are made.

A run's calls are answered by an oracle: scripted answers, a model through litellm, or one a test or an embedder
supplies; its tools come from the registry (and a tools file loaded); its calls are made here or on a Dask
cluster. What it appends is signed with this person's key. Nothing here runs a machine or touches a store.
"""

from __future__ import annotations

import functools
import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..checkpoints.seals import Signer
from ..durable import runs as durable
from ..engine.options import DEFAULT_MAX_WORKERS
from ..engine.oracle import Oracle
from ..lang.model import Machine
from ..providers.config import ModelConfig
from ..providers.host import Registry, default_registry
from ..providers.secrets import scrub
from ..telemetry.switch import check_endpoint, export_of, header_values
from . import executors, oracles
from .continuing import run_origin
from .errors import UsageProblem
from .settings import Settings
from .trust import Keyring

log = logging.getLogger(__name__)


class Equipment:
    """Keys, tools, models and executors of one workspace. ``signing_as()`` names whom this person signs as
    (default: the ``user`` setting; a notebook adds the user its page reports); ``start_local`` starts a Dask
    LocalCluster for ``executor=dask`` (the command line), else ``dask`` is the process's current client."""

    def __init__(
        self,
        settings: Settings,
        *,
        registry: Registry | None = None,
        keyring: Keyring | None = None,
        model_factory: Callable[[], Oracle] | None = None,
        start_local: bool = False,
    ) -> None:
        self.settings = settings
        self.registry = registry or default_registry
        self.keyring = keyring or Keyring()
        self.model_factory = model_factory  # tests and embedders may supply their own model oracle
        self.keyring_problem: str | None = None
        self.signing_as: Callable[[], str | None] = lambda: self.settings.user
        self._tools_file: str | None = None  # the tools file loaded last (``load_tools``)
        self._dask = executors.DaskStreams(start_local)  # the Dask clusters used, and what was started for them
        self._senders: dict[str, Any] = {}  # by endpoint: what sends this workspace's traces there
        self._untraced = False  # the environment asked for traces and the SDK is missing (said once)

    def close(self) -> None:
        """Let go of the streams to Dask workers, a LocalCluster started here, and the senders of traces."""
        self._dask.close()
        for sender in self._senders.values():
            sender.close()
        self._senders.clear()

    def signer(self) -> Signer | None:
        """What seals this workspace's checkpoints: this person's key (None when it cannot be made or read,
        and the checkpoints then go unsigned; :attr:`keyring_problem` says why)."""
        try:
            return self.keyring.signer(self.signing_as())
        except (OSError, UsageProblem) as exc:
            self.keyring_problem = str(exc)
            return None

    def trust_key(self, key: str, name: str) -> bool:
        """Trust ``key`` as ``name``'s from now on (``mkl trust KEY --name NAME``); False when it was already."""
        from datetime import datetime, timezone

        return self.keyring.add(key, name, datetime.now(timezone.utc).isoformat(timespec="seconds"))

    def endorser(self) -> durable.Endorse | None:
        """What signs the records this workspace's advances append (None: no key, they stay unsigned)."""
        signer = self.signer()
        return signer.endorse if signer is not None else None

    def load_tools(self, path: str | Path) -> None:
        """Run a Python file whose ``@mkl_notebook.tool`` / ``@mkl_notebook.hook`` functions register themselves."""
        oracles.load_tools_file(path)
        self._tools_file = str(path)

    def origin(self, made_from: Path | None, script: Any, model: str | None) -> dict[str, str] | None:
        """What a run's start record says it drew on: its machine's file, a script, the tools file, a model."""
        flagged = self.settings.models.get("model") if self.settings.models_source == "flags" else None
        return run_origin(made_from, script, self._tools_file, model or flagged)

    def model_config(self, model: str | None = None) -> ModelConfig:
        """Tier models from pyproject/mkl.toml, the environment, the settings and a run's ``--model``."""
        return self.settings.model_config(model)

    def executor(self, chosen: str | None = None, calls: int | None = None) -> Callable[[Oracle], Oracle] | None:
        """Where calls are made: here (None), or on the Dask cluster ``chosen`` (else the setting) names: a
        scheduler's address, the current client, or with ``start_local`` a LocalCluster started once, for
        ``calls`` in flight at once (default: a run's fan-out branches, ``max_workers``)."""
        chosen = executors.check_executor(chosen or self.settings.executor)
        calls = calls or self.settings.max_workers or DEFAULT_MAX_WORKERS
        return None if chosen is None else self._dask.wrapper(chosen, self.settings.max_model_calls, calls)

    def oracle_factory(
        self,
        script: Any = None,
        model: str | None = None,
        *,
        needs_model: bool = False,
        machine: Machine | None = None,
        executor: str | None = None,
        calls: int | None = None,
        otel: str | None = None,
    ) -> Callable[[], Oracle]:
        """A maker of one oracle per run (a script read once, a model checked once), its calls made where
        ``executor`` (else the setting) says, ``calls`` at once (see :meth:`executor`), its advances exported
        as traces where ``otel`` (else the setting, else the environment) says (see :meth:`tracing`)."""
        made = oracles.factory(
            script=script,
            config=None if script is not None or self.model_factory else self.model_config(model),
            model_factory=self.model_factory,
            needs_model=needs_model,
            machine=machine,
            registry=self.registry,
            executor=self.executor(executor, calls),
        )
        traced = self.tracing(otel)
        return made if traced is None else lambda: traced(made())

    def tracing(self, otel: str | None = None) -> Callable[[Oracle], Oracle] | None:
        """What wraps a run's oracle so that its advances are exported as traces to ``otel`` (else the ``otel``
        setting, else ``OTEL_EXPORTER_OTLP_*``); None when export is off. The OpenTelemetry SDK is imported
        only then."""
        export = export_of(check_endpoint(otel, "--otel") if otel is not None else self.settings.otel, os.environ)
        if export is None:
            return None
        from ..telemetry.otlp import OtlpSender, TelemetryMissing
        from ..telemetry.spans import Conventions
        from ..telemetry.tracing import TracingOracle

        scrubbed = functools.partial(scrub, secrets=header_values())
        sender = self._senders.get(export.endpoint)
        if sender is None:
            try:
                sender = self._senders[export.endpoint] = OtlpSender(export.endpoint, scrubbed)
            except TelemetryMissing as missing:
                if otel is not None or self.settings.otel is not None:
                    raise  # asked for here: said in a line
                # Only the environment asks (set for other programs, perhaps): the runs go on untraced, said once.
                if not self._untraced:
                    log.warning("mkl: %s; runs are not traced", missing)
                self._untraced = True
                return None
        conventions = Conventions(export.capture, export.latest, scrubbed)
        return lambda oracle: TracingOracle(oracle, sender, conventions)

    def can_call(self, script: Any = None, model: str | None = None) -> bool:
        """Whether a run made here could make its calls: a script that can be read here, or a model."""
        return oracles.readable(script) or self.model_factory is not None or self.model_config(model).configured

    def oracle(
        self,
        script: Any = None,
        model: str | None = None,
        *,
        needs_model: bool = False,
        machine: Machine | None = None,
        executor: str | None = None,
        otel: str | None = None,
    ) -> Oracle:
        """The oracle of one run: a script, the model factory, or the configured model (traced as
        :meth:`tracing` says)."""
        made = self.oracle_factory(
            script, model, needs_model=needs_model, machine=machine, executor=executor, otel=otel
        )
        return made()
