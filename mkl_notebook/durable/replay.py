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
    InDoubt,
    Oracle,
    OracleError,
    OracleRequest,
    ReplyRequest,
    RunInterrupted,
    ToolRequest,
    fingerprint,
    produce_fingerprint,
)
from .records import decode_answer, encode_answer

SETUP_KEYS = ("root", "machines", "input", "context", "options")


class RecordedFailure(Exception):
    """A host tool or hook raised; the failure is journaled and raised again on replay."""


@dataclass
class JournalIndex:
    """What the records say, by position (later records win)."""

    start: dict[str, Any]
    answers: dict[str, dict[str, Any]] = field(default_factory=dict)
    replies: dict[str, dict[str, Any]] = field(default_factory=dict)
    open_intents: dict[str, dict[str, Any]] = field(default_factory=dict)
    resolutions: dict[str, dict[str, Any]] = field(default_factory=dict)
    tools_seen: set[str] = field(default_factory=set)
    tool_effects: dict[str, str] = field(default_factory=dict)  # the class each tool had when it ran
    hooks_seen: set[str] = field(default_factory=set)
    last: dict[str, Any] | None = None  # the latest suspend or finish record
    overrides: dict[str, Any] = field(default_factory=dict)  # budgets given at resume
    setup: dict[str, Any] = field(default_factory=dict)  # root, machines, input, context, options now in force

    @property
    def machines(self) -> dict[str, Any]:
        return self.setup.get("machines") or {}

    @classmethod
    def build(cls, records: list[dict[str, Any]]) -> JournalIndex:
        if not records or records[0].get("t") != "start":
            raise ValueError("the journal does not begin with a start record")
        index = cls(start=records[0], setup={key: records[0].get(key) for key in SETUP_KEYS})
        for record in records[1:]:
            index.add(record)
        return index

    def add(self, record: dict[str, Any]) -> None:
        kind = record.get("t")
        position = record.get("pos")
        if kind == "answer":
            self.answers[position] = record
            self.open_intents.pop(position, None)
            self.resolutions.pop(position, None)
            if record.get("kind") == "tool":
                self.tools_seen.add(record.get("name", ""))
                if record.get("effect"):
                    self.tool_effects[record.get("name", "")] = record["effect"]
            elif record.get("kind") == "hook":
                self.hooks_seen.add(record.get("name", ""))
        elif kind == "intent":
            self.open_intents[position] = record
            self.resolutions.pop(position, None)
        elif kind == "resolve":
            self.resolutions[position] = record
        elif kind == "reply":
            self.replies[position] = record
        elif kind in ("suspend", "finish"):
            self.last = record
        elif kind == "resume":
            self.overrides.update({k: v for k, v in record.items() if k in ("max_steps", "cost_budget")})
            if isinstance(record.get("budgets"), dict):  # a called machine's budget, raised at resume
                self.overrides["budgets"] = {**self.overrides.get("budgets", {}), **record["budgets"]}
        elif kind == "rerun":
            self.setup.update({key: record[key] for key in SETUP_KEYS if key in record})
            self.overrides = {}


