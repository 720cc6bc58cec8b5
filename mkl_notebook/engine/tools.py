"""Tool calls (docs/language.md §2, §6): a tool state's input, the host's tool, and what its answer becomes.

A tool that fails is handled by the state's ``on_error`` matchers (an extension): retried after a
doubling delay, routed to another state, or replaced by a fallback observation.
"""

from __future__ import annotations

import copy
import hashlib
import json
import re
from typing import Any

from ..lang.interpolate import WHOLE_PLACEHOLDER, lookup, render
from ..lang.model import State
from .failure import StateFailure as _Fail
from .oracle import OracleError, RunInterrupted, ToolRequest
from .step import _Executed, _Shared, _Suspended
from .taint import tool_class


def call_tool(shared: _Shared, machine: str, state: State, ctx: dict[str, Any], position: str) -> _Executed:
    """Execute the tool ``state`` of the machine named ``machine`` at ``position``, its ``on_error`` included."""
    name = state.tool or ""
    oracle = shared.oracle
    if not oracle.has_tool(name):
        raise _Fail(f"state-error: tool: unknown tool '{name}' (register it with the run's tools)")
    input_json = json.dumps(resolve_input(state, ctx), ensure_ascii=False, default=str)
    effect = tool_class(name, shared.options.tool_effects, oracle.tool_effect(name))
    retries_used: dict[int, int] = {}
    attempt, delay = 0, 0.0
    key = idempotency_key(shared.options.secret, f"{position}/tool", input_json)
    while True:
        request = ToolRequest(
            position=f"{position}/tool" + (f"~{attempt}" if attempt else ""),
            machine=machine,
            state=state.id,
            name=name,
            input_json=input_json,
            effect=effect,
            idempotent=state.idempotent,
            attempt=attempt,
            delay=delay,
            idempotency_key=key,
        )
        try:
            return _Executed(_observation_text(oracle.ask(request)), external=True)
        except (_Fail, _Suspended, RunInterrupted):
            raise
        except OracleError as exc:
            error, halt = exc.detail, exc.error
        except Exception as exc:  # the host tool raised: on_error decides, else its message halts the run
            error = str(exc) or type(exc).__name__
            halt = f"state-error: {error}"
        handled = _on_error(shared, state, error, retries_used)
        if handled is None:
            raise _Fail(halt)
        if isinstance(handled, _Executed):
            return handled
        attempt += 1
        delay = handled


def idempotency_key(secret: bytes, position: str, input_json: str) -> str:
    """The key of one tool call: keyed by the run's secret (in its start record, so every copy of the run has
    it), the call's place in the history and its input; the same for every attempt and retry of that call,
    different for any other call or input. Nothing about the run can be read back from it."""
    digest = hashlib.blake2b(f"{position}\x00{input_json}".encode("utf-8", "surrogatepass"), key=secret[:64])
    return "mkl-" + digest.hexdigest()[:40]


def _on_error(shared: _Shared, state: State, error: str, retries_used: dict[int, int]) -> _Executed | float | None:
    """The first matching ``on_error`` matcher: a retry delay, a routed or fallback result, or None."""
    for index, matcher in enumerate(state.on_error):
        if not re.search(matcher.match, error):
            continue
        if matcher.retry:
            used = retries_used.get(index, 0)
            if used >= matcher.retry:
                continue  # retries spent: later matchers may still route or fall back
            retries_used[index] = used + 1
            return float(shared.options.retry_backoff * (2**used))
        if matcher.route is not None:
            return _Executed(f"[tool-error: {error}]", external=True, route=matcher.route)
        if matcher.has_fallback:
            return _Executed(_observation_text(matcher.fallback), external=True)
    return None


def resolve_input(state: State, ctx: dict[str, Any]) -> dict[str, Any]:
    """A tool or call state's ``input:`` over ``ctx``: a lone ``{{path}}`` keeps the value, other text renders."""
    resolved: dict[str, Any] = {}
    for key, value in state.input.items():
        if isinstance(value, str):
            whole = WHOLE_PLACEHOLDER.match(value)
            if whole:
                raw = lookup(ctx, whole.group(1))
                resolved[key] = "" if raw is None else copy.deepcopy(raw)
            else:
                resolved[key] = render(value, ctx).text
        else:
            resolved[key] = copy.deepcopy(value)
    return resolved


def _observation_text(observation: Any) -> str:
    if isinstance(observation, str):
        return observation
    if observation is None:
        return ""
    if isinstance(observation, (dict, list, bool, int, float)):
        return json.dumps(observation, ensure_ascii=False, default=str)
    return str(observation)
