"""Journal records: one typed shape and one builder per kind, and the one reading of a run's status.

A journal is an append-only list of JSON objects, each with a kind ``t``:

- ``start``: run id, the setup (root machine, pinned machines, host values, options) and
  the per-run fence secret.
- ``answer``: an oracle answer at a position, with the fingerprint of its request (or the
  error a host tool or hook raised there).
- ``intent``: a non-idempotent tool is about to be called at a position.
- ``invalidated``: a recorded answer no longer matches its request (the machine or its
  input changed); the call is made anew.
- ``reply``: a person's answer at a gate's position.
- ``suspend`` / ``finish``: how the latest advance of the run ended.
- ``resume``: budgets raised for the next advance.
- ``resolve``: a person settled a tool call left in doubt (or, as a ``retry`` valued ``NOT_SENT``, the run
  withdrew the intent of a call that never left it).
- ``rerun``: the run was started again with a changed setup.
- ``sign``: whoever appended the records since the previous ``sign`` (or the start) vouches for
  them: their key, the name they sign as, and a signature over the history up to here.

Every record a journal gets is built here. The keys are those the journals already on
disk use, so old stores and notebooks read and replay unchanged.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, fields
from types import MappingProxyType
from typing import Any, Literal, TypedDict, cast

from ..engine.options import RunOptions
from ..engine.oracle import ESTABLISHED_BY, HumanReply, JudgeAnswer, ProduceAnswer
from ..engine.result import RunResult, question_id

FORMAT = "mkl-run/1"
NOTE_MAX = 4000  # characters of a person's note beside a reply: a longer one is refused, and nothing journaled

ResolveAction = Literal["completed", "retry", "abort"]
Status = Literal["running", "done", "halt", "suspended", "in_doubt"]


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


Record = (
    StartRecord
    | AnswerRecord
    | IntentRecord
    | InvalidatedRecord
    | ReplyRecord
    | SuspendRecord
    | FinishRecord
    | ResumeRecord
    | ResolveRecord
    | RerunRecord
    | SignRecord
)
ENDINGS = ("suspend", "finish")  # the kinds that end an advance
# The kinds no one can give again if a power cut took them: a person's answer, a person's settlement of a call
# in doubt, and the intent written before a non-idempotent tool runs (lost, the tool could run twice).
PRECIOUS = ("reply", "resolve", "intent")
SETUP_KEYS = ("root", "machines", "input", "context", "options")


# One encoder for every record: ``json.dumps`` with these arguments would build a new one per call.
_CANONICAL = json.JSONEncoder(sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)


def canonical(record: Any) -> str:
    """One stable JSON text per record: what digests and storage use."""
    try:
        return _CANONICAL.encode(record)
    except TypeError:  # a mapping whose keys are of several kinds (1 and "b") cannot be sorted as they are
        return _CANONICAL.encode(_text_keys(record))


def _text_keys(value: Any) -> Any:
    """``value`` with the keys of every mapping in it as the text JSON makes of them (1 as "1", None as "null"),
    so that they sort; keys that JSON would make the same text, or cannot make text of, are said plainly."""
    if isinstance(value, Mapping):
        keyed: dict[str, Any] = {}
        for key, item in value.items():
            if isinstance(key, str):
                text = key
            elif key is None or isinstance(key, (bool, int, float)):
                text = _CANONICAL.encode(key)
            else:
                raise TypeError(f"a mapping key must be text or a number, not {type(key).__name__} ({key!r:.60})")
            if text in keyed:
                raise TypeError(f"a mapping has two keys that are both {text!r} in JSON")
            keyed[text] = _text_keys(item)
        return keyed
    if isinstance(value, (list, tuple)):
        return [_text_keys(item) for item in value]
    return value


def common_prefix(held: Sequence[Mapping[str, Any]], given: Sequence[Mapping[str, Any]]) -> int:
    """How many leading records two copies of a history share (as JSON: a copy read back from a file or a
    store is the same record)."""
    shared = 0
    for mine, theirs in zip(held, given, strict=False):
        if mine != theirs and canonical(mine) != canonical(theirs):
            break
        shared += 1
    return shared


def chain_start() -> bytes:
    """The digest a journal's chain begins with (before its first record)."""
    return hashlib.sha256(FORMAT.encode()).digest()


