"""The names a machine routes to (``to:``, an ``on_error`` route, ``entry``) that no state has: one error each.

A name misspelled, or left behind by a rename, is one mistake however many gates repeat it: it is reported
once, at its first use, with the state it is probably meant to be and how many more uses there are. A state
that is written but could not be built was reported already; naming it is not a second mistake.
"""

from __future__ import annotations

from collections.abc import Collection

from .located import LocatedList, LocatedMap, Where
from .model import END, Machine
from .suggest import close_match, did_you_mean

Reference = tuple[str, Where, "str | None", str]  # the message, where, the state it is in, the key


def unknown_state_names(
    machine: Machine, doc: LocatedMap, broken: Collection[str], entry_at: Where | None
) -> list[Reference]:
    """One error per name that no state of ``machine`` has (``broken``: states written but not built)."""
    uses: dict[str, list[Reference]] = {}  # name -> each use, its message said without the verdict
    known = {*machine.states, *broken}
    if machine.entry and machine.states and machine.entry not in known and entry_at is not None:
        uses.setdefault(machine.entry, []).append((f"entry '{machine.entry}'", entry_at, None, "entry"))
    for state in machine.states.values():
        label = f"state '{state.id}'"
        for index, gate in enumerate(state.gates):
            if gate.to is not None and gate.to != END and gate.to not in known:
                at = _written_at(doc, state.id, "gates", index, "to") or Where(gate.line, 1)
                uses.setdefault(gate.to, []).append((f"{label}, gate {index + 1}: 'to: {gate.to}'", at, state.id, "to"))
        for index, matcher in enumerate(state.on_error):
            if matcher.route is not None and matcher.route != END and matcher.route not in known:
                at = _written_at(doc, state.id, "on_error", index, "route") or Where(matcher.line, 1)
                what = f"{label}: on_error route '{matcher.route}'"
                uses.setdefault(matcher.route, []).append((what, at, state.id, "on_error"))
    names = ", ".join(machine.states)
    found = []
    for name, named in uses.items():
        named.sort(key=lambda use: (use[1].line, use[1].column))
        what, where, owner, key = named[0]
        hint = did_you_mean(name, [*machine.states, END])
        choices = "" if hint else f"; use one of {names} or END" if key != "entry" else f" (states: {names})"
        more = len(named) - 1
        also = f" (and {more} more use{'s' if more > 1 else ''} of '{name}')" if more else ""
        found.append((f"{what} names no state{hint}{choices}{also}", where, owner, key))
    return found


def _written_at(doc: LocatedMap, sid: str, listed: str, index: int, key: str) -> Where | None:
    """Where ``key`` is written in item ``index`` of state ``sid``'s ``listed`` list (gates, on_error)."""
    states = doc.get("states")
    body = states.get(sid) if isinstance(states, LocatedMap) else None
    items = body.get(listed) if isinstance(body, LocatedMap) else None
    if not isinstance(items, LocatedList) or not 0 <= index < len(items):
        return None
    item = items[index]
    if not isinstance(item, LocatedMap):
        return None
    written = next((k for k in item if k == key or close_match(k, [key]) == key), None)
    return item.at(written) if written is not None else None
