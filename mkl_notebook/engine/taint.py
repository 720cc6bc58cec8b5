"""Untrusted-data bookkeeping (docs/language.md §6): provenance, tool classes, fence nonces."""

from __future__ import annotations

import hashlib
from collections.abc import Collection, Mapping, Sequence
from typing import Any

from ..lang.model import Machine
from .oracle import Effect

READ_ONLY_TOOLS = frozenset(
    {
        "calc",
        "search",
        "search_kb",
        "list_files",
        "read_file",
        "list_machines",
        "describe_machine",
        "read_machine",
        "check_machine",
        "list_workspace",
        "read_workspace_file",
        "search_workspace",
        "ask_user",
    }
)
EFFECTFUL_TOOLS = frozenset({"write_file", "send_reply", "write_machine", "run_machine", "update_task"})


def tool_class(name: str, overrides: Mapping[str, str], declared: str | None) -> Effect:
    """``read`` or ``effect``: run overrides, then the host's declaration, then the built-in table."""
    chosen = overrides.get(name, declared)
    if chosen == "read":
        return "read"
    if chosen == "effect":
        return "effect"
    return "read" if name in READ_ONLY_TOOLS else "effect"


def initial_taint(literals: Mapping[str, Any], ctx: Mapping[str, Any], trusted: Collection[str]) -> set[str]:
    """Keys whose value is not the author's literal: host-supplied, so tainted (and external)."""
    return {key for key, value in ctx.items() if key not in trusted and (key not in literals or literals[key] != value)}


def reaches_tool_state(name: str, registry: Mapping[str, Machine]) -> bool:
    """Whether machine ``name`` or any machine it names in a ``call:``, transitively, has a tool state."""
    seen: set[str] = set()
    pending = [name]
    while pending:
        current = pending.pop()
        if current in seen:
            continue
        seen.add(current)
        machine = registry.get(current)
        if machine is None:
            continue
        if machine.has_tool_state():
            return True
        pending.extend(machine.called_machines())
    return False


class Fences:
    """The fence nonces of one run: keyed BLAKE2b (a MAC) of each call's position under the run secret.

    12 hex digits, unguessable without the secret, reproducible on replay, and
    re-rolled (deterministically) while one occurs inside a fenced value, so a value
    can never close its own fence.
    """

    def __init__(self, secret: bytes) -> None:
        # Keyed once; each nonce starts from a copy (hashlib's way to hash many texts after one shared start).
        self._keyed = hashlib.blake2b(key=secret[:64], digest_size=6)

    def nonce(self, position: str, values: Sequence[str]) -> str:
        attempt = 0
        while True:
            hasher = self._keyed.copy()
            hasher.update(f"{position}#{attempt}".encode())
            digest = hasher.hexdigest()
            for text in values:
                if digest in text:
                    break  # the value would close its own fence: roll again
            else:
                return digest
            attempt += 1
