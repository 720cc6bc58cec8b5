"""Run options a host chooses; none of them is part of a machine document."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Literal

Hitl = Literal["none", "asking", "all"]

# Enough threads that 50 branches at 50 ms each finish in about 0.1 s.
DEFAULT_MAX_WORKERS = 32
MAX_CALL_DEPTH = 8


@dataclass(frozen=True)
class RunOptions:
    """How a host wants a run carried out.

    ``hitl`` decides which escalate gates suspend for a person: ``all`` (every
    escalate whose ``to`` is not END), ``asking`` (only those with an authored
    ``ask:`` — the notebook default) or ``none`` (route as authored).
    """

    cost_budget: int | None = None
    max_cost: float | None = None  # US dollars of model calls, from the provider's prices (extension)
    max_steps: int | None = None  # replaces the root machine's ``budget`` (a resume with more steps)
    # Replace a called machine's ``budget``, by machine name: a resume with more steps where a
    # sub-machine, not the root, ran out of its own.
    budgets: Mapping[str, int] = field(default_factory=lambda: MappingProxyType({}))
    suspendable: bool = False
    hitl: Hitl = "none"
    on_untrusted_flow: Literal["report", "halt"] = "report"
    tool_effects: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    trusted_keys: frozenset[str] = frozenset()
    # Who may answer the run's questions (established names or trusted key names); empty: anyone. The engine
    # never reads it: the run's journal keeps it, and whoever journals a reply holds the reply to it.
    approvers: frozenset[str] = frozenset()
    # A question's deadline, in seconds after it is asked, and what decides it then (None: reject, the safe
    # default; or approve, or escalate:NAME); a reminder falls due remind_after seconds after it is asked. The
    # engine never reads them either: whoever holds the run's lease when a deadline passes journals the decision.
    deadline: int | None = None
    on_timeout: str | None = None
    remind_after: int | None = None
    # Where a new question of the run is announced: each channel as its journal may show it (a digest naming it
    # and its redacted form, never the channel itself). The engine never reads it either.
    notify: frozenset[str] = frozenset()
    max_workers: int = DEFAULT_MAX_WORKERS
    secret: bytes = b""  # per-run secret for fence nonces; random when empty
    ask_human: bool = False  # let every generative state ask the person (extension)
    ask_limit: int = 3
    retry_backoff: float = 0.5  # seconds before the first on_error retry; doubles each time
    # Live progress events, told on the run's own thread except "partial" and "branch" (fan-out threads):
    # enter, step, finish, partial (a live answer's text so far), branch (one finished), waiting (fan-out).
    observer: Callable[[str, dict[str, Any]], None] | None = None

    def with_secret(self) -> RunOptions:
        if self.secret:
            return self
        from dataclasses import replace

        return replace(self, secret=os.urandom(16))