def chain_step(digest: bytes, record: Any) -> bytes:
    """The chain digest after ``record``, given the one before it: each record's place in its history."""
    return hashlib.sha256(digest + canonical(record).encode("utf-8")).digest()


def setup_digest(setup: Mapping[str, Any]) -> str:
    """A short digest of what a run is set up with: its root, its machines (as their pinned hashes), its
    input and context. A question asked in it names it, so an edit of any of them asks a new question."""
    machines = setup.get("machines") or {}
    shape = {
        "root": setup.get("root"),
        "machines": {name: pin.get("sha256") if isinstance(pin, Mapping) else None for name, pin in machines.items()},
        "input": setup.get("input"),
        "context": setup.get("context"),
    }
    return hashlib.blake2b(canonical(shape).encode("utf-8", "surrogatepass"), digest_size=8).hexdigest()


def chain_digest(records: Iterable[Any]) -> bytes:
    """The chain digest of a whole journal: a change of any record, or of their order, changes it."""
    digest = chain_start()
    for record in records:
        digest = chain_step(digest, record)
    return digest


# -- builders -------------------------------------------------------------------------------


def start_record(run_id: str, setup: Setup, *, secret: bytes, package: str, origin: Mapping[str, Any]) -> StartRecord:
    return {
        "t": "start",
        "run": run_id,
        **setup,
        "secret": secret.hex(),
        "package": package,
        "time": time.time(),
        "origin": dict(origin),
    }


STARTED_WITH = ("script", "tools", "model")  # what a start record's origin keeps of the answers a run drew on


def started_with(start: Mapping[str, Any] | None) -> dict[str, str]:
    """The script file, tools file and model a run was started with, as its start record's ``origin`` keeps
    them (each only when given): what a command continuing the run names."""
    origin = (start or {}).get("origin")
    if not isinstance(origin, Mapping):
        return {}
    return {key: origin[key] for key in STARTED_WITH if isinstance(origin.get(key), str) and origin[key]}


def rerun_record(changes: Mapping[str, Any]) -> RerunRecord:
    """The parts of the setup that changed (all of it, or only the pinned machines)."""
    changed = {key: changes[key] for key in SETUP_KEYS if key in changes}
    return cast(RerunRecord, {"t": "rerun", **changed, "time": time.time()})


def encode_answer(answer: ProduceAnswer | JudgeAnswer) -> dict[str, Any]:
    """A model's answer as the JSON an ``answer`` record carries (its tokens go in ``usage``)."""
    if isinstance(answer, ProduceAnswer):
        data: dict[str, Any] = {"text": answer.text}
        if answer.reasoning is not None:
            data["reasoning"] = answer.reasoning
        if answer.truncated:
            data["truncated"] = True
        if answer.model:
            data["model"] = answer.model
        return data
    data = {"choice": answer.choice}
    for key in ("raw", "parse", "model"):
        value = getattr(answer, key)
        if value is not None:
            data[key] = value
    return data


def model_answer_record(position: str, fingerprint: str, answer: ProduceAnswer | JudgeAnswer) -> AnswerRecord:
    """A produce or judge answer, with the tokens it cost when it cost any."""
    kind = "produce" if isinstance(answer, ProduceAnswer) else "judge"
    record: AnswerRecord = {
        "t": "answer",
        "pos": position,
        "fp": fingerprint,
        "kind": kind,
        "answer": encode_answer(answer),
    }
    if answer.input_tokens or answer.output_tokens:
        record["usage"] = [answer.input_tokens, answer.output_tokens]
    if answer.cost_usd is not None:
        record["cost_usd"] = answer.cost_usd
    if answer.seconds is not None:
        record["seconds"] = round(answer.seconds, 3)
    return record


