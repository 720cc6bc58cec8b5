"""The immutable model of an mkl machine (docs/language.md §1)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Literal

from .interpolate import Template, compile_template

END = "END"
UNSPECIFIED_STRUCTURE = "(unspecified)"  # the contract of an unvalidated state without `structure:`
REPAIR_FEEDBACK = "\n\n[Repair feedback] The previous attempt did not satisfy: '{when}'. Fix it."
TIERS = ("fast", "balanced", "reasoning")
SPEC_VERSIONS = ("0.2", "0.3", "0.4")
VERSION_ALIASES = {"0.2.0": "0.2", "0.3.0": "0.3", "0.4.0": "0.4"}  # the same versions, written out in full

StateKind = Literal["generative", "call", "tool"]
Policy = Literal["ok", "repair", "escalate", "fail"]

_EMPTY: Mapping[str, Any] = MappingProxyType({})


def is_otherwise(when: str) -> bool:
    """``when: otherwise`` is the catch-all, compared case-insensitively and stripped."""
    return when.strip().lower() == "otherwise"


@dataclass(frozen=True, slots=True)
class Gate:
    when: str
    policy: Policy | None  # None only for unvalidated documents with no policy key
    to: str | None = None
    repair: int = 0
    hook: str | None = None
    ask: str | None = None
    reply_to: str | None = None
    line: int = 0
    # Derived once per gate, as the engine asks on every step.
    is_otherwise: bool = field(init=False, repr=False, compare=False)
    is_prose: bool = field(init=False, repr=False, compare=False)  # decided by the judge: no hook, no catch-all
    feedback: str = field(init=False, repr=False, compare=False)  # what a repair through it adds to the next prompt

    def __post_init__(self) -> None:
        catch_all = is_otherwise(self.when)
        object.__setattr__(self, "is_otherwise", catch_all)  # frozen: set once, here
        object.__setattr__(self, "is_prose", self.hook is None and not catch_all)
        object.__setattr__(self, "feedback", REPAIR_FEEDBACK.format(when=self.when))


@dataclass(frozen=True)
class OnError:
    """One ``on_error:`` matcher of a tool state (an extension of this project)."""

    match: str  # a regular expression searched in the error text; "" matches everything
    retry: int = 0
    route: str | None = None
    fallback: Any = None
    has_fallback: bool = False
    line: int = 0


@dataclass(frozen=True, slots=True)
class State:
    id: str
    kind: StateKind
    output: str
    gates: tuple[Gate, ...]
    structure: str | None = None
    prompt: str = ""
    execution: str | None = None
    tier: str | None = None
    reason: bool = False
    accumulate: bool = False
    sample: int | None = None
    over: str | None = None
    parse: str | None = None
    max_visits: int | None = None
    call: str | None = None
    tool: str | None = None
    input: Mapping[str, Any] = field(default_factory=lambda: _EMPTY)
    idempotent: bool = True
    on_error: tuple[OnError, ...] = ()
    ask_human: bool = False
    line: int = 0
    # Derived once per state: the prompt split into literals and placeholders, and the output contract.
    template: Template = field(init=False, repr=False, compare=False)
    contract: str = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "template", compile_template(self.prompt))  # frozen: set once, here
        contract = self.structure if self.structure is not None else UNSPECIFIED_STRUCTURE
        object.__setattr__(self, "contract", contract)

    @property
    def is_fanout(self) -> bool:
        return self.sample is not None or self.over is not None


@dataclass(frozen=True)
class Declaration:
    name: str
    description: str = ""


@dataclass(frozen=True, slots=True)
class Machine:
    name: str
    entry: str
    budget: int
    states: Mapping[str, State]
    default_tier: str = "balanced"
    result: str | None = None
    context: Mapping[str, Any] = field(default_factory=lambda: _EMPTY)
    tools: tuple[Declaration, ...] = ()
    hooks: tuple[Declaration, ...] = ()
    mklang: str | None = None
    source: str = ""
    sha256: str = ""
    first_line: int = field(default=1, compare=False)  # the number of the source's first line where it was written
    _called_machines: tuple[str, ...] = field(init=False, repr=False, compare=False)
    _has_tool_state: bool = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        states = self.states.values()
        called = tuple(dict.fromkeys(s.call for s in states if s.kind == "call" and s.call))
        object.__setattr__(self, "_called_machines", called)  # frozen: set once, here
        object.__setattr__(self, "_has_tool_state", any(s.kind == "tool" for s in states))

    def __repr__(self) -> str:
        count = len(self.states)
        states = f"{count} state{'s' if count != 1 else ''}"
        return f"<Machine {self.name}: {states}, entry {self.entry}, budget {self.budget}>"

    def tier_of(self, state: State) -> str:
        return state.tier or self.default_tier

    def called_machines(self) -> tuple[str, ...]:
        """Names this machine mentions in ``call:`` states, in document order, once each."""
        return self._called_machines

    def has_tool_state(self) -> bool:
        return self._has_tool_state

    def may_call_a_model(self) -> bool:
        """Whether a run of this machine can need a model: a generative state, a gate a judge decides (any
        but ``otherwise``), or a call of another machine (which may)."""
        return any(
            state.kind in ("generative", "call") or any(not gate.is_otherwise for gate in state.gates)
            for state in self.states.values()
        )


def reachable(root: Machine, find: Callable[[str], Machine | None]) -> dict[str, Machine]:
    """``root`` and every machine it calls, transitively, that ``find`` knows by name, breadth first."""
    found = {root.name: root}
    pending = [root]
    while pending:
        for name in pending.pop(0).called_machines():
            callee = find(name) if name not in found else None
            if callee is not None:
                found[name] = callee
                pending.append(callee)
    return found
