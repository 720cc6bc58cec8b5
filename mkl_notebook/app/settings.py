"""A workspace's settings: where runs are kept, when they wait for people, who answers, where calls are made,
and which models answer; each value checked once, here, whether it came from a flag or ``%mkl config``."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from ..durable.store_names import DEFAULT_STORE_NAME, DURABILITY, STORE_ENV, is_server_store, public_store
from ..providers.secrets import shown_url
from ..telemetry.switch import check_endpoint
from .defaults import DURABILITY_ENV
from .errors import UsageProblem
from .values import parse_budget, parse_cost

# The command line reads this module to build its parser (`mkl --help`): what checks a setting (executors,
# models, the machine library) is imported when a setting is checked.
if TYPE_CHECKING:
    from ..engine.options import RunOptions
    from ..providers.config import ModelConfig
    from .channels import Channel
    from .requests import MapRequest, StartRequest

DEFAULT_STORE = Path(DEFAULT_STORE_NAME)  # (as durable.stores has it, without loading the store)
HITL_MODES = ("none", "asking", "all")
MODEL_SETTINGS = ("model", "fast", "balanced", "reasoning", "judge", "api_base", "timeout", "retries")
RUN_SETTINGS = (
    "store",
    "durability",
    "hitl",
    "user",
    "approvers",
    "deadline",
    "on_timeout",
    "remind_after",
    "notify",
    "max_workers",
    "executor",
    "max_model_calls",
    "library",
    "otel",
)
APPROVERS_ENV = "MKL_APPROVERS"  # who may answer the questions of runs started here (a hub's one setting)
# A deadline rule for the runs started here (a hub's settings too): see app.deadlines.
DEADLINE_ENVS = {"deadline": "MKL_DEADLINE", "on_timeout": "MKL_ON_TIMEOUT", "remind_after": "MKL_REMIND_AFTER"}
NOTEBOOK_SETTINGS = "this notebook (%mkl config, %config MklMagics)"  # where %mkl models says a model was set


def command_api_base(address: str | None) -> str | None:
    """A server address a printed command may repeat: None when it carries a credential or a key."""
    return address if address and shown_url(address) == address else None


def check_durability(value: str, given_as: str) -> str:
    """``durability``: what a run's records survive (``process``: a killed process, and a power cut for a person's
    answers and a tool's intents; ``power``: a power cut, every record). ``given_as`` names where it was given."""
    if value not in DURABILITY:
        raise UsageProblem(f"{given_as} must be one of {', '.join(DURABILITY)}, not {value!r}")
    return value


def store_location(value: str) -> Path | str:
    """A store as a setting holds it: a server's URL as it was given (a path would fold its ``//``), else a path."""
    return value.strip() if is_server_store(value.strip()) else Path(value)


def printed_store(location: str | None) -> str | None:
    """A ``--store`` as a printed command or message names it: a server's URL without its password."""
    return public_store(location) if location else location


def default_store() -> Path | str:
    """The store when none is named: ``$MKL_STORE`` (a path or a ``postgresql://`` URL), else ``.mkl/runs.sqlite``."""
    given = os.environ.get(STORE_ENV, "").strip()
    return store_location(given) if given else DEFAULT_STORE


def check_hitl(value: str) -> str:
    """``hitl``: which escalate gates suspend for a person (none, those with an ``ask:``, all)."""
    if value not in HITL_MODES:
        raise UsageProblem(f"hitl must be one of {', '.join(HITL_MODES)}, not {value!r}")
    return value


