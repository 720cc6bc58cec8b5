"""The run loop (docs/language.md §2–§7).

A run is a deterministic function of the machine, its inputs, its options and
the answers of one :class:`Oracle`.  Every request carries a stable position
(``root/3:draft#2/produce``) so a journal can replay it.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping
from typing import Any

from ..lang import stdlib
from ..lang.interpolate import fmt, root_key, set_path
from ..lang.model import END, Gate, Machine, State
from .calls import call_outcome, callee_context
from .failure import StateFailure as _Fail
from .fanout import FAN_OUT_TICK as FAN_OUT_TICK  # re-exported: the runner's public name, as ever
from .fanout import fan_out
from .gates import GateScan, select_gate
from .options import MAX_CALL_DEPTH, RunOptions
from .oracle import AwaitingHuman, CannotAnswer, HumanReply, Oracle, OracleError, ReplyRequest, Usage, note_path
from .produce import produce
from .result import RunResult, Status, TraceStep, cost_of, most_visited, seconds_of
from .step import _add_cost, _Asked, _Executed, _Shared, _Suspended, _Taint, _unfinished_call
from .taint import initial_taint, tool_class
from .tools import call_tool

ROOT_PREFIX = "root"
_ROOT_STEP = re.compile(rf"^{ROOT_PREFIX}/(\d+):")


def root_step(position: str) -> int | None:
    """The step of the root run (1-based) that a request position belongs to, nested calls included."""
    found = _ROOT_STEP.match(position)
    return int(found.group(1)) + 1 if found else None


class _MachineRun:
    """One run of one machine, the root or a call's: :meth:`run` visits states until done, halt or suspension."""

    def __init__(
        self,
        shared: _Shared,
        machine: Machine,
        ctx: dict[str, Any],
        taint: _Taint,
        *,
        depth: int,
        prefix: str,
        budget: int,
        cost_limit: int | None,
        suspendable: bool,
        flow_tainted: bool,
        can_ask: bool,
    ) -> None:
        self.shared = shared
        self.machine = machine
        self.ctx = ctx
        self.taint = taint
        self.depth = depth
        self.prefix = prefix
        self.budget = budget
        self.cost_limit = cost_limit
        self.suspendable = suspendable
        self.flow_tainted = flow_tainted
        self.can_ask = can_ask  # branches never suspend, so they never ask a person either
        self.steps = 0
        self.iteration = 0
        self.visits: dict[str, int] = {}
        self.repair_left: dict[tuple[str, int], int] = {}
        self.feedback = ""
        self.noted: set[str] = set()  # the context paths a person's note was written to in this run
        self.usage = Usage()
        self.trace: list[TraceStep] = []
        self.last_value: Any = None
        self.states = dict(machine.states)  # a plain dict: the model's read-only mapping is slower to index
        self.gates = GateScan(
            oracle=shared.oracle, machine=machine.name, ctx=ctx, nonce=shared.fences.nonce, ask_model=shared.ask_model
        )
        self._calls_before = 0  # the run tree's model calls before the state being visited
        self.observer = shared.options.observer

    # -- outcomes --------------------------------------------------------------

    def _result(
        self,
        status: Status,
        error: str | None = None,
        *,
        at: str | None = None,
        result: Any = None,
        diagnosis: dict[str, Any] | None = None,
        ask: str | None = None,
        reply_to: str | None = None,
        pending: str | None = None,
        question: str | None = None,
        machine: str | None = None,
        pending_step: TraceStep | None = None,
        about: str | None = None,
    ) -> RunResult:
        if status == "suspended" and machine is None and self.depth > 0:
            machine = self.machine.name
        run_result = RunResult(
            status=status,
            error=error,
            result=result,
            at=at,
            usage=self.usage.as_dict(),
            trace=self.trace,
            context=self.ctx,
            diagnosis=diagnosis,
            ask=ask,
            reply_to=reply_to,
            visits=dict(self.visits),
            pending=pending,
            question=question,
            machine=machine,
            pending_step=pending_step,
            answers=list(self.shared.answers) if self.depth == 0 else [],
            model_calls=list(self.shared.model_calls) if self.depth == 0 else [],
            about=about,
        )
        if self.depth == 0 and self.observer is not None:
            self.observer("finish", {"result": run_result})
        return run_result

    def _halt(self, error: str, at: str | None) -> RunResult:
        return self._result("halt", error, at=at)

    def _stop(self, failure: _Fail, state_id: str) -> RunResult:
        """Halt on a failure; a provider outage in a suspendable run suspends so it can be retried."""
        if failure.suspendable and self.suspendable:
            return self._result("suspended", failure.error, at=state_id)
        return self._halt(failure.error, state_id)

    def _diagnosis(self) -> dict[str, Any] | None:
        busiest = most_visited(self.visits)
        return None if busiest is None else {"most_visited_state": busiest[0], "visits": busiest[1]}

    def _exhausted(self, reason: str, state_id: str) -> RunResult:
        if self.suspendable:
            return self._result("suspended", reason, at=state_id)
        return self._result("halt", reason, diagnosis=self._diagnosis())

    def _record(self, step: TraceStep) -> None:
        calls = self.shared.model_calls[self._calls_before :]  # this state's, nested calls and branches included
        if calls:
            cost = cost_of(calls)
            if cost is not None:
                step["cost_usd"] = cost
            seconds = seconds_of(calls)
            if seconds is not None:
                step["seconds"] = round(seconds, 3)
        self.trace.append(step)
        if self.observer is not None:
            self.observer(
                "step",
                {
                    "machine": self.machine.name,
                    "depth": self.depth,
                    "step": step,
                    "steps": self.steps,
                    "usage": self.usage.as_dict(),
                    "cost_usd": self.shared.spent(),
                },
            )

    # -- the loop --------------------------------------------------------------

    def run(self) -> RunResult:
        state_id = self.machine.entry
        while True:
            if self.steps >= self.budget:
                return self._exhausted("budget-exhausted", state_id)
            if self.cost_limit is not None and self.usage.total >= self.cost_limit:
                return self._exhausted("cost-exhausted", state_id)
            spend = self.shared.over_spend()
            if spend == "spend-exhausted":
                return self._exhausted(spend, state_id)
            if spend is not None:
                return self._halt(spend, state_id)
            state = self.states.get(state_id)
            if state is None:
                return self._halt(f"state-error: unknown state '{state_id}'", state_id)
            visits = self.visits.get(state_id, 0) + 1
            if state.max_visits is not None and visits > state.max_visits:
                return self._halt("loop-ceiling", state_id)
            self.visits[state_id] = visits
            position = f"{self.prefix}/{self.iteration}:{state_id}#{visits}"
            self.iteration += 1
            self._calls_before = len(self.shared.model_calls)
            if self.observer is not None:
                self.observer(
                    "enter",
                    {
                        "machine": self.machine.name,
                        "depth": self.depth,
                        "state": state_id,
                        "steps": self.steps,
                        "usage": self.usage.as_dict(),
                        "cost_usd": self.shared.spent(),
                    },
                )
            try:
                outcome = self._visit(state, position)
            except _Suspended as suspended:  # a call suspended: this run waits too, at the innermost state
                inner = suspended.result
                return self._result(
                    "suspended",
                    inner.error,
                    at=inner.at,
                    ask=inner.ask,
                    reply_to=inner.reply_to,
                    question=inner.question,
                    pending=inner.pending,
                    machine=inner.machine,
                    pending_step=_unfinished_call(state, self.machine.tier_of(state), inner),
                    about=inner.about,
                )
            except _Asked as asked:
                self.usage.add(*asked.usage)
                return self._result("suspended", "asked", at=state_id, question=asked.question, pending=asked.position)
            except CannotAnswer as missing:  # e.g. no model where the run is resumed: it waits for one
                return self._result("suspended", missing.reason, at=missing.state)
            if isinstance(outcome, RunResult):
                return outcome
            state_id = outcome

    def _visit(self, state: State, position: str) -> RunResult | str:
        """Execute one state and take its transition: the next state id, or the run's end."""
        step: TraceStep = {"step": None, "state": state.id, "tier": self.machine.tier_of(state)}
        feedback = self.feedback
        if feedback:
            self.feedback = ""
        if state.kind == "tool":
            refused = self._flow_guard(state, step)
            if refused is not None:
                return refused
        try:
            if state.is_fanout:
                cost_left = None if self.cost_limit is None else self.cost_limit - self.usage.total
                executed = fan_out(self.shared, state, self.ctx, self.taint, position, cost_left, self._branch)
                self.steps += max(1, len(executed.value))
                step["branches"] = [fmt(v) for v in executed.value]
                if state.reason:
                    step["reasonings"] = executed.reasonings or []
                if executed.sub_trace is not None:
                    step["sub_trace"] = executed.sub_trace  # one trace per branch
            else:
                self.steps += 1
                if state.kind == "generative":
                    executed = produce(self.shared, self.machine, state, self.ctx, self.taint, feedback, position)
                else:
                    executed = self._execute(state, self.ctx, self.taint, position)
                step["output"] = fmt(executed.value)
                if executed.reasoning is not None:
                    step["reasoning"] = executed.reasoning
                if executed.sub_trace is not None:
                    step["sub_trace"] = executed.sub_trace
        except _Fail as failure:
            self.usage.add(*failure.usage)
            if failure.policy is None:
                return self._stop(failure, state.id)
            step["step"] = self.steps
            if failure.sub_trace is not None:
                step["sub_trace"] = failure.sub_trace
            step.update({"gate": None, "policy": failure.policy, "to": None})
            _add_cost(step, failure.usage)
            self._record(step)
            return self._halt(failure.error, state.id)
        usage = executed.usage
        if usage[0] or usage[1]:
            self.usage.add(*usage)
            _add_cost(step, usage)
        if executed.truncated:
            step["truncated"] = True
        self._deposit(state, executed)
        step["step"] = self.steps
        if executed.route is not None:
            return self._error_route(state, step, executed.route)
        return self._route(state, step, executed, position)

    def _error_route(self, state: State, step: TraceStep, target: str) -> RunResult | str:
        step.update({"gate": "on_error", "gate_via": "on_error", "policy": "route", "to": target})
        self._record(step)
        if target == END:
            return self._result(
                "done", result=self.ctx.get(self.machine.result) if self.machine.result else self.last_value
            )
        if target not in self.states:
            return self._halt(f"state-error: unknown state '{target}'", state.id)
        return target

    def _deposit(self, state: State, executed: _Executed) -> None:
        key = state.output
        value = executed.value
        if state.accumulate:
            existing = self.ctx.get(key)
            if key not in self.ctx:
                self.ctx[key] = [value]
            elif isinstance(existing, list):  # any other value, null included, is wrapped first (§4)
                existing.append(value)
            else:
                self.ctx[key] = [existing, value]
        else:
            self.ctx[key] = value
        self.last_value = value
        self.taint.tainted.add(key)
        if executed.external:
            self.taint.external.add(key)  # once external, a key stays external (§6 only ever adds taint)

    # -- gates and transitions ---------------------------------------------------

    def _route(self, state: State, step: TraceStep, executed: _Executed, position: str) -> RunResult | str:
        first = state.gates[0] if state.gates else None
        if first is not None and first.is_otherwise and first.policy != "repair":
            step["gate_via"] = "otherwise"  # a leading catch-all fires at once: nothing to scan, judge or call
            return self._transition(state, step, 0, first, position)
        eligible = [
            (index, gate)
            for index, gate in enumerate(state.gates)
            if gate.policy != "repair" or self.repair_left.get((state.id, index), gate.repair) > 0
        ]
        output_text = step["output"] if "output" in step else fmt(executed.value)
        reasoning = executed.reasoning
        if executed.reasonings is not None:  # a fan-out: the judge sees every branch's scratchpad
            reasoning = "\n---\n".join(r for r in executed.reasonings if r) or None
        try:
            outcome = select_gate(
                self.gates, state, self.machine.tier_of(state), position, eligible, output_text, reasoning
            )
        except _Fail as failure:
            return self._stop(failure, state.id)
        self.usage.add(*outcome.usage)
        _add_cost(step, outcome.usage)
        if outcome.gate is None:  # a halt step carries only what §7's table names
            if outcome.failure == "judge-unparseable":
                step["judge_fallback"] = True
            step.update({"gate": None, "policy": outcome.failure, "to": None})
            self._record(step)
            return self._halt(outcome.failure or "no-gate-matched", state.id)
        step.update(outcome.annotations)
        if outcome.judged_by_llm and not outcome.via_hook and self._external_in_scope():
            self.flow_tainted = True
            step["decision_tainted"] = True
        elif outcome.via_hook:
            self.flow_tainted = False
        return self._transition(state, step, outcome.position, outcome.gate, position)

    def _external_in_scope(self) -> bool:
        return not self.taint.external.isdisjoint(self.ctx)

    def _transition(self, state: State, step: TraceStep, index: int, gate: Gate, position: str) -> RunResult | str:
        policy = gate.policy
        target = gate.to
        step["gate"] = gate.when
        step["policy"] = policy
        if policy == "fail":
            step["to"] = None
            self._record(step)
            return self._halt("gate-fail", state.id)
        step["to"] = target
        if target is None:
            self._record(step)
            return self._halt("state-error: gate-missing-to", state.id)
        if policy == "repair":
            key = (state.id, index)
            self.repair_left[key] = self.repair_left.get(key, gate.repair) - 1
            self.feedback = gate.feedback
        self._record(step)
        if target == END:
            value = self.ctx.get(self.machine.result) if self.machine.result else self.last_value
            return self._result("done", result=value)
        if target not in self.states:
            return self._halt(f"state-error: unknown state '{target}'", state.id)
        if policy == "escalate" and self._escalate_suspends(gate):
            about = step["output"] if "output" in step else fmt(step.get("branches"))
            return self._await_reply(gate, target, f"{position}/reply@{index}", about)
        return target

    def _escalate_suspends(self, gate: Gate) -> bool:
        if not self.can_ask:
            return False
        hitl = self.shared.options.hitl
        return hitl == "all" or (hitl == "asking" and gate.ask is not None)

    def _await_reply(self, gate: Gate, handler: str, position: str, about: str) -> RunResult | str:
        reply_to = gate.reply_to or "human.reply"
        request = ReplyRequest(
            position=position, machine=self.machine.name, state=handler, ask=gate.ask, reply_to=reply_to, about=about
        )
        try:
            reply = self.shared.oracle.ask(request)
        except AwaitingHuman:
            return self._result(
                "suspended", "escalated", at=handler, ask=gate.ask, reply_to=reply_to, pending=position, about=about
            )
        except OracleError as exc:
            return self._halt(exc.error, handler)
        self.shared.answered(position, self.machine.name, handler, gate.ask, reply_to, reply, about)
        value = reply.value if isinstance(reply, HumanReply) else reply
        set_path(self.ctx, reply_to, value)
        self._note(reply_to, reply.note if isinstance(reply, HumanReply) else None)
        root = root_key(reply_to)
        self.taint.tainted.add(root)
        self.taint.external.add(root)
        self.flow_tainted = False  # the person confirmed the pending decision
        return handler

    def _note(self, reply_to: str, note: str | None) -> None:
        """Write the note given with a reply beside it (tainted and external, as the reply is). An answer
        without one leaves no note there: a note an earlier answer at that path wrote is taken away, and a
        path no note was written to is left as it is (an author's own key of that name stays)."""
        path = note_path(reply_to)
        if note is None:
            if path in self.noted:
                _drop_path(self.ctx, path)
                self.noted.discard(path)
            return
        set_path(self.ctx, path, note)
        self.noted.add(path)
        root = root_key(path)
        self.taint.tainted.add(root)
        self.taint.external.add(root)

    # -- executing a state -------------------------------------------------------

    def _flow_guard(self, state: State, step: TraceStep) -> RunResult | None:
        if not self.flow_tainted:
            return None
        options = self.shared.options
        name = state.tool or ""
        if tool_class(name, options.tool_effects, self.shared.oracle.tool_effect(name)) != "effect":
            return None
        if options.on_untrusted_flow == "halt":
            step.update(
                {
                    "step": self.steps,
                    "gate": None,
                    "policy": "untrusted-control-flow",
                    "to": None,
                    "untrusted_control_flow": True,
                }
            )
            self._record(step)
            return self._halt("untrusted-control-flow", state.id)
        step["untrusted_control_flow"] = True
        return None

    def _execute(
        self,
        state: State,
        ctx: dict[str, Any],
        taint: _Taint,
        position: str,
        in_branch: bool = False,
        cost_limit: int | None = None,
    ) -> _Executed:
        """A tool or call state (generative states go through :func:`.produce.produce`)."""
        if state.kind == "tool":
            return call_tool(self.shared, self.machine.name, state, ctx, position)
        return self._call(state, ctx, taint, position, in_branch, cost_limit)

    def _branch(
        self,
        state: State,
        ctx: dict[str, Any],
        taint: _Taint,
        position: str,
        item_external: bool,
        share: int | None,
    ) -> _Executed:
        """One branch of the fan-out ``state`` (see :func:`.fanout.fan_out`); a branch never asks a person."""
        if state.kind == "generative":
            return produce(
                self.shared,
                self.machine,
                state,
                ctx,
                taint,
                "",
                position,
                sampled=state.sample is not None,
                extra_external=item_external,
                in_branch=True,
            )
        return self._execute(state, ctx, taint, position, True, share)

    def _call(
        self, state: State, ctx: dict[str, Any], taint: _Taint, position: str, in_branch: bool, cost_limit: int | None
    ) -> _Executed:
        """A call state: the called machine runs as a child of this run (see :mod:`.calls`)."""
        name = state.call or ""
        registry = self.shared.registry
        callee = registry.get(name)
        if callee is None:
            raise _Fail(f"state-error: call: unknown machine '{name}'")
        child_ctx, child_tainted, reads_external = callee_context(state, ctx, taint, callee)
        if cost_limit is None and self.cost_limit is not None:
            cost_limit = max(0, self.cost_limit - self.usage.total)
        child = _MachineRun(
            self.shared,
            callee,
            child_ctx,
            _Taint(set(child_tainted), set(child_tainted)),
            depth=self.depth + 1,
            prefix=f"{position}/call:{name}",
            budget=self.shared.options.budgets.get(name, callee.budget),
            cost_limit=cost_limit,
            suspendable=self.suspendable and not in_branch,
            flow_tainted=self.flow_tainted,
            can_ask=self.can_ask and not in_branch,
        )
        result = child._result("halt", "call-depth-exceeded") if child.depth > MAX_CALL_DEPTH else child.run()
        return call_outcome(result, name, reads_external, registry)


