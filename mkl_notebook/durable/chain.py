"""Canonical JSON and chain digests: the one text of a record, and the digest of a history built from it.

Every copy of a journal (in a store, a notebook, a checkpoint file) is compared, signed and remembered through
these: two records are the same when their canonical texts are, and a history's chain digest changes with any
record or their order. They read no record's keys (only a setup's, in :func:`setup_digest`), so they live
apart from :mod:`durable.records`, which says what each kind of record holds.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from .records import FORMAT

# One encoder for every record: ``json.dumps`` with these arguments would build a new one per call.
_CANONICAL = json.JSONEncoder(sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)


def canonical(record: Any) -> str:
    """One stable JSON text per record: what digests and storage use."""
    try:
        return _CANONICAL.encode(record)
    except TypeError:  # a mapping whose keys are of several kinds (1 and "b") cannot be sorted as they are
        return _CANONICAL.encode(_text_keys(record))


def _text_keys(value: Any) -> Any:
    """``value`` with the keys of every mapping in it as the text JSON makes of them (1 as "1", None as "null"),
    so that they sort; keys that JSON would make the same text, or cannot make text of, are said plainly."""
    if isinstance(value, Mapping):
        keyed: dict[str, Any] = {}
        for key, item in value.items():
            if isinstance(key, str):
                text = key
            elif key is None or isinstance(key, (bool, int, float)):
                text = _CANONICAL.encode(key)
            else:
                raise TypeError(f"a mapping key must be text or a number, not {type(key).__name__} ({key!r:.60})")
            if text in keyed:
                raise TypeError(f"a mapping has two keys that are both {text!r} in JSON")
            keyed[text] = _text_keys(item)
        return keyed
    if isinstance(value, (list, tuple)):
        return [_text_keys(item) for item in value]
    return value


def common_prefix(held: Sequence[Mapping[str, Any]], given: Sequence[Mapping[str, Any]]) -> int:
    """How many leading records two copies of a history share (as JSON: a copy read back from a file or a
    store is the same record)."""
    shared = 0
    for mine, theirs in zip(held, given, strict=False):
        if mine != theirs and canonical(mine) != canonical(theirs):
            break
        shared += 1
    return shared


def chain_start() -> bytes:
    """The digest a journal's chain begins with (before its first record)."""
    return hashlib.sha256(FORMAT.encode()).digest()


def chain_step(digest: bytes, record: Any) -> bytes:
    """The chain digest after ``record``, given the one before it: each record's place in its history."""
    return hashlib.sha256(digest + canonical(record).encode("utf-8")).digest()


def setup_digest(setup: Mapping[str, Any]) -> str:
    """A short digest of what a run is set up with: its root, its machines (as their pinned hashes), its
    input and context. A question asked in it names it, so an edit of any of them asks a new question."""
    machines = setup.get("machines") or {}
    shape = {
        "root": setup.get("root"),
        "machines": {name: pin.get("sha256") if isinstance(pin, Mapping) else None for name, pin in machines.items()},
        "input": setup.get("input"),
        "context": setup.get("context"),
    }
    return hashlib.blake2b(canonical(shape).encode("utf-8", "surrogatepass"), digest_size=8).hexdigest()


def chain_digest(records: Iterable[Any]) -> bytes:
    """The chain digest of a whole journal: a change of any record, or of their order, changes it."""
    held = records if isinstance(records, list) else list(records)
    return chain_prefixes(held)[-1]


def chain_prefixes(records: list[Any]) -> list[bytes]:
    """The chain digest before each record of ``records`` and after the last (``len(records) + 1`` digests).

    A history only grows, and its records are never changed once written: the digests of a prefix held by the
    same record objects as one computed lately are taken as they were, and only the records after it are
    encoded and hashed (a click late in a long run digested the whole journal several times over)."""
    start, digests = 0, [chain_start()]
    with _PREFIXES_LOCK:
        for held, known in _PREFIXES:
            length = min(len(held), len(records))
            if length > start and held[length - 1] is records[length - 1] and _same_objects(held, records, length):
                start, digests = length, known[: length + 1]
    digest = digests[-1]
    for record in records[start:]:
        digest = chain_step(digest, record)
        digests.append(digest)
    if len(records) > start:
        with _PREFIXES_LOCK:
            _PREFIXES.append((list(records), digests))
    return digests


def _same_objects(held: list[Any], records: list[Any], length: int) -> bool:
    return all(mine is theirs for mine, theirs in zip(held[:length], records[:length], strict=True))


# The histories digested lately, each with its prefix digests: a few runs' at a time. Held by the record objects
# themselves (a copy of the list), so no other record can take one's place.
_PREFIXES: deque[tuple[list[Any], list[bytes]]] = deque(maxlen=8)
_PREFIXES_LOCK = threading.Lock()
