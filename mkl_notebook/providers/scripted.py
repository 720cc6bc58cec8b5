"""The scripted oracle (docs/language.md §8): canned LLM answers, hook verdicts and tool outputs.

It lets machines run offline — in tests, in demos and with ``--script`` — with
no model and no API key.
"""

from __future__ import annotations

import functools
import json
import re
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import yaml

from ..engine.oracle import (
    AwaitingHuman,
    CannotAnswer,
    Effect,
    HookRequest,
    HumanReply,
    JudgeAnswer,
    JudgeRequest,
    Oracle,
    OracleError,
    OracleRequest,
    Partial,
    ProduceAnswer,
    ProduceRequest,
    ReplyRequest,
    ToolRequest,
)
from ..errors import UserError
from ..lang import files
from ..lang.located import parse_plain

SCRIPTED_MODEL = "scripted"
SCRIPT_KEYS = frozenset({"llm", "tools", "hooks", "replies"})


class ScriptError(UserError, ValueError):
    """A script file or mapping that does not have the shape of docs/language.md §8."""


class ScriptMissing(ScriptError):
    """A script file that cannot be read here (a notebook came without the files beside it)."""


class _Sequence:
    """Values read in order; the last one repeats forever."""

    def __init__(self, name: str, values: list[Any]) -> None:
        self.name = name
        self.values = list(values)
        self.cursor = 0

    def next(self) -> Any:
        if not self.values:
            raise OracleError(f"state-error: scripted '{self.name}' invoked with no values left")
        value = self.values[min(self.cursor, len(self.values) - 1)]
        self.cursor += 1
        return value


def _answer_after(wait: float, answer: Any) -> Any:
    """A scripted call made elsewhere: its wait, then its answer."""
    if wait:
        time.sleep(wait)
    return answer


def _fail_after(wait: float, failure: OracleError) -> Any:
    if wait:
        time.sleep(wait)
    raise failure


_WORDS = re.compile(r"\s*\S+\s*|\s+")  # a streamed word with the space around it; all of them make the text


def _short(text: str) -> str:
    return repr(text[:80])