def run_machine(
    machine: Machine,
    oracle: Oracle,
    *,
    registry: Mapping[str, Machine] | None = None,
    context: Mapping[str, Any] | None = None,
    input: Mapping[str, Any] | None = None,
    options: RunOptions | None = None,
) -> RunResult:
    """Run ``machine`` to done, halt or suspension.

    ``context`` then ``input`` are host values laid over the machine's own
    ``context:``; values that differ from the author's literals are tainted.
    """
    options = (options or RunOptions()).with_secret()
    full_registry = stdlib.with_library(machine, registry or {})  # the user's machines shadow the library's
    ctx = copy.deepcopy(dict(machine.context))
    for overlay in (context, input):
        if overlay:
            ctx.update(copy.deepcopy(dict(overlay)))
    tainted = initial_taint(machine.context, ctx, options.trusted_keys)
    shared = _Shared(oracle, full_registry, options, options.secret)
    run = _MachineRun(
        shared,
        machine,
        ctx,
        _Taint(set(tainted), set(tainted)),
        depth=0,
        prefix=ROOT_PREFIX,
        budget=options.max_steps if options.max_steps is not None else machine.budget,
        cost_limit=options.cost_budget,
        suspendable=options.suspendable,
        flow_tainted=False,
        can_ask=True,
    )
    shared.root_trace = run.trace
    return run.run()


def _drop_path(target: dict[str, Any], path: str) -> None:
    """Take away the value at a dotted path, if there is one (the levels above it stay)."""
    *parents, last = path.split(".")
    for part in parents:
        nested = target.get(part)
        if not isinstance(nested, dict):
            return
        target = nested
    target.pop(last, None)
