"""What the run loop works out once per state and run instead of on every step."""

from __future__ import annotations

from dataclasses import dataclass

from ..lang.interpolate import Template, compile_template
from ..lang.model import Machine, State

UNSPECIFIED_STRUCTURE = "(unspecified)"  # what an unvalidated state without `structure:` renders as
REPAIR_FEEDBACK = "\n\n[Repair feedback] The previous attempt did not satisfy: '{when}'. Fix it."


@dataclass(frozen=True, slots=True)
class StatePlan:
    tier: str
    structure: str
    template: Template  # the compiled prompt
    feedback: tuple[str, ...]  # per gate: what a repair through it appends to the next prompt


def plan_state(machine: Machine, state: State) -> StatePlan:
    return StatePlan(
        tier=machine.tier_of(state),
        structure=state.structure if state.structure is not None else UNSPECIFIED_STRUCTURE,
        template=compile_template(state.prompt),
        feedback=tuple(REPAIR_FEEDBACK.format(when=gate.when) for gate in state.gates),
    )


def plan_machine(machine: Machine) -> dict[str, StatePlan]:
    """Each state's plan, by state id."""
    return {state_id: plan_state(machine, state) for state_id, state in machine.states.items()}
