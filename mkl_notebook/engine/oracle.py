"""The oracle boundary: everything non-deterministic a run needs passes through here.

Requests and answers are immutable records: ``NamedTuple`` classes, which are built in
under a microsecond (a frozen dataclass takes about 2.5 µs, and a journaled step builds
several of them).

The engine is a pure function of the answers it gets from one :class:`Oracle`
(LLM produce and judge calls, host hook verdicts, tool observations and human
replies).  Each request names its *position*, a stable path such as
``root/7:draft#2/produce``, so a journal can record answers and replay them.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, NamedTuple

from ..errors import MklError

Effect = Literal["read", "effect"]


class ProduceRequest(NamedTuple):
    """Ask a model to write a state's output."""

    position: str
    machine: str
    state: str
    tier: str
    structure: str  # the output contract, "(unspecified)" when the state has none
    execution: str | None  # operational policy
    user: str  # rendered prompt plus repair feedback, fences included
    fenced: bool  # the prompt carries untrusted data: add the untrusted-data rule
    reason: bool  # ask for a private scratchpad as well
    temperature: float
    ask_human: bool = False
    conversation: tuple[tuple[str, str], ...] = ()  # earlier (role, text) turns of this produce call

    @property
    def kind(self) -> Literal["produce"]:
        return "produce"


class JudgeRequest(NamedTuple):
    """Ask a model which of ``conditions`` is the first true one (or none)."""

    position: str
    machine: str
    state: str
    tier: str
    conditions: tuple[str, ...]
    output: str
    reasoning: str | None
    context_json: str  # the run context as JSON, what the judge sees as evidence
    nonce: str  # fences the judge's evidence

    @property
    def kind(self) -> Literal["judge"]:
        return "judge"


class HookRequest(NamedTuple):
    position: str
    machine: str
    state: str
    name: str
    context_json: str
    output: str

    @property
    def kind(self) -> Literal["hook"]:
        return "hook"


class ToolRequest(NamedTuple):
    position: str
    machine: str
    state: str
    name: str
    input_json: str
    effect: Effect
    idempotent: bool = True
    attempt: int = 0
    delay: float = 0.0  # seconds to wait before a live call (retry backoff); never spent on replay
    # The same for every attempt of this call, on every copy of the run: what a tool forwards to a service
    # that deduplicates (a payment API's idempotency header), so a call made twice lands once.
    idempotency_key: str | None = None

    @property
    def kind(self) -> Literal["tool"]:
        return "tool"

    @property
    def input(self) -> dict[str, Any]:
        decoded: dict[str, Any] = json.loads(self.input_json)
        return decoded


class ReplyRequest(NamedTuple):
    """A person's reply to an escalate gate that suspends for them."""

    position: str
    machine: str
    state: str  # the handler state the run continues in
    ask: str | None
    reply_to: str
    question: str | None = None  # a model-initiated question (ask_human), shown as model output
    about: str | None = None  # what the gate decided on, as the person is shown it: their answer is to it

    @property
    def kind(self) -> Literal["reply"]:
        return "reply"


OracleRequest = ProduceRequest | JudgeRequest | HookRequest | ToolRequest | ReplyRequest


class ProduceAnswer(NamedTuple):
    text: str
    reasoning: str | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    truncated: bool = False
    model: str | None = None
    cost_usd: float | None = None  # from the provider's price list; None when the model's price is unknown
    seconds: float | None = None  # how long the live call took (journaled, so a replay shows it too)


class JudgeAnswer(NamedTuple):
    """``choice`` is 0-based into the batch; ``len(conditions)`` is the none option.

    ``choice`` None is an anomaly (unparseable reply); ``raw`` then says why.
    """

    choice: int | None
    raw: str | None = None
    parse: str | None = None  # "bare" or "last-number" when the reply was not clean JSON
    input_tokens: int = 0
    output_tokens: int = 0
    model: str | None = None
    cost_usd: float | None = None
    seconds: float | None = None


ModelAnswer = ProduceAnswer | JudgeAnswer

Partial = Callable[[str], None]
"""Told the text of a live answer so far as it arrives (``""`` when a call that shows no text starts)."""


# How the name that answered is established (a reply record's ``established``), and how views say it.
ESTABLISHED_BY = {
    "os-account": "OS account",  # the operating system account the answering process runs as
    "jupyterhub": "JupyterHub",  # JUPYTERHUB_USER, set by the Hub for the user's own server
    # The server's user as a page passed it on, in journals written before it was recorded as claimed (a page's
    # word is any kernel client's to give), and read as it was written.
    "jupyter-server": "Jupyter server, as the page reported it",
}


class HumanReply(NamedTuple):
    """A person's reply, and (as the journal keeps them) who gave it, when, through what, and the note they
    wrote beside it (the decision is ``value``: a note never changes it)."""

    value: Any
    by: str | None = None
    via: str | None = None  # "form", "api", "notebook", "cli", "notebook-file" or "script"
    at: float | None = None  # seconds since the epoch
    note: str | None = None  # text the person wrote beside the decision (None: they wrote none)
    established: str | None = None  # how ``by`` is known ("os-account", "jupyterhub", "jupyter-server")
    claimed: str | None = None  # a name given only as the replier's word


def note_path(reply_to: str) -> str:
    """Where the note given with a reply lands in the context: beside the reply, its last part with ``_note``
    after it (``refund_approval`` → ``refund_approval_note``, ``human.reply`` → ``human.reply_note``)."""
    return f"{reply_to}_note"


