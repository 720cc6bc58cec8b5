"""What each use case is asked, as one object: start a run, continue one, run a machine over rows.

Both front ends build these from the flags of one table (:mod:`.flags`); the Python API takes the same
fields as keyword arguments (``mkl_notebook.run("refund", script=..., hitl="all")``), checked into the same
object, so an option is spelled, defaulted and documented once. What several requests share (a run's limits,
where its calls are answered) is a base of each.
"""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypedDict, TypeVar

from ..durable.places import Place
from ..durable.runs import Observer, Resolution
from ..lang.model import Machine
from .defaults import DEFAULT_CONCURRENCY
from .errors import UsageProblem
from .flags import hitl_choice


@dataclass(frozen=True, kw_only=True)
class Limits:
    """A run's budgets, as flag text or numbers (checked where they are used): steps, tokens, US dollars."""

    max_steps: int | str | None = None
    max_tokens: int | str | None = None
    max_cost: float | str | None = None


class CallsMade(TypedDict):
    """Where a run's calls are made (``executor``) and where its traces go (``otel``)."""

    executor: str | None
    otel: str | None


@dataclass(frozen=True, kw_only=True)
class Answering:
    """Where a run's calls are answered: scripted answers (a file or a dict), a litellm model, where the
    calls are made (``threads``, ``dask``, ``dask://ADDRESS``; None: the setting), and where the run's traces
    are exported (``otel``: an OTLP/HTTP endpoint, or ``off``; None: the setting, else the environment's)."""

    script: Any = None
    model: str | None = None
    executor: str | None = None
    otel: str | None = None

    def calls_made(self) -> CallsMade:
        """Where the calls are made and traced, as ``Equipment.oracle`` takes them."""
        return {"executor": self.executor, "otel": self.otel}


@dataclass(frozen=True, kw_only=True)
class StartRequest(Limits, Answering):
    """Start (or replay) a run: its id (None: a new one), the host values laid under its context, whether every
    escalate gate suspends (``hitl``: ``all``/``none``; None: the setting), what a budget running out does
    (``suspend``), and how it meets the run's copies in reach (see ``Workspace.start``)."""

    id: str | None = None
    input: Mapping[str, Any] | None = None
    hitl: str | None = None
    suspend: bool = False
    fresh: bool = False
    retry: bool = False
    notebook: str | None = None
    trust_file: bool = False
    anew: bool = False
    on_untrusted_flow: str = "report"
    ask_human: bool = False
    approvers: str | Sequence[str] | None = None
    deadline: str | int | None = None  # a question's deadline (``30m``, or seconds); None: the settings'
    on_timeout: str | None = None  # reject, approve or escalate:NAME; None: the settings', else reject
    remind_after: str | int | None = None
    notify: str | Sequence[str] | None = None  # channels a new question is announced on (``--notify``)
    observer: Observer | None = None


@dataclass(frozen=True, kw_only=True)
class ContinueRequest(Limits, Answering):
    """Continue a run: a person's ``reply`` (or ``set_values``, ``--set PATH=VALUE`` parsed) to the ``question``
    it names, ``by`` whom and through what (``via``), with a ``note``; new budgets; or a tool call in doubt
    settled (``resolve``). ``place`` is the notebook cell asking; ``pinned`` keeps the machines the run started
    with, ``known`` adds machines to read it with, ``force`` goes on though a machine file changed. The
    answering fields serve ``Workspace.resume``, which makes the oracle; a handle already holds one."""

    reply: Any = None
    set_values: Mapping[str, Any] | None = None
    question: str | None = None
    by: str | None = None
    via: str = "api"
    note: str | None = None
    resolve: str | Resolution | None = None
    observer: Observer | None = None
    place: Place | None = None
    pinned: bool = False
    force: bool = False
    known: Mapping[str, Machine] | None = None
    trust_file: bool = False  # (a run resumed from a file: take it up though no key trusted here signed it)

    def said(self) -> dict[str, Any]:
        """What tells this request from another a notebook cell made (the input of its digest): what it answers
        and gives, never who or through what."""
        resolve = self.resolve
        return {
            "reply": self.reply,
            "set": dict(self.set_values or {}),
            "question": self.question,
            **({"note": self.note} if self.note is not None else {}),  # (absent otherwise: earlier requests match)
            "max_steps": self.max_steps,
            "max_tokens": self.max_tokens,
            **({"max_cost": self.max_cost} if self.max_cost is not None else {}),
            "resolve": resolve if isinstance(resolve, str) or resolve is None else [resolve.action, resolve.value],
        }