def host_answer_record(
    position: str,
    fingerprint: str,
    kind: str,
    value: Any,
    *,
    name: str,
    effect: str | None = None,
    resolved: bool = False,
) -> AnswerRecord:
    """A hook's verdict or a tool's observation (``resolved``: the value a person gave for an in-doubt call)."""
    record: AnswerRecord = {
        "t": "answer",
        "pos": position,
        "fp": fingerprint,
        "kind": kind,
        "answer": {"value": value},
        "name": name,
    }
    if effect is not None:
        record["effect"] = effect
    if resolved:
        record["resolved"] = True
    return record


def failed_answer_record(
    position: str, fingerprint: str, kind: str, *, name: str, error: str, effect: str | None = None
) -> AnswerRecord:
    """A host tool or hook raised: the failure is the answer, replayed as that failure."""
    record: AnswerRecord = {"t": "answer", "pos": position, "fp": fingerprint, "kind": kind, "name": name}
    record["error"] = error
    if effect is not None:
        record["effect"] = effect
    return record


def failed_call_record(position: str, fingerprint: str, kind: str, error: str, *, suspendable: bool) -> AnswerRecord:
    """A model call that was made and failed (a provider's error): replayed as that failure, with no call."""
    record: AnswerRecord = {"t": "answer", "pos": position, "fp": fingerprint, "kind": kind, "error": error}
    if suspendable:
        record["suspendable"] = True
    return record


def intent_record(position: str, fingerprint: str, name: str) -> IntentRecord:
    return {"t": "intent", "pos": position, "fp": fingerprint, "name": name}


def invalidated_record(position: str, old: str | None, new: str) -> InvalidatedRecord:
    return {"t": "invalidated", "pos": position, "old": old, "new": new}


def reply_record(
    position: str,
    reply_to: str | None,
    value: Any,
    *,
    by: str | None = None,
    via: str | None = None,
    question: str | None = None,
    about: str | None = None,
    note: str | None = None,
    established: str | None = None,
    claimed: str | None = None,
) -> ReplyRecord:
    """A person's answer at ``position``, with who gave it, through what, to which question, about what
    (the content they were shown: their answer replays only while it is unchanged), and the ``note`` they
    wrote beside it (kept apart from the value, which stays exactly the decision).

    ``established`` says how ``by`` is known (a key of :data:`ESTABLISHED_BY`; None: ``by`` is only claimed);
    ``claimed`` is a name the replier gave beside an established one (it never replaces it)."""
    if established is not None and established not in ESTABLISHED_BY:
        raise ValueError(f"unknown way a name is established: {established!r}")
    record: ReplyRecord = {"t": "reply", "pos": position, "reply_to": reply_to, "value": value}
    if about is not None:
        record["about"] = about
    if note is not None:
        record["note"] = note
    if by:
        record["by"] = by
    if by and established:
        record["established"] = established
    if claimed and (claimed != by or not established):
        record["claimed"] = claimed
    if via:
        record["via"] = via
    if question:
        record["question"] = question
    record["time"] = time.time()
    return record


def sign_record(key: str, by: str, signature: str, at: float) -> SignRecord:
    """The signature of whoever appended the records since the previous ``sign`` record (built by a signer,
    :meth:`checkpoints.seals.Signer.endorse`, over the chain digest of every record before it)."""
    return {"t": "sign", "key": key, "by": by, "sig": signature, "time": at}


def resume_record(
    *,
    max_steps: int | None = None,
    cost_budget: int | None = None,
    max_cost: float | None = None,
    budgets: Mapping[str, int] | None = None,
    retry: Sequence[str] | bool = False,
) -> ResumeRecord:
    """What a resume (or a re-run) changes before the run goes on: budgets, and the failed calls to make again."""
    record: ResumeRecord = {"t": "resume", "time": time.time()}
    if max_steps is not None:
        record["max_steps"] = max_steps
    if cost_budget is not None:
        record["cost_budget"] = cost_budget
    if max_cost is not None:
        record["max_cost"] = max_cost
    if budgets:
        record["budgets"] = dict(budgets)
    if retry:
        record["retry"] = True if retry is True else list(retry)
    return record