class OracleError(MklError):
    """The oracle could not answer; the run halts with ``error`` (no step is recorded).

    ``error`` is the whole halt reason, e.g. ``state-error: no scripted produce …``
    or ``provider-error: rate limited``.  In a fan-out branch the marker shows
    ``detail`` (the reason without a leading ``state-error: ``).
    """

    def __init__(self, error: str, *, suspendable: bool = False, called: bool = False) -> None:
        super().__init__(error)
        self.error = error
        self.suspendable = suspendable  # provider outages may suspend a suspendable run instead
        # A call was made and it failed (a provider's error): part of the run's history, replayed as it was.
        # A call that could not be made at all (no model for a tier, a script without that answer) is not.
        self.called = called

    @property
    def detail(self) -> str:
        return self.error.removeprefix("state-error: ")


class RunInterrupted(MklError):
    """Stops the whole run at once; the engine never turns it into a halt or a branch marker.

    (:class:`CannotAnswer` is the one the engine catches: the run suspends where it stands.
    A journal raises its own kinds, such as a tool call left in doubt.)
    """


class OutcomeUnknown(RunInterrupted):
    """A call with effects was started and whether it ran cannot be known (its process or worker was lost):
    the run must not guess. A journal records it as *in doubt*, for a person to settle."""

    def __init__(self, position: str, tool: str, state: str) -> None:
        super().__init__(f"tool '{tool}' at state '{state}' was started and may or may not have run")
        self.position = position
        self.tool = tool
        self.state = state


class AwaitingHuman(RunInterrupted):
    """Raised by an oracle that has no reply yet for a :class:`ReplyRequest`."""


class CannotAnswer(RunInterrupted):
    """The oracle cannot make this call here at all (no model is configured where the run is resumed).

    Unlike a failed call, this says nothing about the run: the engine suspends it where
    it is (suspendable or not), nothing is recorded for the call, and it can be resumed
    where the call can be made.
    """

    def __init__(self, reason: str, state: str) -> None:
        super().__init__(reason)
        self.reason = reason
        self.state = state


class Advanced(NamedTuple):
    """What one advance of a durable run did, as its journal tells it once written: what an oracle that exports
    traces is told (see :meth:`Oracle.advanced`)."""

    run_id: str
    machine: str  # the run's root machine
    trace: tuple[str, str] | None  # the run's trace id and the id of its own span (hex), from its journal
    started: float  # when the run started (its start record)
    status: str  # how the advance ended: suspended, done, halt or in_doubt
    error: str | None
    ended: float  # when the advance ended
    decided: tuple[dict[str, Any], ...] = ()  # the human gates it decided (see ``durable.reading.gates_decided``)
    new_trace: bool = False  # the run's trace (or its latest re-run) began with this advance
    rerun: int = 0  # how many times the run was started again with a changed setup: each time, spans afresh
    wrote: bool = True  # it appended records (a pure replay that ends as before appends none)


class Oracle(ABC):
    """The single interface through which a run meets the world."""

    traced = False  # whether runs it answers keep a trace id in their journal, and are told of each advance

    @abstractmethod
    def ask(self, request: OracleRequest) -> Any:
        """Answer one request: ProduceAnswer, JudgeAnswer, bool (hook), observation (tool) or HumanReply."""

    def stream(self, request: OracleRequest, partial: Partial) -> Any:
        """Answer ``request`` like :meth:`ask`, telling ``partial`` the answer's text as it arrives.

        Oracles that cannot stream answer at once, and ``partial`` hears nothing.
        """
        return self.ask(request)

    def remote_call(self, request: OracleRequest) -> Callable[[], Any] | None:
        """``request``'s call as a self-contained function that makes it anywhere (another process, another
        machine) and returns the answer :meth:`ask` would; None when it can only be made here.

        An executor ships it (it must pickle, with cloudpickle); the run and its journal stay here.
        """
        return None

    def replayed(self, request: OracleRequest) -> None:
        """Told when a journal answered ``request`` instead of this oracle (scripts keep their place)."""
        return None

    def advanced(self, advance: Advanced) -> None:
        """Told what an advance of a durable run did once its journal is written (only when :attr:`traced`)."""
        return None

    @property
    def waits(self) -> bool:
        """Whether an answer may wait on something outside this process: a model API, a tool, a sleep.

        Fan-out branches then run on threads so that their waits overlap.  An oracle
        that computes every answer in-process says False: under the GIL threads would
        only add switching, so its branches run one after another, in order.
        """
        return True

    def has_hook(self, name: str) -> bool:
        return False

    def has_tool(self, name: str) -> bool:
        return False

    def tool_effect(self, name: str) -> Effect | None:
        """The class the host declared for a tool, if any."""
        return None


@dataclass
class Usage:
    input_tokens: int = 0
    output_tokens: int = 0

    def add(self, input_tokens: int, output_tokens: int) -> None:
        self.input_tokens += input_tokens
        self.output_tokens += output_tokens

    @property
    def total(self) -> int:
        return self.input_tokens + self.output_tokens

    def as_dict(self) -> dict[str, int]:
        return {"input_tokens": self.input_tokens, "output_tokens": self.output_tokens}


_CONTEXT_ENCODER = json.JSONEncoder(ensure_ascii=False, default=str)  # configured once: json.dumps builds one a call


def context_json(ctx: Mapping[str, Any]) -> str:
    """The run context as the judge and hooks see it (non-ASCII kept; values JSON cannot hold become text)."""
    return _CONTEXT_ENCODER.encode(ctx)
