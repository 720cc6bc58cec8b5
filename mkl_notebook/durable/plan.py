"""What running a journaled run again would do, told before anything runs (``mkl plan``, ``%mkl plan``).

The run goes from the top as a resume would, answered from its journal alone: every call whose
request is unchanged replays; the first one that is not (an edit changed it, or it was never made)
is where new calls begin. What the journal recorded after that point depends on that new answer,
so it may be made again; a person's answers there are asked again if what they were about changes.
Nothing is called and nothing is journaled.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..engine.oracle import Oracle, OracleRequest, ReplyRequest, RunInterrupted
from ..lang.model import Machine
from .replay import JournalIndex, ReplayOracle


class _Stop(RunInterrupted):
    """The plan reached the first call the journal cannot answer."""

    def __init__(self, request: OracleRequest) -> None:
        super().__init__(request.position)
        self.request = request


class _NothingLive(Oracle):
    """Answers nothing: the first live call ends the plan."""

    def ask(self, request: OracleRequest) -> Any:
        if isinstance(request, ReplyRequest):
            return None  # nobody has answered yet: the run would wait here
        raise _Stop(request)

    @property
    def waits(self) -> bool:
        return False  # branches in order, so "the first new call" is the same every time


@dataclass
class Plan:
    """What running the run again would do, before it does it."""

    run_id: str
    replays: list[str] = field(default_factory=list)  # positions of the calls that replay
    first_call: dict[str, str] | None = None  # {position, kind, state}: where new calls begin (None: no new call)
    may_rerun: list[str] = field(default_factory=list)  # recorded calls after it, which depend on its answer
    answers_kept: list[str] = field(default_factory=list)  # positions of the replies that still answer
    asked_again: list[dict[str, Any]] = field(default_factory=list)  # replies that no longer do, and why
    may_ask_again: list[dict[str, Any]] = field(default_factory=list)  # replies after the first new call

    def as_dict(self) -> dict[str, Any]:
        return {
            "run": self.run_id,
            "replays": self.replays,
            "first_call": self.first_call,
            "may_rerun": self.may_rerun,
            "answers_kept": self.answers_kept,
            "asked_again": self.asked_again,
            "may_ask_again": self.may_ask_again,
        }


def plan(run_id: str, records: list[dict[str, Any]], machines: Mapping[str, Machine], run: Any) -> Plan:
    """The plan of run ``run_id`` from its journal ``records`` with ``machines`` (as they are now).

    ``run(index, oracle, machines)`` runs the journal's machine with ``oracle`` (the durable layer's runner).
    """
    index = JournalIndex.build(records)
    oracle = ReplayOracle(_NothingLive(), index, append=lambda record: None)
    stop: OracleRequest | None = None
    try:
        run(index, oracle, machines)
    except _Stop as stopped:
        stop = stopped.request
    found = Plan(run_id, replays=list(oracle.replayed_positions), answers_kept=list(oracle.replies_kept))
    found.asked_again = [
        {key: again.get(key) for key in ("position", "value", "by", "established", "claimed", "via", "time")}
        for again in oracle.asked_again
    ]
    asked = set(oracle.replayed_positions) | {stop.position if stop else ""}
    if stop is not None:
        found.first_call = {"position": stop.position, "kind": stop.kind, "state": stop.state}
        found.may_rerun = [position for position in index.answers if position not in asked]
        settled = set(oracle.replies_kept) | {again["position"] for again in found.asked_again}
        found.may_ask_again = [
            {"position": position, "value": given[-1].get("value"), "by": given[-1].get("by")}
            for position, given in index.replies.items()
            if position not in settled
        ]
    return found