class ReplayOracle(Oracle):
    """Replays recorded answers whose request fingerprint matches; records every new one before using it."""

    def __init__(self, inner: Oracle, journal: JournalIndex, append: Callable[[dict[str, Any]], None]) -> None:
        self.inner = inner
        self.journal = journal
        self._append = append
        self._lock = threading.Lock()
        self.made = 0
        self.replayed = 0
        self.invalidated = 0
        self.recorded = 0

    def _record(self, record: dict[str, Any], made: bool = False) -> None:
        """Journal ``record`` (durable before its answer is used), then index it; ``made`` counts a call.

        Model answers, one per step, take a written-out copy of this in :meth:`ask`.
        """
        with self._lock:
            self._append(record)
            self.journal.add(record)
            self.recorded += 1
            if made:
                self.made += 1

    @property
    def waits(self) -> bool:
        return self.inner.waits

    def has_hook(self, name: str) -> bool:
        return self.inner.has_hook(name) or name in self.journal.hooks_seen

    def has_tool(self, name: str) -> bool:
        return self.inner.has_tool(name) or name in self.journal.tools_seen

    def tool_effect(self, name: str) -> Effect | None:
        return self.inner.tool_effect(name) or self.journal.tool_effects.get(name)  # type: ignore[return-value]

    def ask(self, request: OracleRequest) -> Any:
        kind = request.kind
        if kind == "produce":
            print_ = produce_fingerprint(request)  # type: ignore[arg-type]
        elif kind == "reply":
            return self._reply(request)  # type: ignore[arg-type]
        else:
            print_ = fingerprint(request)
        position = request.position
        journal = self.journal
        recorded = journal.answers.get(position)
        if recorded is not None:
            if recorded.get("fp") == print_:
                return self._replay(request, recorded)
            self._record({"t": "invalidated", "pos": position, "old": recorded.get("fp"), "new": print_})
            with self._lock:
                self.invalidated += 1
        if kind != "produce" and kind != "judge":
            return self._call_host(request, print_)
        # A model call, the hot path: ask, then journal the answer before anyone uses it.
        try:
            answer = self.inner.ask(request)
        except CannotAnswer:
            raise  # no call was made
        except BaseException:
            with self._lock:
                self.made += 1
            raise  # provider outages and script misses are not journaled: a resume asks again
        record: dict[str, Any] = {
            "t": "answer",
            "pos": position,
            "fp": print_,
            "kind": kind,
            "answer": encode_answer(kind, answer),
        }
        if answer.input_tokens or answer.output_tokens:
            record["usage"] = [answer.input_tokens, answer.output_tokens]
        lock = self._lock  # _record, written out: acquire/release, not `with`, which costs more than the lock
        lock.acquire()
        try:
            self._append(record)  # durable first, then indexed
            if journal.open_intents or journal.resolutions:
                journal.add(record)
            else:
                journal.answers[position] = record
            self.recorded += 1
            self.made += 1
        finally:
            lock.release()
        return answer

    def _replay(self, request: OracleRequest, recorded: dict[str, Any]) -> Any:
        with self._lock:
            self.replayed += 1
        self.inner.replayed(request)
        if "error" in recorded:
            raise RecordedFailure(recorded["error"])
        return decode_answer(request.kind, recorded.get("answer", {}), recorded.get("usage"))

    def _guard_effect(self, request: ToolRequest, print_: str) -> Any:
        """Journal the intent of a non-idempotent call; an unfinished earlier intent is in doubt."""
        position = request.position
        if position in self.journal.open_intents:
            resolution = self.journal.resolutions.get(position)
            action = resolution.get("action") if resolution else None
            if action is None:
                raise InDoubt(position, request.name, request.state)
            if action == "completed":
                value = resolution.get("value")
                self._record(
                    {
                        "t": "answer",
                        "pos": position,
                        "fp": print_,
                        "kind": "tool",
                        "name": request.name,
                        "answer": {"value": value},
                        "resolved": True,
                    }
                )
                return value
            if action == "abort":
                raise OracleError(f"state-error: tool '{request.name}' was stopped after an in-doubt call")
        self._record({"t": "intent", "pos": position, "fp": print_, "name": request.name})
        return None

    def _call_host(self, request: OracleRequest, print_: str) -> Any:
        """A tool or hook: a non-idempotent tool journals its intent first; a raised error is journaled too."""
        if isinstance(request, ToolRequest) and not request.idempotent:
            resolved = self._guard_effect(request, print_)
            if resolved is not None:
                return resolved
        kind = request.kind
        try:
            answer = self.inner.ask(request)
        except CannotAnswer:
            raise  # no call was made
        except (RunInterrupted, OracleError):
            with self._lock:
                self.made += 1
            raise  # not journaled: a resume tries again
        except Exception as exc:
            message = str(exc) or type(exc).__name__
            self._record(
                {
                    "t": "answer",
                    "pos": request.position,
                    "fp": print_,
                    "kind": kind,
                    "name": request.name,
                    "error": message,  # type: ignore[union-attr]
                    **({"effect": request.effect} if isinstance(request, ToolRequest) else {}),
                },
                made=True,
            )
            raise RecordedFailure(message) from None
        record: dict[str, Any] = {
            "t": "answer",
            "pos": request.position,
            "fp": print_,
            "kind": kind,
            "answer": encode_answer(kind, answer),
            "name": request.name,
        }  # type: ignore[union-attr]
        if isinstance(request, ToolRequest):
            record["effect"] = request.effect
        self._record(record, made=True)
        return answer

    def _reply(self, request: ReplyRequest) -> Any:
        recorded = self.journal.replies.get(request.position)
        if recorded is not None:
            self.inner.replayed(request)  # a script's `replies:` keep their place too
            return decode_answer("reply", recorded, None)
        answer = self.inner.ask(request)  # raises AwaitingHuman unless the host has a reply ready
        if answer is None:
            raise AwaitingHuman(request.position)
        record = {"t": "reply", "pos": request.position, "reply_to": request.reply_to, **encode_answer("reply", answer)}
        self._record(record)
        return answer
