"""Python tools and hooks a host registers, and the oracle that combines them with a model.

``@tool`` and ``@hook`` register ordinary Python functions (in a notebook, or in
a ``--tools FILE.py`` for the command line).  :class:`HostOracle` answers tool
and hook requests from them and passes LLM requests to a model oracle (scripted
or real).
"""

from __future__ import annotations

import functools
import inspect
import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from ..engine.oracle import Effect, HookRequest, Oracle, OracleRequest, Partial, ToolRequest

F = TypeVar("F", bound=Callable[..., Any])


@dataclass(frozen=True)
class RegisteredTool:
    name: str
    function: Callable[..., Any]
    effect: Effect | None


class Registry:
    """Named tools and hooks; thread-safe to read while runs use it."""

    def __init__(self) -> None:
        self.tools: dict[str, RegisteredTool] = {}
        self.hooks: dict[str, Callable[..., Any]] = {}
        self._lock = threading.Lock()

    def tool(
        self, function: F | None = None, *, name: str | None = None, effect: Effect | None = None
    ) -> F | Callable[[F], F]:
        """Register ``function`` as a tool; ``effect`` is "read" or "effect" (docs/language.md §6)."""
        if effect not in (None, "read", "effect"):
            raise ValueError(f"effect must be 'read' or 'effect', not {effect!r}")

        def register(fn: F) -> F:
            with self._lock:
                self.tools[name or fn.__name__] = RegisteredTool(name or fn.__name__, fn, effect)
            return fn

        return register(function) if function is not None else register

    def hook(self, function: F | None = None, *, name: str | None = None) -> F | Callable[[F], F]:
        """Register ``function(context, output) -> bool`` as a gate hook."""

        def register(fn: F) -> F:
            with self._lock:
                self.hooks[name or fn.__name__] = fn
            return fn

        return register(function) if function is not None else register


default_registry = Registry()
tool = default_registry.tool
hook = default_registry.hook


KEY_PARAMETER = "idempotency_key"


def _call_tool(function: Callable[..., Any], arguments: dict[str, Any], key: str | None = None) -> Any:
    """Call with keyword arguments when the signature takes them, else with the input dict; a tool with an
    ``idempotency_key`` parameter is given the call's key (docs/language.md, ``idempotent: false``)."""
    try:
        signature = inspect.signature(function)
    except (TypeError, ValueError):
        return function(arguments)
    parameters = list(signature.parameters.values())
    takes_kwargs = any(p.kind is p.VAR_KEYWORD for p in parameters)
    names = {p.name for p in parameters if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
    given = {KEY_PARAMETER: key} if key is not None and KEY_PARAMETER in names else {}
    others = [p for p in parameters if p.name not in given]
    if takes_kwargs or (arguments and set(arguments) <= names) or (not arguments and not others):
        return function(**{**arguments, **given})
    return function(arguments, **given)


def _delayed_tool(delay: float, function: Callable[..., Any], arguments: dict[str, Any], key: str | None) -> Any:
    """A tool call made elsewhere: its retry delay first, as here."""
    if delay:
        time.sleep(delay)
    return _call_tool(function, arguments, key)


def _call_hook(function: Callable[..., Any], context: dict[str, Any], output: str) -> bool:
    try:
        count = len(inspect.signature(function).parameters)
    except (TypeError, ValueError):
        count = 2
    return bool(function(context, output) if count >= 2 else function(context))


class HostOracle(Oracle):
    """Python tools and hooks from a registry; every LLM and reply request goes to ``model``."""

    def __init__(self, model: Oracle, registry: Registry | None = None) -> None:
        self.model = model
        self.registry = registry or default_registry

    def has_tool(self, name: str) -> bool:
        return name in self.registry.tools or self.model.has_tool(name)

    def has_hook(self, name: str) -> bool:
        return name in self.registry.hooks or self.model.has_hook(name)

    def tool_effect(self, name: str) -> Effect | None:
        registered = self.registry.tools.get(name)
        return registered.effect if registered else self.model.tool_effect(name)

    def replayed(self, request: OracleRequest) -> None:
        self.model.replayed(request)

    @property
    def waits(self) -> bool:
        return bool(self.registry.tools or self.registry.hooks) or self.model.waits  # host code may do I/O

    def remote_call(self, request: OracleRequest) -> Callable[[], Any] | None:
        """A registered tool or hook ships as the function with its arguments; the rest as the model's."""
        if isinstance(request, ToolRequest) and request.name in self.registry.tools:
            function = self.registry.tools[request.name].function
            arguments = json.loads(request.input_json)
            return functools.partial(_delayed_tool, request.delay, function, arguments, request.idempotency_key)
        if isinstance(request, HookRequest) and request.name in self.registry.hooks:
            hook = self.registry.hooks[request.name]
            return functools.partial(_call_hook, hook, json.loads(request.context_json), request.output)
        return self.model.remote_call(request)

    def stream(self, request: OracleRequest, partial: Partial) -> Any:
        if isinstance(request, (ToolRequest, HookRequest)):
            return self.ask(request)
        return self.model.stream(request, partial)

    def ask(self, request: OracleRequest) -> Any:
        if isinstance(request, ToolRequest) and request.name in self.registry.tools:
            if request.delay:
                time.sleep(request.delay)
            function = self.registry.tools[request.name].function
            return _call_tool(function, json.loads(request.input_json), request.idempotency_key)
        if isinstance(request, HookRequest) and request.name in self.registry.hooks:
            return _call_hook(self.registry.hooks[request.name], json.loads(request.context_json), request.output)
        return self.model.ask(request)
