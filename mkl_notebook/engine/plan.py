"""What the run loop works out once per machine instead of on every step."""

from __future__ import annotations

import threading
from dataclasses import dataclass

from ..lang.interpolate import Template, compile_template
from ..lang.model import Gate, Machine, State

UNSPECIFIED_STRUCTURE = "(unspecified)"  # what an unvalidated state without `structure:` renders as
REPAIR_FEEDBACK = "\n\n[Repair feedback] The previous attempt did not satisfy: '{when}'. Fix it."


@dataclass(frozen=True, slots=True)
class StatePlan:
    tier: str
    structure: str
    fanout: bool
    template: Template  # the compiled prompt
    # The first gate is a catch-all that is always eligible: the transition needs no scan, judge or hook.
    leading_otherwise: Gate | None
    feedback: tuple[str, ...]  # per gate: what a repair through it appends to the next prompt


def _plan(machine: Machine, state: State) -> StatePlan:
    first = state.gates[0] if state.gates else None
    leading = first if first is not None and first.is_otherwise and first.policy != "repair" else None
    return StatePlan(
        tier=machine.tier_of(state),
        structure=state.structure if state.structure is not None else UNSPECIFIED_STRUCTURE,
        fanout=state.is_fanout,
        template=compile_template(state.prompt),
        leading_otherwise=leading,
        feedback=tuple(REPAIR_FEEDBACK.format(when=gate.when) for gate in state.gates),
    )


_PLANS: dict[int, tuple[Machine, dict[str, State], dict[str, StatePlan]]] = {}
_PLANS_MAX = 256
_lock = threading.Lock()


def states_of(machine: Machine) -> dict[str, State]:
    """The machine's states as a plain dict (the model's read-only mapping is slower to index)."""
    return _cached(machine)[1]


def plans_for(machine: Machine) -> dict[str, StatePlan]:
    """Each state's plan; machines are immutable, so one plan serves every run of the same model."""
    return _cached(machine)[2]


def _cached(machine: Machine) -> tuple[Machine, dict[str, State], dict[str, StatePlan]]:
    cached = _PLANS.get(id(machine))
    if cached is not None and cached[0] is machine:  # the entry holds the machine, so its id cannot be reused
        return cached
    entry = (
        machine,
        dict(machine.states),
        {state_id: _plan(machine, state) for state_id, state in machine.states.items()},
    )
    with _lock:
        if len(_PLANS) >= _PLANS_MAX:
            _PLANS.clear()
        _PLANS[id(machine)] = entry
    return entry