NOT_SENT = "not sent"  # the value of the retry journaled for an effect's call that never left this process


def resolve_record(position: str | None, action: ResolveAction, value: Any) -> ResolveRecord:
    return {"t": "resolve", "pos": position, "action": action, "value": value, "time": time.time()}


@dataclass(frozen=True)
class Doubt:
    """A non-idempotent tool call that was started and never recorded as finished."""

    position: str
    tool: str
    state: str


def ending_record(
    result: RunResult,
    calls: Mapping[str, int],
    doubt: Doubt | None = None,
    place: PlaceTag | None = None,
    failed: str | None = None,
) -> SuspendRecord | FinishRecord:
    """How this advance of the run ended: a suspension, a finish, or a finish in doubt; ``place`` is the
    notebook cell it was asked for from, ``failed`` the position of the failed call it stopped on."""
    record: SuspendRecord | FinishRecord
    if doubt is not None:
        record = {
            "t": "finish",
            "status": "in_doubt",
            "error": result.error,
            "at": result.at,
            "pos": doubt.position,
            "tool": doubt.tool,
            "calls": dict(calls),
            "time": time.time(),
        }
    elif result.status == "suspended":
        record = {
            "t": "suspend",
            "reason": result.error,
            "at": result.at,
            "ask": result.ask,
            "reply_to": result.reply_to,
            "question": result.question,
            "pos": result.pending,
            "calls": dict(calls),
            "time": time.time(),
        }
        if result.machine:  # suspended inside a called machine: where more steps must go
            record["machine"] = result.machine
        if result.about is not None:  # what the question is about: part of its identity
            record["about"] = result.about
        if result.pinned is not None:  # what the run was set up with: part of its identity too
            record["pinned"] = result.pinned
    else:
        record = {
            "t": "finish",
            "status": result.status,
            "error": result.error,
            "at": result.at,
            "calls": dict(calls),
            "time": time.time(),
        }
    if failed is not None and doubt is None:
        record["failed"] = failed
    if place is not None:
        record["place"] = place
    return record


def same_ending(last: Mapping[str, Any] | None, closing: Mapping[str, Any]) -> bool:
    """Whether two ending records say the same, apart from when and with how many calls."""
    if last is None:
        return False
    volatile = ("time", "calls", "place")
    return {k: v for k, v in last.items() if k not in volatile} == {
        k: v for k, v in closing.items() if k not in volatile
    }


# -- reading -------------------------------------------------------------------------------


def established_how(reply: Mapping[str, Any]) -> str | None:
    """How a reply record's ``by`` is established (a key of :data:`ESTABLISHED_BY`); None when only the
    replier's word says it (every reply journaled before identities were established)."""
    how = reply.get("established")
    return how if isinstance(how, str) and how in ESTABLISHED_BY and reply.get("by") else None


def claimed_name(reply: Mapping[str, Any]) -> str | None:
    """The name a reply record holds only as the replier's claim: its ``claimed``, or, when nothing
    established its ``by`` (an older journal), that."""
    claimed = reply.get("claimed")
    if isinstance(claimed, str) and claimed:
        return claimed
    by = reply.get("by")
    return str(by) if by and established_how(reply) is None else None


