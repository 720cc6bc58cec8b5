"""The replay oracle: answers from the journal when the request is unchanged, else asks anew.

Wrapped around any live oracle, it makes a run a pure function of its journal:
resume after suspension, resume after a crash, an instant re-run and an
edit-and-rerun are all the same operation — run from the top again.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..engine.oracle import (
    AwaitingHuman,
    CannotAnswer,
    Effect,
    HookRequest,
    HumanReply,
    JudgeRequest,
    Oracle,
    OracleError,
    OracleRequest,
    OutcomeUnknown,
    Partial,
    ProduceRequest,
    ReplyRequest,
    RunInterrupted,
    ToolRequest,
)
from ..errors import MklError
from . import records as rec
from .fingerprint import digest, fingerprinted
from .reading import RunState, claimed_name, decode_answer, established_how, state_of

MODEL_KINDS = ("produce", "judge")  # the calls a model answers
JOURNAL_ENDS = "interrupted: its journal ends before this call; resume the run to go on"


class RecordedFailure(MklError):
    """A host tool or hook raised; the failure is journaled and raised again on replay."""


@dataclass
class JournalIndex:
    """What the records say, by position (later records win)."""

    start: dict[str, Any]
    answers: dict[str, dict[str, Any]] = field(default_factory=dict)
    replies: dict[str, list[dict[str, Any]]] = field(default_factory=dict)  # every reply at a position, in order
    open_intents: dict[str, dict[str, Any]] = field(default_factory=dict)
    resolutions: dict[str, dict[str, Any]] = field(default_factory=dict)
    tools_seen: set[str] = field(default_factory=set)
    tool_effects: dict[str, str] = field(default_factory=dict)  # the class each tool had when it ran
    hooks_seen: set[str] = field(default_factory=set)
    retried: set[str] = field(default_factory=set)  # in-doubt calls a retry started again
    last: dict[str, Any] | None = None  # the latest suspend or finish record
    settled: bool = False  # the journal's last record ends an advance: nothing was cut off in the middle
    overrides: dict[str, Any] = field(default_factory=dict)  # budgets given at resume
    setup: dict[str, Any] = field(default_factory=dict)  # root, machines, input, context, options now in force
    set_up_again: bool = False  # a rerun changed the setup since the latest ending
    journal: list[dict[str, Any]] = field(default_factory=list)  # the records it was built from, as given

    def _retry(self, which: Any) -> None:
        """Forget the failed model calls a resume makes again: those at the positions given, or all of them."""
        for position in self.failed_calls:
            if which is True or (isinstance(which, list) and position in which):
                del self.answers[position]

    @property
    def failed_calls(self) -> list[str]:
        """The positions of the model calls whose answer the journal holds as a failure."""
        return [pos for pos, answer in self.answers.items() if "error" in answer and answer.get("kind") in MODEL_KINDS]

    @property
    def machines(self) -> dict[str, Any]:
        return self.setup.get("machines") or {}

    @property
    def state(self) -> RunState:
        return state_of(self.last)

    @property
    def doubt_open(self) -> bool:
        """The run stopped in doubt and nothing since settled it: the tool call it names is still open
        (a resolve given since, or the call's result recorded by a retry, settles it)."""
        state = self.state
        if state.status != "in_doubt":
            return False
        position = str(state.position)
        return position in self.open_intents and position not in self.resolutions

    @property
    def options(self) -> dict[str, Any]:
        """The run options in force: the setup's, with the budgets raised at resume laid over them."""
        return {**(self.setup.get("options") or {}), **self.overrides}

    @classmethod
    def build(cls, records: list[dict[str, Any]]) -> JournalIndex:
        if not records or rec.kind_of(records[0]) != "start":
            raise ValueError("the journal does not begin with a start record")
        index = cls(start=records[0], setup={key: records[0].get(key) for key in rec.SETUP_KEYS}, journal=records)
        for record in records[1:]:
            index.add(record)
        return index

    def add(self, record: dict[str, Any]) -> None:
        kind = rec.kind_of(record)
        if kind in ("sign", "trace") or rec.is_notifying(record):
            return  # a signature vouches for the records before it, a notification or a trace tells of them
        self.settled = rec.is_ending(record)
        position = str(record.get("pos"))
        if kind == "answer":
            self.answers[position] = record
            self.open_intents.pop(position, None)
            self.resolutions.pop(position, None)
            answered = record.get("kind")
            if answered == "tool":
                self.tools_seen.add(str(record.get("name")))
                if record.get("effect"):
                    self.tool_effects[str(record.get("name"))] = record["effect"]
            elif answered == "hook":
                self.hooks_seen.add(str(record.get("name")))
        elif kind == "intent":
            self.open_intents[position] = record
            resolution = self.resolutions.pop(position, None) or {}
            if resolution.get("action") == "retry" and resolution.get("value") != rec.NOT_SENT:
                self.retried.add(position)
        elif kind == "resolve":
            self.resolutions[position] = record
        elif kind == "reply" or (kind == "policy" and "value" in record):
            self.replies.setdefault(position, []).append(record)  # a deadline's decision answers as a reply would
        elif kind in ("suspend", "finish"):
            self.last = record
            self.set_up_again = False
        elif kind == "resume":
            self._retry(record.get("retry"))
            self.overrides.update({k: v for k, v in record.items() if k in ("max_steps", "cost_budget", "max_cost")})
            if isinstance(record.get("budgets"), dict):  # a called machine's budget, raised at resume
                self.overrides["budgets"] = {**self.overrides.get("budgets", {}), **record["budgets"]}
        elif kind == "rerun":
            self.setup.update({key: record[key] for key in rec.SETUP_KEYS if key in record})
            self.overrides = {}
            self.set_up_again = True


@dataclass
class CallCounts:
    made: int = 0  # calls that reached the live oracle
    replayed: int = 0  # answers the journal gave
    invalidated: int = 0  # recorded answers whose request changed
    recorded: int = 0  # records this advance appended
    first_call: str | None = None  # the position of the first request that reached the live oracle


class ReplayOracle(Oracle):
    """Replays recorded answers whose request fingerprint matches; records every new one before using it."""

    def __init__(
        self,
        inner: Oracle,
        journal: JournalIndex,
        append: Callable[[dict[str, Any]], None],
        *,
        read_only: bool = False,
    ) -> None:
        self.inner = inner
        self.read_only = read_only  # only read the journal: a call it does not answer stops the run there
        self.journal = journal
        self._append = append
        self._lock = threading.Lock()
        self.counts = CallCounts()
        self.asked_again: list[dict[str, Any]] = []  # journaled replies not replayed: what they answered changed
        self.replayed_positions: list[str] = []  # the calls the journal answered, in the order asked
        self.replies_kept: list[str] = []  # the positions of the replies the journal gave
        self.failures: list[tuple[str, str]] = []  # model calls that failed (made or replayed): position, error
        self._digests: dict[tuple[Any, ...], str] = {}  # a loop asks the same request again and again

    def _fingerprint(self, request: OracleRequest) -> str:
        values = fingerprinted(request)
        if isinstance(request, JudgeRequest) or (isinstance(request, ProduceRequest) and request.fenced):
            return digest(values)  # a fence nonce is unique to its call: such a request never comes again
        known = self._digests.get(values)
        if known is None:
            known = self._digests[values] = digest(values)
        return known

    def _record(self, record: dict[str, Any] | Any, *, made: bool = False) -> None:
        """Journal ``record``, durable before its answer is used; ``made`` counts a call.

        The index is not told: it holds what the journal said when this advance began (every
        position is asked once per advance, so what this advance records is never looked up in it).
        Concurrent branches append without holding this oracle's lock, so a store can commit the
        answers that arrive together in one transaction.
        """
        self._append(record)
        with self._lock:
            self.counts.recorded += 1
            if made:
                self._made(1, record.get("pos"))

    def _made(self, count: int, position: Any) -> None:
        """Count calls made, and where the first one was (the lock is held)."""
        if count and self.counts.made == 0:
            self.counts.first_call = str(position)
        self.counts.made += count

    def _count(self, *, made: int = 0, replayed: int = 0, invalidated: int = 0, position: Any = None) -> None:
        with self._lock:
            self._made(made, position)
            self.counts.replayed += replayed
            self.counts.invalidated += invalidated

    @property
    def waits(self) -> bool:
        return self.inner.waits

    def has_hook(self, name: str) -> bool:
        return self.inner.has_hook(name) or name in self.journal.hooks_seen

    def has_tool(self, name: str) -> bool:
        # Read only, a tool the journal has no answer of is reached, and the run stops there: the journal ends.
        return self.read_only or self.inner.has_tool(name) or name in self.journal.tools_seen

    def tool_effect(self, name: str) -> Effect | None:
        recorded = self.journal.tool_effects.get(name)  # the class the tool had when it ran, as journaled
        return self.inner.tool_effect(name) or ("read" if recorded == "read" else "effect" if recorded else None)

    def ask(self, request: OracleRequest) -> Any:
        return self._answer(request, None)

    def stream(self, request: OracleRequest, partial: Partial) -> Any:
        """As :meth:`ask`; a call made live streams, a replayed answer comes at once and streams nothing."""
        return self._answer(request, partial)

    def _answer(self, request: OracleRequest, partial: Partial | None) -> Any:
        if isinstance(request, ReplyRequest):
            return self._reply(request)
        print_ = self._fingerprint(request)
        recorded = self.journal.answers.get(request.position)
        if recorded is not None and recorded.get("fp") == print_:
            return self._replay(request, recorded)
        if self.read_only:
            raise CannotAnswer(JOURNAL_ENDS, request.state)  # nothing is called or recorded: the run shows as it is
        if recorded is not None:
            self._record(rec.invalidated_record(request.position, recorded.get("fp"), print_))
            self._count(invalidated=1)
        if isinstance(request, (ToolRequest, HookRequest)):
            return self._call_host(request, print_)
        try:
            answer = self.inner.ask(request) if partial is None else self.inner.stream(request, partial)
        except CannotAnswer:
            raise  # no call was made
        except OracleError as failure:
            if not failure.called:
                self._count(made=1, position=request.position)
                raise  # no call could be made (no model for the tier, no scripted answer): a resume asks again
            record = rec.failed_call_record(
                request.position, print_, request.kind, failure.error, suspendable=failure.suspendable
            )
            self._record(record, made=True)  # a provider's failure is the run's history: replayed as it was
            self._failed(request.position, failure.error)
            raise
        except BaseException:
            self._count(made=1, position=request.position)
            raise  # the call in flight is lost (an interrupt): a resume makes it again
        self._record(rec.model_answer_record(request.position, print_, answer), made=True)
        return answer

    def _replay(self, request: OracleRequest, recorded: dict[str, Any]) -> Any:
        self._count(replayed=1)
        with self._lock:
            self.replayed_positions.append(request.position)
        self.inner.replayed(request)
        if "error" in recorded:
            if isinstance(request, (ProduceRequest, JudgeRequest)):  # a model call that failed, as it failed
                self._failed(request.position, recorded["error"])
                raise OracleError(recorded["error"], suspendable=bool(recorded.get("suspendable")), called=True)
            raise RecordedFailure(recorded["error"])
        return decode_answer(request.kind, recorded)

    def _failed(self, position: str, error: str) -> None:
        with self._lock:
            self.failures.append((position, error))

    def stopped_on(self, error: str | None) -> str | None:
        """The position of the failed model call whose error ended the run (the last with that error)."""
        with self._lock:
            return next((position for position, said in reversed(self.failures) if said == error), None)

    def _guard_effect(self, request: ToolRequest, print_: str) -> tuple[bool, Any]:
        """Journal the intent of a non-idempotent call; an unfinished earlier intent is in doubt. Whether a
        person settled it as completed, and the observation they gave (which may be None: it still happened)."""
        position = request.position
        if position in self.journal.open_intents:
            resolution = self.journal.resolutions.get(position) or {}
            action = resolution.get("action")
            if action is None:
                raise OutcomeUnknown(position, request.name, request.state)
            if action == "completed":
                value = resolution.get("value")
                self._record(rec.host_answer_record(position, print_, "tool", value, name=request.name, resolved=True))
                return True, value
            if action == "abort":
                raise OracleError(f"state-error: tool '{request.name}' was stopped after an in-doubt call")
        self._record(rec.intent_record(position, print_, request.name))
        return False, None

    def _call_host(self, request: ToolRequest | HookRequest, print_: str) -> Any:
        """A tool or hook: a non-idempotent tool journals its intent first; a raised error is journaled too."""
        effect = request.effect if isinstance(request, ToolRequest) else None
        guarded = False  # an effect's intent is journaled before its call
        if isinstance(request, ToolRequest) and not request.idempotent:
            guarded = True
            completed, observation = self._guard_effect(request, print_)
            if completed:
                return observation
        try:
            answer = self.inner.ask(request)
        except CannotAnswer:
            raise  # no call was made
        except (RunInterrupted, OracleError) as stopped:
            self._count(made=1, position=request.position)
            if guarded and isinstance(stopped, OracleError) and not stopped.called:
                # The effect's call never left (no worker to make it, no such tool here): its intent is withdrawn,
                # so that a resume makes the call instead of finding it in doubt.
                self._record(rec.resolve_record(request.position, "retry", rec.NOT_SENT))
            raise  # not journaled: a resume tries again
        except Exception as exc:
            message = str(exc) or type(exc).__name__
            failure = rec.failed_answer_record(
                request.position, print_, request.kind, name=request.name, error=message, effect=effect
            )
            self._record(failure, made=True)
            raise RecordedFailure(message) from None
        self._record(
            rec.host_answer_record(request.position, print_, request.kind, answer, name=request.name, effect=effect),
            made=True,
        )
        return answer

    def _reply(self, request: ReplyRequest) -> Any:
        given = self.journal.replies.get(request.position) or []
        # The latest reply about exactly what the person is shown now (a reply journaled before replies said
        # what they were about counts as about it); an edit may have brought back what an earlier one answered.
        recorded = next((r for r in reversed(given) if r.get("about", request.about) == request.about), None)
        if recorded is None and given:
            # The person answered about something else (an edit re-made what the gate decided on): ask again.
            latest = given[-1]
            with self._lock:
                self.asked_again.append(
                    {
                        "position": request.position,
                        "value": latest.get("value"),
                        "by": latest.get("by"),
                        "established": established_how(latest),
                        "claimed": claimed_name(latest),
                        "via": latest.get("via"),
                        "time": latest.get("time"),
                        "before": latest.get("about"),
                        "now": request.about,
                    }
                )
        if recorded is not None:
            with self._lock:
                self.replies_kept.append(request.position)
            self.inner.replayed(request)  # a script's `replies:` keep their place too
            return decode_answer("reply", recorded)
        answer = self.inner.ask(request)  # raises AwaitingHuman unless the host has a reply ready
        if answer is None:
            raise AwaitingHuman(request.position)
        reply = answer if isinstance(answer, HumanReply) else HumanReply(answer)
        self._record(
            rec.reply_record(
                request.position,
                request.reply_to,
                reply.value,
                by=reply.by,
                via=reply.via,
                about=request.about,
                note=reply.note,
            )
        )
        return answer
