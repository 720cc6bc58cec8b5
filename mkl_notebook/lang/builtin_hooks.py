"""The hooks every run knows without a host registering them (docs/language.md, "Built-in hooks").

A gate's ``hook: NAME`` asks the host's predicate NAME; when the host registers none by that name, these
answer. They are pure functions of the run's context and the state's output, so that ``mkl check`` and
the engine agree on which names exist. A host hook of the same name wins.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from .files import parse_json
from .interpolate import fmt

Hook = Callable[[Mapping[str, Any], str], bool]
PARAMETRIC_PREFIXES = ("eq:", "neq:")
WORKSPACE_TOOLS = frozenset({"list_workspace", "read_workspace_file", "search_workspace"})


def _amount_le_100(ctx: Mapping[str, Any], _output: str) -> bool:
    """Context ``amount`` is a number no larger than 100 (absent or not a number: false)."""
    amount = ctx.get("amount")
    if amount is None or isinstance(amount, (list, dict)):
        return False
    try:
        return float(amount) <= 100
    except (TypeError, ValueError):
        return False


def _has_receipt(ctx: Mapping[str, Any], _output: str) -> bool:
    """Context ``has_receipt`` is truthy."""
    return bool(ctx.get("has_receipt"))


def _auto_approve_ok(ctx: Mapping[str, Any], output: str) -> bool:
    """A receipt, and an amount no larger than 100."""
    return _has_receipt(ctx, output) and _amount_le_100(ctx, output)


def _json_object(value: Any) -> dict[str, Any] | None:
    if isinstance(value, str):
        try:
            value = parse_json(value)
        except ValueError:
            return None
    return value if isinstance(value, dict) else None


def _write_failed(_ctx: Mapping[str, Any], output: str) -> bool:
    """The output is a file-write observation that failed: a non-null ``error``, or ``written: false``."""
    observation = _json_object(output)
    if observation is None:
        return False
    return observation.get("error") is not None or ("written" in observation and observation["written"] is False)


def _console_workspace_ready(ctx: Mapping[str, Any], _output: str) -> bool:
    """A console agent may answer: no workspace is required, or a brief exists and a workspace tool was used."""
    if not ctx.get("workspace_required"):
        return True
    observations = ctx.get("observation")
    if not ctx.get("workspace_brief") or not isinstance(observations, list):
        return False
    return any(
        (payload := _json_object(item)) is not None and payload.get("tool") in WORKSPACE_TOOLS
        for item in observations
        if isinstance(item, str)
    )


HOOKS: dict[str, Hook] = {
    "always_true": lambda _ctx, _output: True,
    "always_false": lambda _ctx, _output: False,
    "amount_le_100": _amount_le_100,
    "has_receipt": _has_receipt,
    "auto_approve_ok": _auto_approve_ok,
    "write_failed": _write_failed,
    "console_workspace_ready": _console_workspace_ready,
}


def _parametric(name: str) -> tuple[str, str, bool] | None:
    """``eq:KEY:VALUE`` / ``neq:KEY:VALUE`` as (key, value, equal), or None."""
    for prefix, equal in (("eq:", True), ("neq:", False)):
        if name.startswith(prefix):
            key, sep, expected = name[len(prefix) :].partition(":")
            return (key, expected, equal) if sep and key else None
    return None


def is_builtin(name: str) -> bool:
    """Whether ``name`` is a built-in hook (a fixed name, or a well-formed ``eq:``/``neq:`` form)."""
    return name in HOOKS or _parametric(name) is not None


def decide(name: str, ctx: Mapping[str, Any], output: str) -> bool | None:
    """The built-in hook's verdict, or None when ``name`` is not a built-in."""
    if name in HOOKS:
        return HOOKS[name](ctx, output)
    parametric = _parametric(name)
    if parametric is None:
        return None
    key, expected, equal = parametric
    return (fmt(ctx.get(key)).strip() == expected.strip()) is equal


def names() -> str:
    """The built-ins, as a message lists them."""
    return ", ".join([*HOOKS, "eq:KEY:VALUE", "neq:KEY:VALUE"])
