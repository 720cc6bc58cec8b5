"""The frozen oracle: a scenario's ``frozen:`` list (docs/language.md §8), a real run's answers as its journal held
them, each beside what it answered (the state, the prompt, the gate questions, the tool's input, the question).

It answers a request only when the request is the one frozen at that position; the first that is not is told
(:attr:`FrozenOracle.changed`) by its state and what changed, a prompt as a short diff, and halts the run: a test
of a frozen run fails naming the first request an edit changed, not a generic mismatch further on.
"""

from __future__ import annotations

import difflib
import json
import re
import threading
from collections.abc import Mapping
from typing import Any

from ..engine.oracle import (
    AwaitingHuman,
    HookRequest,
    HumanReply,
    JudgeAnswer,
    JudgeRequest,
    Oracle,
    OracleError,
    OracleRequest,
    ProduceAnswer,
    ProduceRequest,
    ReplyRequest,
    ToolRequest,
)
from ..errors import MklError
from .scripted import SCRIPTED_MODEL, ScriptError
from .secrets import scrub

# What each kind of entry holds: its answer's key first, then what it answered.
ANSWER_KEYS = {"produce": "produce", "judge": "judge", "tool": "observation", "hook": "verdict", "reply": "reply"}
ENTRY_KEYS = frozenset(
    {"at", "state", "prompt", "produce", "gates", "judge", "tool", "input", "observation", "hook", "verdict"}
    | {"ask", "reply_to", "reply", "note", "error", "tokens"}
)
_FENCE = re.compile(r"<(/?)data-[0-9a-f]{12}>")  # a fence's nonce is keyed by the run's secret: no two runs share it
_DIFF_LINES = 8


class FrozenFailure(MklError):
    """A host tool or hook raised when the run was frozen: raised again where it was."""


def plain_prompt(text: str) -> str:
    """A prompt as a frozen file holds it: fences without their run's nonce, secrets masked."""
    return scrub(_FENCE.sub(r"<\1data>", text))


def _kind(entry: Mapping[str, Any]) -> str:
    if "tool" in entry:
        return "tool"
    if "hook" in entry:
        return "hook"
    if "gates" in entry or "judge" in entry:
        return "judge"
    if "reply" in entry:
        return "reply"
    return "produce"


def _checked(entries: Any, where: str) -> dict[str, Mapping[str, Any]]:
    if not isinstance(entries, list):
        raise ScriptError(f"{where}: 'frozen' must be a list of the run's answers")
    found: dict[str, Mapping[str, Any]] = {}
    for number, entry in enumerate(entries, 1):
        if not isinstance(entry, Mapping) or not isinstance(entry.get("at"), str):
            raise ScriptError(f"{where}: frozen answer {number} must be a mapping with 'at' (its position)")
        unknown = sorted(map(str, set(entry) - ENTRY_KEYS))
        if unknown:
            raise ScriptError(f"{where}: frozen answer {number} has unknown key(s) {', '.join(unknown)}")
        if entry["at"] in found:
            raise ScriptError(f"{where}: frozen answer {number} repeats the position {entry['at']}")
        found[entry["at"]] = entry
    return found


def prompt_diff(before: str, after: str) -> str:
    """The lines that differ between two prompts, ``-`` as frozen and ``+`` as asked now (at most a few)."""
    lines = [
        line
        for line in difflib.unified_diff(before.splitlines(), after.splitlines(), lineterm="", n=0)
        if line[:1] in "-+" and not line.startswith(("---", "+++"))
    ]
    shown = [f"    {line[:1]} {line[1:]}" for line in lines[:_DIFF_LINES]]
    if len(lines) > _DIFF_LINES:
        shown.append(f"    ({len(lines) - _DIFF_LINES} more lines differ)")
    return "\n".join(shown) or "    (only the line breaks differ)"