def decode_answer(kind: str, record: Mapping[str, Any]) -> Any:
    """The oracle answer an ``answer`` (or ``reply``) record holds."""
    if kind == "reply":
        note = record.get("note")
        return HumanReply(
            record.get("value"),
            by=record.get("by"),
            via=record.get("via"),
            at=record.get("time"),
            note=note if isinstance(note, str) else None,
            established=established_how(record),
            claimed=claimed_name(record),
        )
    data = record.get("answer") or {}
    tokens_in, tokens_out = (record.get("usage") or [0, 0])[:2]
    if kind == "produce":
        return ProduceAnswer(
            text=data["text"],
            reasoning=data.get("reasoning"),
            input_tokens=tokens_in,
            output_tokens=tokens_out,
            truncated=bool(data.get("truncated")),
            model=data.get("model"),
            cost_usd=_number(record.get("cost_usd")),
            seconds=_number(record.get("seconds")),
        )
    if kind == "judge":
        return JudgeAnswer(
            choice=data.get("choice"),
            raw=data.get("raw"),
            parse=data.get("parse"),
            input_tokens=tokens_in,
            output_tokens=tokens_out,
            model=data.get("model"),
            cost_usd=_number(record.get("cost_usd")),
            seconds=_number(record.get("seconds")),
        )
    return data.get("value")


def spent(records: Sequence[Mapping[str, Any]]) -> float | None:
    """What every model call a journal records cost in US dollars, those whose answers an edit later
    replaced included (they were paid for); None when there was none or any one's price is unknown."""
    costs = [
        record.get("cost_usd")
        for record in records
        if record.get("t") == "answer" and record.get("kind") in ("produce", "judge") and "error" not in record
    ]
    amounts = [_number(cost) for cost in costs]
    if not amounts or any(amount is None for amount in amounts):
        return None
    return sum(amount or 0.0 for amount in amounts)


def _number(value: Any) -> float | None:
    """A recorded amount (a cost, a duration), or None where there is none."""
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


@dataclass(frozen=True)
class RunState:
    """Where a run stands, as its journal says: the one reading of a run's status."""

    status: Status
    error: str | None = None  # the halt error, the suspension's reason, or what is in doubt
    at: str | None = None
    ask: str | None = None
    reply_to: str | None = None
    question: str | None = None
    position: str | None = None  # of the awaited reply, or of the tool call in doubt
    machine: str | None = None  # the called machine a suspension sits in
    tool: str | None = None  # the tool call in doubt
    about: str | None = None  # what the awaited reply is about, as the person is shown it
    pinned: str | None = None  # a digest of the setup the question was asked in
    failed: str | None = None  # the position of the failed call the last advance stopped on

    @property
    def finished(self) -> bool:
        return self.status in ("done", "halt")

    @property
    def waits_for_reply(self) -> bool:
        """Suspended at a question a person (or a model's question) must answer."""
        return self.status == "suspended" and self.position is not None

    def __str__(self) -> str:
        """The status as a sentence's end: ``done``, ``suspended: budget-exhausted``."""
        return f"{self.status}: {self.error}" if self.error else self.status

    @property
    def shown(self) -> str:
        """The question's text as a person sees it: the author's ``ask``, or the model's question."""
        return self.ask or self.question or ""

    def question_id(self, run_id: str) -> str | None:
        """The id of the question run ``run_id`` waits on; None when it waits for no reply."""
        if not self.waits_for_reply or self.position is None:
            return None
        return question_id(run_id, self.position, self.shown, self.about, self.pinned)


def state_of(ending: Mapping[str, Any] | None) -> RunState:
    """The run state an ending (``suspend`` / ``finish``) record describes; none yet: running."""
    if ending is None:
        return RunState("running")
    if ending.get("t") == "suspend":
        return RunState(
            "suspended",
            error=ending.get("reason"),
            at=ending.get("at"),
            ask=ending.get("ask"),
            reply_to=ending.get("reply_to"),
            question=ending.get("question"),
            position=ending.get("pos"),
            machine=ending.get("machine"),
            about=ending.get("about") if isinstance(ending.get("about"), str) else None,
            pinned=ending.get("pinned") if isinstance(ending.get("pinned"), str) else None,
            failed=ending.get("failed") if isinstance(ending.get("failed"), str) else None,
        )
    status = ending.get("status")
    return RunState(
        cast(Status, status if status in ("done", "halt", "in_doubt") else "halt"),
        error=ending.get("error"),
        at=ending.get("at"),
        position=ending.get("pos"),
        tool=ending.get("tool"),
        failed=ending.get("failed") if isinstance(ending.get("failed"), str) else None,
    )