class ScriptedOracle(Oracle):
    """Answers every request from a script; thread-safe for concurrent fan-out branches.

    ``latency`` (seconds) makes every LLM and tool answer take that long, to
    model a slow provider; ``stream`` (seconds) makes a streamed produce answer arrive a
    word at a time, that long apart (a script's ``llm.stream``), as a real model's would.
    ``replies`` answers human gates in order (an extension used by demos and scenario files);
    without one, a gate awaits a person.
    """

    def __init__(
        self,
        llm: Mapping[str, Any] | None = None,
        tools: Mapping[str, Any] | None = None,
        hooks: Mapping[str, Any] | None = None,
        *,
        replies: list[Any] | None = None,
        tool_effects: Mapping[str, Effect] | None = None,
        latency: float = 0.0,
        stream: float = 0.0,
    ) -> None:
        llm = dict(llm or {})
        self._lock = threading.Lock()
        produce = llm.get("produce", [])
        self._produce_map: dict[str, Any] | None = dict(produce) if isinstance(produce, Mapping) else None
        self._produce_seq: list[Any] = list(produce) if isinstance(produce, list) else []
        self._produce_cursor = 0
        judge = llm.get("judge")
        self._judge_unparseable = judge == "unparseable"
        self._judge = list(judge) if isinstance(judge, list) else None
        self._judge_cursor = 0
        tokens = llm.get("tokens") or [0, 0]
        if (
            not isinstance(tokens, list)
            or len(tokens) != 2
            or not all(isinstance(t, int) and not isinstance(t, bool) for t in tokens)
        ):
            raise ScriptError(f"llm.tokens must be a pair of whole numbers [in, out], got {tokens!r}")
        self._tokens = (tokens[0], tokens[1])
        self._hooks = {
            str(name): _Sequence(str(name), list(values) if isinstance(values, list) else [values])
            for name, values in (hooks or {}).items()
        }
        self._tools: dict[str, _Sequence | dict[str, Any]] = {}
        for name, spec in (tools or {}).items():
            if isinstance(spec, Mapping):
                self._tools[str(name)] = dict(spec)
            else:
                self._tools[str(name)] = _Sequence(str(name), list(spec) if isinstance(spec, list) else [spec])
        self._replies = list(replies) if replies is not None else None
        self._tool_effects = dict(tool_effects or {})
        self.latency = latency
        self.stream_delay = stream
        self.calls: dict[str, int] = {"produce": 0, "judge": 0, "hook": 0, "tool": 0, "reply": 0}
        self._answered: set[str] = set()  # positions this script has spoken for, live or from a journal
        self._answers: dict[tuple[str, bool], ProduceAnswer] = {}

    # -- Oracle ------------------------------------------------------------------

    def has_hook(self, name: str) -> bool:
        return name in self._hooks

    def has_tool(self, name: str) -> bool:
        return name in self._tools

    def tool_effect(self, name: str) -> Effect | None:
        return self._tool_effects.get(name)

    @property
    def waits(self) -> bool:
        return self.latency > 0 or self.stream_delay > 0

    def stream(self, request: OracleRequest, partial: Partial) -> Any:
        """The scripted answer, told to ``partial`` a word at a time when the script streams."""
        answer = self.ask(request)
        if not self.stream_delay or not isinstance(request, (ProduceRequest, JudgeRequest)):
            return answer
        if isinstance(answer, ProduceAnswer):
            text = ""
            for word in _WORDS.findall(answer.text):
                time.sleep(self.stream_delay)
                text += word
                partial(text)
        else:
            partial("")
            time.sleep(self.stream_delay)
        return answer

    def replayed(self, request: OracleRequest) -> None:
        """A journal answered this position: move past the entry that would have answered it.

        So one script file serves a run and every resume of it, in one process or many.
        """
        with self._lock:
            if request.position in self._answered:
                return
            self._answered.add(request.position)
            if isinstance(request, ProduceRequest) and self._produce_map is None:
                self._produce_cursor += 1
            elif isinstance(request, JudgeRequest) and self._judge:
                self._judge_cursor += 1
            elif isinstance(request, HookRequest) and request.name in self._hooks:
                self._hooks[request.name].cursor += 1
            elif isinstance(request, ToolRequest) and isinstance(spec := self._tools.get(request.name), _Sequence):
                spec.cursor += 1
            elif isinstance(request, ReplyRequest) and self._replies:
                self._replies.pop(0)

    def ask(self, request: OracleRequest) -> Any:
        return self._answer(request, wait=True)

    def remote_call(self, request: OracleRequest) -> Callable[[], Any] | None:
        """The scripted answer is chosen here (a script's answers go in the order calls arrive); what the
        call ships elsewhere is its wait (``latency``, a tool retry's delay), then that answer. Hooks and
        replies answer here at once."""
        if isinstance(request, (HookRequest, ReplyRequest)):
            return None
        wait = self.latency + (request.delay if isinstance(request, ToolRequest) else 0.0)
        try:
            answer = self._answer(request, wait=False)
        except OracleError as failure:
            return functools.partial(_fail_after, wait, failure)
        return functools.partial(_answer_after, wait, answer)

    def _answer(self, request: OracleRequest, *, wait: bool) -> Any:
        with self._lock:
            self.calls[request.kind] += 1
            self._answered.add(request.position)
            # A produce list is read in the order the calls arrive, before any latency is spent.
            text = self._produce_text(request) if isinstance(request, ProduceRequest) else None
        if wait and self.latency and not isinstance(request, (HookRequest, ReplyRequest)):
            time.sleep(self.latency)
        if isinstance(request, ProduceRequest):
            if not isinstance(text, str):  # docs/language.md defines produce output as text
                text = json.dumps(text, ensure_ascii=False)
            answer = self._answers.get((text, request.reason))  # answers are immutable: equal ones are shared
            if answer is None:
                reasoning = "thought" if request.reason else None
                answer = ProduceAnswer(text, reasoning, self._tokens[0], self._tokens[1], False, SCRIPTED_MODEL)
                self._answers[(text, request.reason)] = answer
            return answer
        if isinstance(request, JudgeRequest):
            return self._judge_answer(request)
        if isinstance(request, HookRequest):
            if request.name not in self._hooks:
                raise OracleError(f"state-error: hook: unknown hook '{request.name}' (not in the script)")
            with self._lock:
                return bool(self._hooks[request.name].next())
        if isinstance(request, ToolRequest):
            if wait and request.delay:
                time.sleep(request.delay)
            return self._tool(request)
        with self._lock:
            if not self._replies:
                raise AwaitingHuman(request.position)
            return HumanReply(self._replies.pop(0), by="script", via="script")

    # -- answers -----------------------------------------------------------------

    def _produce_text(self, request: ProduceRequest) -> Any:
        """The scripted answer for a produce call; the caller holds the lock."""
        if self._produce_map is None:
            cursor = self._produce_cursor
            if cursor >= len(self._produce_seq):
                return "ok"
            self._produce_cursor = cursor + 1
            return self._produce_seq[cursor]
        if request.conversation:  # a later round: the person's latest reply picks the answer first
            latest = request.conversation[-1][1]
            text = next((value for key, value in self._produce_map.items() if str(key) in latest), None)
            if text is not None:
                return text
        text = next((value for key, value in self._produce_map.items() if str(key) in request.user), None)
        if text is None:
            raise OracleError(f"state-error: no scripted produce matches prompt {_short(request.user)}")
        return text

    def _judge_answer(self, request: JudgeRequest) -> JudgeAnswer:
        size = len(request.conditions)
        if self._judge_unparseable:
            return JudgeAnswer(None, raw="scripted", model=SCRIPTED_MODEL)
        if not self._judge:
            return JudgeAnswer(size - 1, model=SCRIPTED_MODEL)
        with self._lock:
            pick = self._judge[min(self._judge_cursor, len(self._judge) - 1)]
            self._judge_cursor += 1
        if pick is None:  # YAML null: as if no judge entry were scripted
            return JudgeAnswer(size - 1, model=SCRIPTED_MODEL)
        if isinstance(pick, bool):  # YAML true / false read as 1 / 0, as the reference runner does
            pick = int(pick)
        if isinstance(pick, str):
            if pick.strip().lower() == "none":
                return JudgeAnswer(size, model=SCRIPTED_MODEL)
            raise OracleError(f"state-error: scripted judge: expected an index or 'none', got {pick!r}")
        if not isinstance(pick, int):
            raise OracleError(f"state-error: scripted judge: expected an index or 'none', got {pick!r}")
        return JudgeAnswer(pick, model=SCRIPTED_MODEL)

    def _tool(self, request: ToolRequest) -> str:
        spec = self._tools.get(request.name)
        if spec is None:
            raise OracleError(f"state-error: tool: unknown tool '{request.name}' (not in the script)")
        if isinstance(spec, dict):
            blob = request.input_json
            for key, output in spec.items():
                if str(key) in blob:
                    return str(output)
            raise OracleError(f"state-error: tool '{request.name}': no scripted output for input {request.input_json}")
        with self._lock:
            return str(spec.next())


