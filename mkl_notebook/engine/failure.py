"""The internal signal that a state could not complete."""

from __future__ import annotations

from ..errors import MklError
from .result import TraceStep


class StateFailure(MklError):
    """A state could not complete; the run halts with ``error``.

    With ``policy`` set, a trace step is recorded first (parse refusals, failed
    calls); ``usage`` is what the failed work still costs.  Inside a fan-out the
    failure becomes the marker ``[branch-error: <branch_text>]``.
    """

    def __init__(
        self,
        error: str,
        *,
        policy: str | None = None,
        usage: tuple[int, int] = (0, 0),
        sub_trace: list[TraceStep] | None = None,
        branch_text: str | None = None,
        suspendable: bool = False,
    ) -> None:
        super().__init__(error)
        self.suspendable = suspendable  # a provider outage: a suspendable run waits instead of halting
        self.error = error
        self.policy = policy
        self.usage = usage
        self.sub_trace = sub_trace
        self.branch_text = branch_text if branch_text is not None else error.removeprefix("state-error: ")