@dataclass(frozen=True, kw_only=True)
class MapRequest(Limits, Answering):
    """Run a machine once per row: the batch's ``id`` (default: the machine's name), the ``key`` column naming
    each row's run, values every row gets (``input``), ``concurrency`` rows at a time, and ``progress(done,
    total)`` told as rows finish."""

    id: str | None = None
    key: str | None = None
    input: Mapping[str, Any] | None = None
    hitl: str | None = None
    suspend: bool = False
    fresh: bool = False
    concurrency: int = DEFAULT_CONCURRENCY
    approvers: str | Sequence[str] | None = None
    notify: str | Sequence[str] | None = None
    progress: Callable[[int, int], None] | None = None


@dataclass(frozen=True, kw_only=True)
class InboxRequest:
    """Which waiting questions an inbox lists: those in the notebooks and stores under ``folders``, in the
    ``stores`` named, and in the ``configured`` store (``$MKL_STORE``, a kernel's store; None: none), kept when
    they pass every filter: ``mine`` (questions ``via`` this front end's person may answer), ``machine``,
    ``older_than`` (a duration, e.g. ``30m``), ``overdue``."""

    folders: Sequence[str] = (".",)
    stores: Sequence[str] = ()
    configured: str | None = None
    mine: bool = False
    machine: str | None = None
    older_than: str | None = None
    overdue: bool = False
    via: str = "cli"


Request = TypeVar("Request", StartRequest, ContinueRequest, MapRequest, InboxRequest)


def asked(kind: type[Request], request: Request | None, options: Mapping[str, Any]) -> Request:
    """The request a use case was given: ``request`` (its fields replaced by any of ``options``), or one of
    ``kind`` made of ``options`` alone. An option the request does not have is refused, naming it."""
    names = {field.name for field in dataclasses.fields(kind)}
    unknown = sorted(set(options) - names)
    if unknown:
        raise UsageProblem(
            f"{kind.__name__} has no option {', '.join(map(repr, unknown))}; it takes {', '.join(sorted(names))}"
        )
    if request is None:
        return kind(**options)
    return dataclasses.replace(request, **options) if options else request


_GIVEN = frozenset({"id", "input", "set_values", "hitl", "observer", "progress", "place", "known"})


def from_flags(
    kind: type[Request], args: argparse.Namespace, text: Callable[[Any], Any] = lambda value: value, **given: Any
) -> Request:
    """A request of ``kind`` from a command's parsed flags (:mod:`.flags`): each field from the flag of its name,
    text read through ``text`` (a notebook's ``$name`` and ``{expr}``), ``hitl`` from ``--hitl``/``--no-hitl``;
    ``given`` (what the front end alone can say: the run id, host values, a reply's ``--set``, an observer)
    over them."""
    values: dict[str, Any] = {}
    for field in dataclasses.fields(kind):
        name = field.name
        if name in _GIVEN or not hasattr(args, name):
            continue
        value = getattr(args, name)
        if isinstance(value, list):  # (a repeatable flag: each value read as one)
            value = [text(item) if isinstance(item, str) else item for item in value]
        values[name] = text(value) if isinstance(value, str) else value
    if any(field.name == "hitl" for field in dataclasses.fields(kind)):
        values["hitl"] = hitl_choice(args)
    return asked(kind, None, {**values, **given})