@dataclass
class Settings:
    """What every run of a workspace shares unless a run says otherwise."""

    store: Path | str = field(default_factory=default_store)  # a file's path, or a postgresql:// URL (a str)
    hitl: str = "asking"  # notebooks suspend at escalate gates that carry an `ask:`; the command line: "none"
    user: str | None = None  # who answers from here (default: $JUPYTERHUB_USER, else the OS user)
    max_workers: int | None = None  # fan-out branches at once
    executor: str | None = None  # None (threads here), "dask", or "dask://ADDRESS"
    max_model_calls: int | None = None  # model calls in flight at once across a Dask cluster
    models: dict[str, Any] = field(default_factory=dict)  # tier models and their server, over files and environment
    models_source: str = NOTEBOOK_SETTINGS  # where ``models`` were given, as %mkl models says
    library: tuple[Path, ...] | None = None  # folders `call:` searches before the shipped library; None: the env's
    durability: str | None = None  # "process" or "power" (see DURABILITY); None: $MKL_DURABILITY, else "process"
    approvers: tuple[str, ...] | None = None  # who may answer runs started here; None: $MKL_APPROVERS, else anyone
    # The deadline rule of runs started here, as given (checked when set): deadline, on_timeout, remind_after;
    # one not set here is read from its DEADLINE_ENVS variable.
    deadlines: dict[str, str] = field(default_factory=dict)
    # Channels new questions are announced on, as given (a webhook's URL is a secret: never in a repr); None:
    # $MKL_NOTIFY, else none.
    notify: tuple[str, ...] | None = field(default=None, repr=False)
    # Where runs started or continued here export their traces (an OTLP/HTTP endpoint, or "off"); None: the
    # OTEL_EXPORTER_OTLP_* variables (see telemetry.switch). Its query may carry a key: never in a repr.
    otel: str | None = field(default=None, repr=False)

    @classmethod
    def from_flags(
        cls,
        *,
        store: str | None = None,
        hitl: bool = False,
        model: str | None = None,
        api_base: str | None = None,
        executor: str | None = None,
        max_model_calls: Any = None,
        library: str | None = None,
        durability: str | None = None,
    ) -> Settings:
        """The settings of one ``mkl`` command: escalate gates suspend only with ``--hitl`` (the language's
        default), models from ``--model`` and ``--api-base``, calls capped only on a Dask cluster, library
        folders from ``--library`` (else ``$MKL_LIBRARY_PATH``), durability from ``--durability`` (else
        ``$MKL_DURABILITY``)."""
        from ..lang.stdlib import library_path
        from .executors import check_executor

        chosen = check_executor(executor)
        limit = parse_budget("max_model_calls", "--max-model-calls", max_model_calls)
        if chosen is None and limit is not None:
            raise UsageProblem("--max-model-calls caps calls across a Dask cluster: give --executor dask too")
        given = {key: value for key, value in (("model", model), ("api_base", api_base)) if value is not None}
        return cls(
            store=store_location(store) if store else default_store(),
            hitl="all" if hitl else "none",
            executor=chosen,
            max_model_calls=limit,
            models=given,
            models_source="flags",
            library=None if library is None else library_path(library, "--library"),
            durability=None if durability is None else check_durability(durability, "--durability"),
        )

    def change(self, key: str, value: str) -> None:
        """Set one setting from its text (``%mkl config key=value``); a bad value is refused and nothing changes."""
        from ..lang.stdlib import library_path
        from .executors import check_executor
        from .oracles import model_config

        if key == "store":
            from ..durable.network_fs import check_store_place

            chosen = store_location(value) if value.strip() else default_store()
            check_store_place(chosen)  # refused now, not at the next run: a store is not written there
            self.store = chosen
        elif key == "durability":
            self.durability = check_durability(value, "durability")
        elif key == "hitl":
            self.hitl = check_hitl(value)
        elif key == "user":
            self.user = value or None
        elif key == "approvers":
            from .replies import parse_approvers

            self.approvers = parse_approvers(value, "approvers") if value.strip() else ()
        elif key in DEADLINE_ENVS:
            from .rules import check_rule_value

            check_rule_value(key, value, key)
            self.deadlines[key] = value.strip()
        elif key == "notify":
            from .channels import parse_channels

            self.notify = tuple(channel.given for channel in parse_channels(value, "notify"))
        elif key == "otel":
            self.otel = check_endpoint(value, "otel")
        elif key == "executor":
            self.executor = check_executor(value)
        elif key == "max_model_calls":
            self.max_model_calls = parse_budget("max_model_calls", None, value)
        elif key == "max_workers":
            self.max_workers = parse_budget("max_workers", None, value)
        elif key == "library":
            self.library = library_path(value, "library")
        elif key in MODEL_SETTINGS:
            candidate = {**self.models, key: value}
            model_config(candidate)  # a bad value is refused before it is kept
            self.models = candidate
        else:
            raise UsageProblem(f"unknown setting '{key}' (settings: {', '.join((*RUN_SETTINGS, *MODEL_SETTINGS))})")

    def library_folders(self) -> tuple[Path, ...]:
        """The folders ``call:`` searches before the shipped library: the ``library`` setting, else
        ``$MKL_LIBRARY_PATH`` (checked now: a folder that is not there is refused, naming it)."""
        from ..lang.stdlib import LIBRARY_PATH_ENV, library_path

        if self.library is not None:
            return self.library
        return library_path(os.environ.get(LIBRARY_PATH_ENV, ""), LIBRARY_PATH_ENV)

    def approvers_in_force(self) -> tuple[str, ...]:
        """Who may answer the questions of runs started here: the ``approvers`` setting, else ``$MKL_APPROVERS``
        (checked now), else anyone (empty)."""
        from .replies import parse_approvers

        if self.approvers is not None:
            return self.approvers
        return parse_approvers(os.environ.get(APPROVERS_ENV, "").strip() or None, f"${APPROVERS_ENV}")

    def start_options(self, asks: StartRequest | MapRequest, **more: Any) -> RunOptions:
        """What a run is started with, as a start or map request (``asks``) and these settings say; its approvers
        are the request's, else those in force here (:meth:`approvers_in_force`); a start's deadline rule, the
        request's, else the one in force here (:meth:`deadline_in_force`)."""
        import dataclasses

        from .replies import parse_approvers
        from .requests import StartRequest
        from .rules import with_rule

        options = run_options(
            max_steps=asks.max_steps,
            max_tokens=asks.max_tokens,
            max_cost=asks.max_cost,
            suspend=asks.suspend,
            hitl=asks.hitl or self.hitl,
            max_workers=self.max_workers,
            **more,
        )
        approvers = parse_approvers(asks.approvers, "--approvers") or self.approvers_in_force()
        options = dataclasses.replace(options, approvers=frozenset(approvers)) if approvers else options
        return with_rule(options, asks, self.deadline_in_force) if isinstance(asks, StartRequest) else options

    def deadline_in_force(self, key: str) -> str | None:
        """The ``deadline``, ``on_timeout`` or ``remind_after`` of runs started here, as text: the setting, else
        its environment variable (checked now, naming it), else None."""
        from .rules import check_rule_value

        if key in self.deadlines:
            return self.deadlines[key] or None
        given = os.environ.get(DEADLINE_ENVS[key], "").strip()
        return check_rule_value(key, given, f"${DEADLINE_ENVS[key]}") if given else None

    def notify_channels(self) -> tuple[Channel, ...]:
        """The channels new questions of runs started here are announced on: the ``notify`` setting, else
        ``$MKL_NOTIFY`` (checked now), else none."""
        from .channels import NOTIFY_ENV, parse_channels

        if self.notify is not None:
            return parse_channels(self.notify, "notify")
        return parse_channels(os.environ.get(NOTIFY_ENV, ""), f"${NOTIFY_ENV}")

    def store_durability(self) -> str:
        """What the store's records survive: the ``durability`` setting, else ``$MKL_DURABILITY`` (checked now,
        naming it when it is not a durability), else ``process``."""
        if self.durability is not None:
            return self.durability
        given = os.environ.get(DURABILITY_ENV, "").strip()
        return check_durability(given, f"${DURABILITY_ENV}") if given else "process"

    def model_config(self, model: str | None = None) -> ModelConfig:
        """Tier models from pyproject/mkl.toml, the environment, these settings, and a run's ``--model``."""
        from .oracles import model_config

        if model:
            return model_config({**self.models, "model": model}, "--model")
        return model_config(self.models, self.models_source)

    def lines(self) -> list[str]:
        """The settings as ``%mkl config`` shows them (a server address without its credentials)."""
        from ..lang.model import TIERS
        from .replies import who

        config = self.model_config()
        tiers = ", ".join(f"{tier}={config.model_for(tier) or '—'}" for tier in TIERS)
        capped = f" (at most {self.max_model_calls} model calls at once)" if self.max_model_calls else ""
        return [
            f"store = {public_store(str(self.store))}",
            f"durability = {self._durability_shown()}",
            f"hitl = {self.hitl}",
            f"user = {self.user or who()}",
            f"approvers = {self._approvers_shown()}",
            *(f"{key} = {self._deadline_shown(key)}" for key in DEADLINE_ENVS),
            f"notify = {self._notify_shown()}",
            f"max_workers = {self.max_workers or 'default'}",
            f"executor = {self.executor or 'threads'}{capped}",
            f"library = {self._library_shown()}",
            f"otel = {self._otel_shown()}",
            f"models ({config.source}): {tiers}; judge={config.judge or 'same as tier'}; "
            f"api_base={shown_url(config.api_base) or '—'}",
        ]

    def _library_shown(self) -> str:
        from ..lang.stdlib import LIBRARY_PATH_ENV

        if self.library is not None:
            return os.pathsep.join(map(str, self.library)) or "the shipped library only"
        given = os.environ.get(LIBRARY_PATH_ENV, "")
        return f"{given} (${LIBRARY_PATH_ENV})" if given.strip() else "the shipped library only"

    def _approvers_shown(self) -> str:
        if self.approvers is not None:
            return ", ".join(self.approvers) or "anyone"
        given = os.environ.get(APPROVERS_ENV, "").strip()
        return f"{given} (${APPROVERS_ENV})" if given else "anyone"

    def _deadline_shown(self, key: str) -> str:
        if key in self.deadlines:
            return self.deadlines[key] or "none"
        given = os.environ.get(DEADLINE_ENVS[key], "").strip()
        return f"{given} (${DEADLINE_ENVS[key]})" if given else "reject" if key == "on_timeout" else "none"

    def _notify_shown(self) -> str:
        """The channels in force, redacted (a webhook's URL is a secret: its path is never shown)."""
        from .channels import NOTIFY_ENV

        try:
            shown = ", ".join(channel.redacted for channel in self.notify_channels()) or "none"
        except UsageProblem:
            return f"not channels (${NOTIFY_ENV})"
        return shown if self.notify is not None or shown == "none" else f"{shown} (${NOTIFY_ENV})"

    def _otel_shown(self) -> str:
        """Where traces go, the address without its credentials, and whence that is known."""
        from ..telemetry.switch import export_of

        export = export_of(self.otel, os.environ)
        if export is None:
            return "off"
        shown = shown_url(export.endpoint) or "off"
        return shown if self.otel is not None else f"{shown} ($OTEL_EXPORTER_OTLP_*)"

    def _durability_shown(self) -> str:
        if self.durability is not None:
            return self.durability
        given = os.environ.get(DURABILITY_ENV, "").strip()
        return f"{given} (${DURABILITY_ENV})" if given else "process"


ON_UNTRUSTED_FLOW = ("report", "halt")


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
    from ..engine.options import DEFAULT_MAX_WORKERS, Hitl, RunOptions

    if on_untrusted_flow not in ON_UNTRUSTED_FLOW:
        raise UsageProblem(f"--on-untrusted-flow must be 'report' or 'halt', not {on_untrusted_flow!r}")
    return RunOptions(
        cost_budget=parse_budget("max_tokens", "--max-tokens", max_tokens),
        max_cost=parse_cost(max_cost),
        max_steps=parse_budget("max_steps", "--max-steps", max_steps),
        suspendable=suspend,
        hitl=cast(Hitl, check_hitl(hitl)),
        on_untrusted_flow="halt" if on_untrusted_flow == "halt" else "report",
        ask_human=ask_human,
        max_workers=max_workers or DEFAULT_MAX_WORKERS,
    )