def _difference(request: OracleRequest, entry: Mapping[str, Any]) -> str | None:
    """What in ``request`` differs from the request ``entry`` answered (None: nothing)."""
    if _kind(entry) != request.kind:
        return f"it is a {request.kind} where the frozen run asked for a {_kind(entry)}"
    if entry.get("state") not in (None, request.state):
        return f"it is asked in state '{request.state}', the frozen one in '{entry.get('state')}'"
    if isinstance(request, ProduceRequest):
        now, then = plain_prompt(request.user), str(entry.get("prompt", ""))
        return None if now == then else f"its prompt changed:\n{prompt_diff(then, now)}"
    if isinstance(request, JudgeRequest):
        now_gates, then_gates = list(request.conditions), list(entry.get("gates") or [])
        if now_gates == then_gates:
            return None
        gone = [gate for gate in then_gates if gate not in now_gates]
        new = [gate for gate in now_gates if gate not in then_gates]
        said = "; ".join([*(f"- {gate!r}" for gate in gone), *(f"+ {gate!r}" for gate in new)])
        return f"its gate questions changed: {said or 'their order'}"
    if isinstance(request, ToolRequest):
        now_input = scrub(request.input_json)
        if entry.get("tool") != request.name:
            return f"it calls tool '{request.name}', the frozen run '{entry.get('tool')}'"
        return None if now_input == entry.get("input") else f"its input changed: {entry.get('input')} -> {now_input}"
    if isinstance(request, HookRequest):
        then_hook = entry.get("hook")
        return None if then_hook == request.name else f"it asks hook '{request.name}', not '{then_hook}'"
    assert isinstance(request, ReplyRequest)
    if entry.get("ask") != request.ask:
        return f"its question changed: {entry.get('ask')!r} -> {request.ask!r}"
    return None


class FrozenOracle(Oracle):
    """Answers each request from the frozen answer at its position, when the request is the one frozen there.

    ``changed`` holds, in the order found, what each request that found no answer differs in (the first is
    the one a test names); ``calls`` counts the requests answered, as the scripted oracle's do.
    """

    def __init__(self, entries: Any, *, where: str = "frozen") -> None:
        self._entries = _checked(entries, where)
        self._hooks = {str(e["hook"]) for e in self._entries.values() if "hook" in e}
        self._tools = {str(e["tool"]) for e in self._entries.values() if "tool" in e}
        self._lock = threading.Lock()
        self.changed: list[str] = []
        self.calls: dict[str, int] = {"produce": 0, "judge": 0, "hook": 0, "tool": 0, "reply": 0}

    @property
    def waits(self) -> bool:
        return False

    def has_hook(self, name: str) -> bool:
        return name in self._hooks

    def has_tool(self, name: str) -> bool:
        return name in self._tools

    def ask(self, request: OracleRequest) -> Any:
        entry = self._entries.get(request.position)
        if entry is None and isinstance(request, ReplyRequest):
            raise AwaitingHuman(request.position)  # nobody had answered it when the run was frozen
        if entry is None:
            problem = (
                f"state '{request.state}' asks for a {request.kind} ({request.position}) the frozen run holds no "
                "answer for: the route changed before it"
            )
        else:
            what = _difference(request, entry)
            if what is None:
                with self._lock:
                    self.calls[request.kind] += 1
                return _answer(request, entry)
            problem = f"the {request.kind} of state '{request.state}' ({request.position}): {what}"
        with self._lock:
            self.changed.append(problem)
        raise OracleError(f"state-error: {problem.splitlines()[0]}")


def _answer(request: OracleRequest, entry: Mapping[str, Any]) -> Any:
    error = entry.get("error")
    if isinstance(error, str):
        if isinstance(request, (ProduceRequest, JudgeRequest)):
            raise OracleError(error, called=True)  # a model call that failed, as it failed
        raise FrozenFailure(error)
    value = entry.get(ANSWER_KEYS[request.kind])
    if isinstance(request, ProduceRequest):
        text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
        tokens = entry.get("tokens") or [0, 0]
        reasoning = "thought" if request.reason else None
        return ProduceAnswer(text, reasoning, int(tokens[0]), int(tokens[1]), False, SCRIPTED_MODEL)
    if isinstance(request, JudgeRequest):
        if isinstance(value, str) and value.strip().lower() == "none":
            return JudgeAnswer(len(request.conditions), model=SCRIPTED_MODEL)
        if isinstance(value, int) and not isinstance(value, bool):
            return JudgeAnswer(value, model=SCRIPTED_MODEL)
        return JudgeAnswer(None, raw="frozen: an unreadable reply", model=SCRIPTED_MODEL)
    if isinstance(request, HookRequest):
        return bool(value)
    if isinstance(request, ToolRequest):
        return value
    note = entry.get("note")
    return HumanReply(value, by="script", via="script", note=note if isinstance(note, str) else None)
