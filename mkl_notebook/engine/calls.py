"""What crosses a call to another machine (docs/language.md §2, §6), either way.

Into the callee: its own ``context:`` under the call state's resolved ``input:``, and which of those
inputs are tainted.  Back to the caller: the callee's result, or its suspension or failure.  The
child run itself is started by the run loop (:mod:`.runner`), which owns budgets and nesting.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from ..lang.interpolate import PLACEHOLDER, root_key
from ..lang.model import Machine, State
from .failure import StateFailure as _Fail
from .result import RunResult
from .step import _Executed, _Suspended, _Taint
from .taint import reaches_tool_state
from .tools import resolve_input


def callee_context(
    state: State, ctx: dict[str, Any], taint: _Taint, callee: Machine
) -> tuple[dict[str, Any], set[str], bool]:
    """The callee's starting context, the input keys that are tainted, and whether any input reads an external key."""
    inputs = resolve_input(state, ctx)
    child_ctx = copy.deepcopy(dict(callee.context))
    child_ctx.update(inputs)
    tainted_inputs: set[str] = set()
    reads_external = False
    for key, value in state.input.items():
        if isinstance(value, str):
            roots = {root_key(m.group(1)) for m in PLACEHOLDER.finditer(value)}
            if roots & taint.tainted:
                tainted_inputs.add(key)
            if roots & taint.external:
                reads_external = True
    child_tainted = tainted_inputs  # literals in the caller's document are the author's, so trusted
    return child_ctx, child_tainted, reads_external


def call_outcome(result: RunResult, name: str, reads_external: bool, registry: Mapping[str, Machine]) -> _Executed:
    """What the call of machine ``name`` gives its state; a suspension or failure of the callee is raised."""
    usage = (result.usage["input_tokens"], result.usage["output_tokens"])
    if result.status == "suspended":
        raise _Suspended(result)
    if result.status != "done":
        raise _Fail(
            f"call-failed: {result.error}",
            policy="call-failed",
            usage=usage,
            sub_trace=result.trace,
            branch_text=result.error or "",
        )
    external = reads_external or reaches_tool_state(name, registry)
    return _Executed(result.result, usage=usage, sub_trace=result.trace, external=external)
