"""The oracle boundary: everything non-deterministic a run needs passes through here.

Requests and answers are plain slotted records (not frozen: a frozen dataclass
costs several microseconds per construction on the hot path); treat them as
read-only.

The engine is a pure function of the answers it gets from one :class:`Oracle`
(LLM produce and judge calls, host hook verdicts, tool observations and human
replies).  Each request names its *position*, a stable path such as
``root/7:draft#2/produce``, so a journal can record answers and replay them.
"""

from __future__ import annotations

import hashlib
import json
from abc import ABC, abstractmethod
from codecs import unicode_escape_encode as _escape
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from operator import attrgetter
from typing import Any, Literal

Effect = Literal["read", "effect"]


@dataclass(slots=True)
class ProduceRequest:
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

    kind = "produce"


@dataclass(slots=True)
class JudgeRequest:
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

    kind = "judge"


@dataclass(slots=True)
class HookRequest:
    position: str
    machine: str
    state: str
    name: str
    context_json: str
    output: str

    kind = "hook"


@dataclass(slots=True)
class ToolRequest:
    position: str
    machine: str
    state: str
    name: str
    input_json: str
    effect: Effect
    idempotent: bool = True
    attempt: int = 0
    delay: float = 0.0  # seconds to wait before a live call (retry backoff); never spent on replay

    kind = "tool"

    @property
    def input(self) -> dict[str, Any]:
        return json.loads(self.input_json)


@dataclass(slots=True)
class ReplyRequest:
    """A person's reply to an escalate gate that suspends for them."""

    position: str
    machine: str
    state: str  # the handler state the run continues in
    ask: str | None
    reply_to: str
    question: str | None = None  # a model-initiated question (ask_human), shown as model output

    kind = "reply"


OracleRequest = ProduceRequest | JudgeRequest | HookRequest | ToolRequest | ReplyRequest


@dataclass(slots=True)
class ProduceAnswer:
    text: str
    reasoning: str | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    truncated: bool = False
    model: str | None = None


@dataclass(slots=True)
class JudgeAnswer:
    """``choice`` is 0-based into the batch; ``len(conditions)`` is the none option.

    ``choice`` None is an anomaly (unparseable reply); ``raw`` then says why.
    """

    choice: int | None
    raw: str | None = None
    parse: str | None = None  # "bare" or "last-number" when the reply was not clean JSON
    input_tokens: int = 0
    output_tokens: int = 0
    model: str | None = None


@dataclass(slots=True)
class HumanReply:
    value: Any
    by: str | None = None


class OracleError(Exception):
    """The oracle could not answer; the run halts with ``error`` (no step is recorded).

    ``error`` is the whole halt reason, e.g. ``state-error: no scripted produce …``
    or ``provider-error: rate limited``.  In a fan-out branch the marker shows
    ``detail`` (the reason without a leading ``state-error: ``).
    """

    def __init__(self, error: str, *, suspendable: bool = False) -> None:
        super().__init__(error)
        self.error = error
        self.suspendable = suspendable  # provider outages may suspend a suspendable run instead

    @property
    def detail(self) -> str:
        return self.error.removeprefix("state-error: ")


class RunInterrupted(Exception):
    """Stops the whole run at once; the engine never turns it into a halt or a branch marker.

    (:class:`CannotAnswer` is the one the engine catches: the run suspends where it stands.)
    """


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


class InDoubt(RunInterrupted):
    """A non-idempotent tool call was started but never recorded as finished.

    The run must not guess: a person says whether it completed, should be
    retried, or the run should stop.
    """

    def __init__(self, position: str, tool: str, state: str) -> None:
        super().__init__(f"tool '{tool}' at state '{state}' was started and may or may not have run")
        self.position = position
        self.tool = tool
        self.state = state


class Oracle(ABC):
    """The single interface through which a run meets the world."""

    @abstractmethod
    def ask(self, request: OracleRequest) -> Any:
        """Answer one request: ProduceAnswer, JudgeAnswer, bool (hook), observation (tool) or HumanReply."""

    def replayed(self, request: OracleRequest) -> None:
        """Told when a journal answered ``request`` instead of this oracle (scripts keep their place)."""
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


# Fields that never change what a call returns: where it sits, and how long a retry waited.
_UNHASHED = frozenset({"position", "delay"})
_HASHED_FIELDS: dict[type, attrgetter] = {}
_MEMO_MAX = 4096
_RECENT: dict[tuple[object, ...], str] = {}  # loops ask the same request again and again
# Per produce "shape" (every field but the prompt): the text before the prompt and after it (plain, and with
# the prompt's quotes for the escape path), and recent digests.
_PRODUCE_SHAPES: dict[tuple[object, ...], tuple[bytes, bytes, bytes, bytes, dict[str, str]]] = {}
_JUDGE_HEADS: dict[tuple[object, ...], str] = {}
_EMPTY_HASH = hashlib.blake2b(digest_size=12)  # copied, not rebuilt: that skips parsing its arguments