def kind_of(record: Mapping[str, Any]) -> str | None:
    """A record's kind (``start``, ``answer``, ``reply``, ``suspend``, …); None when it names none."""
    kind = record.get("t")
    return kind if isinstance(kind, str) else None


def is_ending(record: Mapping[str, Any]) -> bool:
    """Whether ``record`` ends an advance of the run (a ``suspend`` or ``finish``)."""
    return kind_of(record) in ENDINGS


def is_precious(record: Mapping[str, Any]) -> bool:
    """Whether ``record`` is synced to disk before it is used, whatever the store's durability (:data:`PRECIOUS`)."""
    return kind_of(record) in PRECIOUS


def is_sign(record: Mapping[str, Any]) -> bool:
    """Whether ``record`` is a signature (it vouches for the records before it and changes nothing in the run)."""
    return kind_of(record) == "sign"


def unsigned_from(records: Sequence[Mapping[str, Any]]) -> int:
    """Where the records no ``sign`` record vouches for begin (``len(records)``: every one is signed)."""
    for position in range(len(records) - 1, -1, -1):
        if is_sign(records[position]):
            return position + 1
    return 0


def replies(records: Iterable[Mapping[str, Any]]) -> list[ReplyRecord]:
    """The person's answers among ``records``, in order."""
    return [cast(ReplyRecord, record) for record in records if kind_of(record) == "reply"]


def root_of(records: Sequence[Mapping[str, Any]]) -> str:
    """The name of the machine of the run a journal holds (its start record says; a re-run keeps it)."""
    return str(records[0].get("root") or "") if records else ""


def run_state(records: list[dict[str, Any]]) -> RunState:
    """Where the run a journal holds stands: its latest ``suspend`` or ``finish`` record says."""
    ending = next((r for r in reversed(records) if is_ending(r)), None)
    return state_of(ending)


# -- options ---------------------------------------------------------------------------------

_UNJOURNALED_OPTIONS = frozenset({"secret", "observer"})  # the secret has its own key; observers are live only
_OPTIONS_ONLY_WHEN_SET = frozenset({"budgets", "max_cost"})  # so that runs from before the option existed still match
_DEFAULT_OPTIONS = RunOptions()
JOURNALED_OPTIONS = tuple(item.name for item in fields(RunOptions) if item.name not in _UNJOURNALED_OPTIONS)
# How each option is written as JSON: sets as sorted lists, mappings as objects, the rest as they are.
_SET_OPTIONS = frozenset(name for name in JOURNALED_OPTIONS if isinstance(getattr(_DEFAULT_OPTIONS, name), frozenset))
_MAPPING_OPTIONS = frozenset(name for name in JOURNALED_OPTIONS if isinstance(getattr(_DEFAULT_OPTIONS, name), Mapping))


def options_record(options: RunOptions) -> dict[str, Any]:
    """The journaled form of every run option (plain JSON: lists for sets, dicts for mappings)."""
    record: dict[str, Any] = {}
    for name in JOURNALED_OPTIONS:
        value = getattr(options, name)
        if name in _OPTIONS_ONLY_WHEN_SET and not value:
            continue
        if name in _SET_OPTIONS:
            value = sorted(value)
        elif name in _MAPPING_OPTIONS:
            value = dict(value)
        record[name] = value
    return record


def options_from_record(record: Mapping[str, Any], secret: bytes, observer: Any = None) -> RunOptions:
    """Run options from their journaled form; options the record lacks keep their defaults."""
    values: dict[str, Any] = {}
    for name in JOURNALED_OPTIONS:
        if name not in record:
            continue
        value = record[name]
        if name in _SET_OPTIONS:
            value = frozenset(value or ())
        elif name in _MAPPING_OPTIONS:
            value = MappingProxyType(dict(value or {}))
        values[name] = value
    return RunOptions(**values, secret=secret, observer=observer)
