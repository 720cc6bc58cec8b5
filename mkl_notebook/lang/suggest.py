"""Did you mean: the one known name close to a mistyped one, and a mapping read as if its typos were fixed.

A mistyped key is one mistake; the loader reports it once, with the key it was probably meant to be, and
goes on as if that key were written (``promt:`` read as ``prompt:``), so that the state it sits in is not
also reported as lacking its prompt.
"""

from __future__ import annotations

import difflib
from collections.abc import Collection

from .located import LocatedMap

_CUTOFF = 0.75  # close enough that the suggestion is almost always what was meant ("promt", "reviw", "too")


def close_match(word: object, known: Collection[str]) -> str | None:
    """The one name of ``known`` close to ``word`` (case aside: ``end`` is close to ``END``), else None."""
    if not isinstance(word, str) or not word or not known:
        return None
    by_case = {name.casefold(): name for name in known}
    if word.casefold() in by_case and by_case[word.casefold()] != word:
        return by_case[word.casefold()]
    folded = word.casefold()
    swapped = [name for name in by_case if sorted(name) == sorted(folded) and _one_swap(name, folded)]
    if len(swapped) == 1:  # two letters changed places: "std_cto" is "std_cot", not "std_tot"
        return by_case[swapped[0]]
    scored = sorted(((difflib.SequenceMatcher(None, folded, name).ratio(), name) for name in by_case), reverse=True)[:2]
    if not scored or scored[0][0] < _CUTOFF or (len(scored) > 1 and scored[1][0] == scored[0][0]):
        return None  # nothing close, or two names as close: a guess would mislead as often as help
    return by_case[scored[0][1]]


def _one_swap(name: str, word: str) -> bool:
    differ = [index for index, (a, b) in enumerate(zip(name, word, strict=False)) if a != b]
    return len(name) == len(word) and len(differ) == 2 and differ[1] == differ[0] + 1


def did_you_mean(word: object, known: Collection[str]) -> str:
    """``"; did you mean 'x'?"`` when ``known`` has a name close to ``word``, else ``""``."""
    match = close_match(word, known)
    return f"; did you mean '{match}'?" if match is not None else ""


def corrected_keys(mapping: LocatedMap, known: Collection[str]) -> tuple[LocatedMap, dict[str, str]]:
    """``mapping`` with each unknown key that is close to a known one it does not already have renamed to
    that key (its position kept), and the renames made (written key -> known key)."""
    renames: dict[str, str] = {}
    for key in mapping:
        if isinstance(key, str) and key not in known:
            match = close_match(key, known)
            if match is not None and match not in mapping and match not in renames.values():
                renames[key] = match
    return renamed_keys(mapping, renames), renames


def renamed_keys(mapping: LocatedMap, renames: dict[str, str]) -> LocatedMap:
    """``mapping`` with keys renamed (written key -> new key), each keeping its place and position."""
    if not renames:
        return mapping
    fixed = LocatedMap()
    fixed.position = mapping.position
    fixed.key_positions = {}
    fixed.duplicate_keys = mapping.duplicate_keys
    for key, value in mapping.items():
        name = renames.get(key, key)
        fixed[name] = value
        fixed.key_positions[name] = mapping.key_positions.get(key, mapping.position)
    return fixed