def oracle_from_script(script: Mapping[str, Any], *, where: str = "script", **kwargs: Any) -> ScriptedOracle:
    """Build a scripted oracle from the ``llm`` / ``tools`` / ``hooks`` keys of a mapping."""
    llm = script.get("llm") or {}
    if not isinstance(llm, Mapping):
        raise ScriptError(f"{where}: 'llm' must be a mapping with produce/judge/tokens")
    unknown = set(llm) - {"produce", "judge", "tokens", "stream"}
    if unknown:
        raise ScriptError(f"{where}: unknown key(s) under 'llm': {', '.join(sorted(map(str, unknown)))}")
    produce = llm.get("produce", [])
    if produce is not None and not isinstance(produce, (list, Mapping)):
        raise ScriptError(f"{where}: llm.produce must be a list of answers or a map of prompt substrings")
    for key in ("tools", "hooks"):
        value = script.get(key)
        if value is not None and not isinstance(value, Mapping):
            raise ScriptError(f"{where}: '{key}' must be a mapping of names to scripted values")
    replies = script.get("replies")
    if replies is not None and not isinstance(replies, list):
        raise ScriptError(f"{where}: 'replies' must be a list of human replies")
    stream = llm.get("stream", 0)
    if isinstance(stream, bool) or not isinstance(stream, (int, float)) or not 0 <= stream <= 10:
        raise ScriptError(f"{where}: llm.stream must be the seconds between streamed words (0 to 10), got {stream!r}")
    kwargs.setdefault("stream", float(stream))
    return ScriptedOracle(llm, script.get("tools"), script.get("hooks"), replies=replies, **kwargs)


def oracle_from_file(path: str | Path, *, where: str | None = None) -> ScriptedOracle:
    """A scripted oracle from a YAML file with ``llm`` / ``tools`` / ``hooks`` / ``replies``."""
    where = where or str(path)
    return oracle_from_script(read_script(path, where=where), where=where)


def read_script(path: str | Path, *, where: str | None = None) -> dict[str, Any]:
    """The mapping a script file holds, checked to have only the keys of a script."""
    where = where or str(path)
    try:
        text = files.read_text(path, files.SCRIPT_LIMIT)
    except OSError as exc:
        raise ScriptMissing(f"{where}: cannot be read ({exc.strerror or exc})") from None
    except UnicodeDecodeError:
        raise ScriptError(f"{where}: is not UTF-8 text") from None
    try:
        data = parse_plain(text) or {}
    except yaml.YAMLError as exc:  # said in one line: where, and what (libyaml's own words are several lines)
        mark = getattr(exc, "problem_mark", None)
        at = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        problem = getattr(exc, "problem", None) or " ".join(str(exc).split())
        raise ScriptError(f"{where}: {at}the YAML does not parse ({problem})") from None
    except RecursionError:
        raise ScriptError(f"{where}: nests too deeply to be read") from None
    if not isinstance(data, Mapping):
        raise ScriptError(f"{where}: must be a mapping with llm / tools / hooks")
    unknown = set(data) - SCRIPT_KEYS
    if unknown:
        raise ScriptError(
            f"{where}: unknown key(s) {', '.join(sorted(map(str, unknown)))} (expected llm, tools, hooks, replies)"
        )
    oracle_from_script(data, where=where)  # its shape is checked once, here
    return dict(data)


class NoModelOracle(Oracle):
    """Stands in when neither a script nor a model is configured: replays work; a new call stops the run
    (it stays resumable) with a hint saying what to set."""

    def __init__(self, hint: str) -> None:
        self.hint = hint

    @property
    def waits(self) -> bool:
        return False

    def ask(self, request: OracleRequest) -> Any:
        if isinstance(request, ReplyRequest):
            raise AwaitingHuman(request.position)
        raise CannotAnswer(self.hint, request.state)
