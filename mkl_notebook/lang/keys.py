"""The keys a machine document may be written with, and where each may stand (docs/language.md §1).

The top level, each kind of state (generative, call, tool), a gate and an ``on_error`` matcher each take
their own set of keys; a few keys of this project's own are allowed on one kind of state each. The
builders refuse a key outside its set and say which set it belongs to; a state lacking one of its kind's
required keys is refused too.
"""

from __future__ import annotations

TOP_KEYS = frozenset(
    {"machine", "entry", "budget", "default_tier", "result", "context", "tools", "hooks", "states", "mklang"}
)
GENERATIVE_KEYS = frozenset(
    {
        "structure",
        "prompt",
        "output",
        "gates",
        "execution",
        "tier",
        "reason",
        "accumulate",
        "sample",
        "over",
        "parse",
        "max_visits",
    }
)
CALL_KEYS = frozenset({"call", "output", "gates", "input", "tier", "accumulate", "sample", "over", "max_visits"})
TOOL_KEYS = frozenset({"tool", "output", "gates", "input", "accumulate", "sample", "over", "max_visits"})
GATE_KEYS = frozenset({"when", "hook", "then", "to", "repair", "escalate", "ask", "reply_to", "fail"})
ON_ERROR_KEYS = frozenset({"match", "retry", "route", "fallback"})

# Extension keys of this project, allowed (with a warning) on one kind of state each.
EXTENSION_KEYS = {"idempotent": "tool", "on_error": "tool", "ask_human": "generative"}

KIND_KEYS = {"generative": GENERATIVE_KEYS, "call": CALL_KEYS, "tool": TOOL_KEYS}
ALL_STATE_KEYS = GENERATIVE_KEYS | CALL_KEYS | TOOL_KEYS | set(EXTENSION_KEYS)
REQUIRED = {
    "generative": ("structure", "prompt", "output", "gates"),
    "call": ("call", "output", "gates"),
    "tool": ("tool", "output", "gates"),
}