def fingerprint(request: OracleRequest) -> str:
    """A hash of the exact request, minus its position: equal requests replay.

    The hash is BLAKE2b of the ``repr`` of the tuple ``(kind, *fields)`` (unambiguous
    for the str, bool, number, None and tuple values requests hold), so no separator
    can be forged by a value.  Produce and judge requests, the hot path, build that
    same text from cached pieces: within one state, little changes from call to call.
    """
    if type(request) is ProduceRequest:
        return produce_fingerprint(request)
    if type(request) is JudgeRequest:
        return _judge_fingerprint(request)
    getter = _HASHED_FIELDS.get(type(request))
    if getter is None:
        getter = attrgetter("kind", *(f.name for f in fields(request) if f.name not in _UNHASHED))
        _HASHED_FIELDS[type(request)] = getter
    values = getter(request)
    try:
        digest = _RECENT.get(values)
    except TypeError:  # an unhashable value (never in engine requests) is simply not remembered
        return _digest(repr(values))
    if digest is None:
        digest = _digest(repr(values))
        _remember(_RECENT, values, digest)
    return digest


def produce_fingerprint(request: ProduceRequest) -> str:
    """:func:`fingerprint` of a produce request (callers that know the kind skip the dispatch)."""
    shape = (
        request.machine,
        request.state,
        request.tier,
        request.structure,
        request.execution,
        request.fenced,
        request.reason,
        request.temperature,
        request.ask_human,
        request.conversation,
    )
    entry = _PRODUCE_SHAPES.get(shape)
    if entry is None:  # repr(("produce", machine, …, execution, user, fenced, …)) == prefix + repr(user) + suffix
        prefix = "('produce', " + "".join(repr(value) + ", " for value in shape[:5])
        suffix = "".join(", " + repr(value) for value in shape[5:]) + ")"
        entry = (_utf8(prefix), _utf8(suffix), _utf8(prefix + "'"), _utf8("'" + suffix), {})
        _remember(_PRODUCE_SHAPES, shape, entry)
    plain_prefix, plain_suffix, quoted_prefix, quoted_suffix, recent = entry
    user = request.user
    # A fence carries a nonce unique to its call, so a fenced prompt never repeats: only plain ones are memoised.
    remember = not request.fenced
    if remember:
        digest = recent.get(user)
        if digest is not None:
            return digest
    if user.isascii() and "'" not in user:  # then repr(user) is the quoted unicode_escape, which is cheaper
        digest = _hash(quoted_prefix + _escape(user)[0] + quoted_suffix)
    else:
        digest = _hash(plain_prefix + _utf8(repr(user)) + plain_suffix)
    if remember:
        if len(recent) >= 64:
            recent.clear()
        recent[user] = digest
    return digest


def _utf8(text: str) -> bytes:
    return text.encode("utf-8", "surrogatepass")


def _judge_fingerprint(request: JudgeRequest) -> str:
    head = (request.machine, request.state, request.tier, request.conditions)
    prefix = _JUDGE_HEADS.get(head)
    if prefix is None:
        prefix = "('judge', " + "".join(repr(value) + ", " for value in head)
        _remember(_JUDGE_HEADS, head, prefix)
    return _digest(f"{prefix}{request.output!r}, {request.reasoning!r}, {request.context_json!r}, {request.nonce!r})")


def _remember(memo: dict[Any, Any], key: Any, value: Any) -> None:
    if len(memo) >= _MEMO_MAX:
        memo.clear()
    memo[key] = value


def _digest(text: str) -> str:
    return _hash(_utf8(text))


def _hash(data: bytes) -> str:
    hasher = _EMPTY_HASH.copy()  # one shared empty state, copied: it stays in cache, as a state per shape would not
    hasher.update(data)
    return hasher.hexdigest()


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


_CONTEXT_ENCODER = json.JSONEncoder(ensure_ascii=False, default=str)


def _reusable_c_encoder() -> Callable[[Any, int], Any] | None:
    """The C encoder ``JSONEncoder.encode`` builds on every call, built once.

    For a small context, building it is most of the cost of encoding.  Without
    circular-reference markers it can be shared; a circular context then recurses
    without end, and :func:`context_json` lets the standard encoder say what is wrong.
    """
    try:
        from json.encoder import c_make_encoder, encode_basestring  # type: ignore[attr-defined]
    except ImportError:
        return None
    if c_make_encoder is None:
        return None
    # (markers, default, encoder, indent, key_separator, item_separator, sort_keys, skipkeys, allow_nan)
    return c_make_encoder(None, str, encode_basestring, None, ": ", ", ", False, False, True)  # type: ignore[no-any-return]


_C_ENCODE = _reusable_c_encoder()


def context_json(ctx: Mapping[str, Any]) -> str:
    """The run context as the judge and hooks see it: ``json.dumps(ctx, ensure_ascii=False, default=str)``."""
    if _C_ENCODE is not None and type(ctx) is dict:
        try:
            return "".join(_C_ENCODE(ctx, 0))
        except RecursionError:
            pass
    return _CONTEXT_ENCODER.encode(ctx)
