"""The typed shape of each kind of journal record (what :mod:`durable.records` builds, and
:mod:`durable.reading` reads back): one ``TypedDict`` per kind, with the keys the journals already on disk use.
"""

from __future__ import annotations

from typing import Any, Literal, TypedDict

ResolveAction = Literal["completed", "retry", "abort"]


class Pin(TypedDict):
    """A machine a run used: its hash and its whole source."""

    sha256: str
    source: str


class Setup(TypedDict):
    """What a run is started with; a re-run that changes any of it records a ``rerun``."""

    root: str
    machines: dict[str, Pin]
    input: dict[str, Any]
    context: dict[str, Any]
    options: dict[str, Any]


class StartRecord(Setup):
    t: Literal["start"]
    run: str
    secret: str  # hex; fence nonces are keyed by it
    package: str
    time: float
    origin: dict[str, Any]


class _AnswerKeys(TypedDict):
    t: Literal["answer"]
    pos: str
    fp: str
    kind: str


class AnswerRecord(_AnswerKeys, total=False):
    answer: dict[str, Any]
    usage: list[int]  # [input tokens, output tokens], only when non-zero
    cost_usd: float  # what a model call cost, when its price is known
    seconds: float  # how long a live model call took, when it was timed
    name: str  # the tool or hook
    effect: str  # the tool's class when it ran
    error: str  # what the host tool or hook raised, or how a model call failed (replayed as that failure)
    suspendable: bool  # a failed model call a suspendable run suspends on (a provider outage)
    resolved: bool  # the answer a person gave for an in-doubt call


class IntentRecord(TypedDict):
    t: Literal["intent"]
    pos: str
    fp: str
    name: str


class InvalidatedRecord(TypedDict):
    t: Literal["invalidated"]
    pos: str
    old: str | None
    new: str


class _ReplyKeys(TypedDict):
    t: Literal["reply"]
    pos: str
    reply_to: str | None
    value: Any


class ReplyRecord(_ReplyKeys, total=False):
    by: str  # who answered: the established name (journals before ``established`` hold the name as claimed)
    established: str  # how ``by`` is known: one of ESTABLISHED_BY (absent: only the replier's word says it)
    claimed: str  # a name the replier gave (``--as``, ``user=``, ``by=``) that no one established
    via: str  # through what: form, api, notebook, cli, notebook-file, script
    question: str  # the id of the question answered (run, position and the text shown)
    time: float
    about: str  # what the question was about, as the person was shown it (the output the gate decided on)
    note: str  # text the person wrote beside their decision (absent: none; journals before notes have none)
    approvers: list[str]  # the rule it was taken under: who the run let answer (absent: anyone)


class _PolicyKeys(TypedDict):
    t: Literal["policy"]
    pos: str
    question: str  # the id of the question decided
    action: str  # reject, approve or escalate
    rule: dict[str, Any]  # the run's deadline rule: deadline (seconds), on_timeout, remind_after
    digest: str  # sha256 of the rule's canonical JSON
    time: float


class PolicyRecord(_PolicyKeys, total=False):
    reply_to: str | None
    value: str  # the decision the gate is given (approve or reject); absent for an escalation
    escalate_to: str  # the one approver an escalation asks again
    set_by: str  # who set the rule: the run's starter, as its journal says
    about: str  # what the question was about, as it was shown


class _SuspendKeys(TypedDict):
    t: Literal["suspend"]
    reason: str | None
    at: str | None
    ask: str | None
    reply_to: str | None
    question: str | None
    pos: str | None  # the position of the awaited reply
    calls: dict[str, int]
    time: float


class PlaceTag(TypedDict, total=False):
    """The notebook cell an advance was asked for from (see :mod:`durable.places`)."""

    cell: str
    request: str  # digest of the cell's request; absent for a reply given in the cell's form


class SuspendRecord(_SuspendKeys, total=False):
    failed: str  # the position of the failed call the advance stopped on (a resume makes it again)
    machine: str  # suspended inside this called machine
    place: PlaceTag
    about: str  # what the awaited reply is about (an escalate gate's state's output, as shown)
    pinned: str  # a digest of the setup in force (machines, input, context): part of the question's identity


class _FinishKeys(TypedDict):
    t: Literal["finish"]
    status: str
    error: str | None
    at: str | None
    calls: dict[str, int]
    time: float


class FinishRecord(_FinishKeys, total=False):
    failed: str  # the position of the failed call the run halted on
    pos: str  # of the tool call in doubt
    tool: str
    place: PlaceTag


class _ResumeKeys(TypedDict):
    t: Literal["resume"]
    time: float


class ResumeRecord(_ResumeKeys, total=False):
    max_steps: int
    cost_budget: int
    max_cost: float  # a new limit in US dollars
    budgets: dict[str, int]  # a called machine's new budget, by name
    retry: list[str] | bool  # failed calls to make again: these positions, or (True) every one


class ResolveRecord(TypedDict):
    t: Literal["resolve"]
    pos: str | None
    action: str
    value: Any
    time: float


class _RerunKeys(TypedDict):
    t: Literal["rerun"]
    time: float


class RerunRecord(_RerunKeys, total=False):
    root: str
    machines: dict[str, Pin]
    input: dict[str, Any]
    context: dict[str, Any]
    options: dict[str, Any]


class SignRecord(TypedDict):
    """The signature of whoever appended the records since the previous one (see :mod:`checkpoints.seals`)."""

    t: Literal["sign"]
    key: str  # ed25519:BASE64
    by: str  # the name the key's owner signs as
    sig: str  # base64 Ed25519 signature over the chain digest of every record before this one
    time: float


class NotifyRecord(TypedDict):
    """A notification is about to be sent: written before the send, so a sender that finds it without its
    ``notified`` outcome knows a send may have left, and sends again with the same key."""

    t: Literal["notify"]
    key: str  # the idempotency key: the question id and the channel digest, hashed
    channel: str  # the digest that names the channel (the channel itself is never journaled)
    question: str
    time: float


class _NotifiedKeys(TypedDict):
    t: Literal["notified"]
    key: str
    outcome: Literal["sent", "failed"]
    time: float


class NotifiedRecord(_NotifiedKeys, total=False):
    reason: str  # why a send failed (no secret of the channel in it)


class TraceRecord(TypedDict):
    """The run's trace, written the first time a run is advanced with trace export on (see
    :mod:`mkl_notebook.telemetry`): every advance after it, in any process, exports its spans into this one trace.
    """

    t: Literal["trace"]
    trace_id: str  # 32 hex digits, the W3C trace id
    span_id: str  # 16 hex digits: the run's own span (``invoke_workflow``), the parent of its top-level spans
    time: float


Record = (
    StartRecord
    | AnswerRecord
    | IntentRecord
    | InvalidatedRecord
    | ReplyRecord
    | PolicyRecord
    | SuspendRecord
    | FinishRecord
    | ResumeRecord
    | ResolveRecord
    | RerunRecord
    | SignRecord
    | NotifyRecord
    | NotifiedRecord
    | TraceRecord
)
