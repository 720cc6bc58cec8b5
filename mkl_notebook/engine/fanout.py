"""Fan-out (docs/language.md §4): one state run once per item of its ``over:`` list, or ``sample:`` times.

Each branch sees the run's context with ``index`` (and ``item``) laid over it.  Branches run on
worker threads when the oracle waits on something (a live model or tool); meanwhile the run's own
thread tells the observer how many have finished.  A branch's failure never ends the run: it
becomes that branch's ``[branch-error: …]`` marker.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from typing import Any

from ..lang.interpolate import PLACEHOLDER, lookup, root_key
from ..lang.model import State
from .failure import StateFailure as _Fail
from .step import _Executed, _Shared, _Taint
from .taint import reaches_tool_state

FAN_OUT_TICK = 0.1  # seconds between "waiting" events while fan-out branches run

# Executes a fan-out state for one branch: (state, branch context, branch taint, branch position,
# whether the branch's item is external, the branch's share of the cost budget or None).
BranchRun = Callable[[State, dict[str, Any], _Taint, str, bool, int | None], _Executed]


def fan_out(
    shared: _Shared,
    state: State,
    ctx: dict[str, Any],
    taint: _Taint,
    position: str,
    cost_left: int | None,
    run_one: BranchRun,
) -> _Executed:
    """Run every branch of the fan-out ``state`` with ``run_one``; their values, in branch order, are the value.

    ``cost_left`` is the run's token budget still unspent (None without one): a call state's branches
    share it equally.
    """
    item_tainted = item_external = False
    if state.over is not None:
        match = PLACEHOLDER.search(state.over)
        if match is None:
            raise _Fail(f"state-error: over: invalid expression {state.over!r} (expected {{{{path}}}})")
        path = match.group(1)
        items = lookup(ctx, path)
        if items is None:
            raise _Fail(f"state-error: over: path '{path}' not found in context")
        if not isinstance(items, list):
            raise _Fail(f"state-error: over: path '{path}' is not a list (got {type(items).__name__})")
        item_tainted = root_key(path) in taint.tainted
        item_external = root_key(path) in taint.external
        branches = [(index, item) for index, item in enumerate(items)]
    else:
        branches = [(index, None) for index in range(state.sample or 0)]
    count = len(branches)
    if count == 0:
        return _Executed([], external=item_external or state.kind == "tool")
    branch_taint = _Taint(set(taint.tainted), set(taint.external))
    branch_taint.tainted.discard("index")
    branch_taint.external.discard("index")
    for flag, target in ((item_tainted, branch_taint.tainted), (item_external, branch_taint.external)):
        if state.over is not None:
            (target.add if flag else target.discard)("item")
    share = None
    if state.kind == "call" and cost_left is not None:
        share = max(1, cost_left // count)

    def run_branch(branch: tuple[int, Any]) -> _Executed:
        index, item = branch
        branch_ctx = dict(ctx)
        branch_ctx["index"] = index
        if state.over is not None:
            branch_ctx["item"] = item
        branch_position = f"{position}/branch:{index}"
        try:
            done = run_one(state, branch_ctx, branch_taint, branch_position, item_external, share)
        except _Fail as failure:
            return _Executed(f"[branch-error: {failure.branch_text}]", usage=failure.usage, sub_trace=failure.sub_trace)
        if done.route is not None:  # a branch cannot leave the fan-out: the routed error is its marker
            marker = f"[branch-error: {str(done.value)[len('[tool-error: ') : -1]}]"
            return _Executed(marker, usage=done.usage, external=True)
        return done

    observer = shared.options.observer

    def branch_done(branch: tuple[int, Any]) -> _Executed:
        done = run_branch(branch)
        if observer is not None:
            failed = isinstance(done.value, str) and done.value.startswith("[branch-error:")
            observer("branch", {"state": state.id, "index": branch[0], "count": count, "failed": failed})
        return done

    workers = max(1, min(shared.options.max_workers, count))
    if workers == 1 or not shared.oracle.waits:
        outcomes = [branch_done(branch) for branch in branches]
    else:
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="mkl-branch") as pool:
            futures = [pool.submit(branch_done, branch) for branch in branches]
            pending = set(futures)
            while pending and observer is not None:  # the view redraws from this, the run's own thread
                _, pending = wait(pending, timeout=FAN_OUT_TICK, return_when=FIRST_COMPLETED)
                observer("waiting", {"state": state.id, "count": count, "finished": count - len(pending)})
            outcomes = [future.result() for future in futures]
    external = (
        item_external
        or state.kind == "tool"
        or any(outcome.external for outcome in outcomes)
        or (state.kind == "call" and reaches_tool_state(state.call or "", shared.registry))
    )
    return _Executed(
        [outcome.value for outcome in outcomes],
        usage=(sum(o.usage[0] for o in outcomes), sum(o.usage[1] for o in outcomes)),
        # Like the reference: the sub-run traces that exist (a branch that never started a sub-run has none).
        sub_trace=[o.sub_trace for o in outcomes if o.sub_trace is not None] or None,
        external=external,
        truncated=any(outcome.truncated for outcome in outcomes),
        reasonings=[outcome.reasoning for outcome in outcomes] if state.reason else None,
    )
