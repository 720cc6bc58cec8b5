"""Request fingerprints: what a journaled answer is the answer to.

A recorded answer replays only while the request that would be made now has the same
fingerprint. Journals carry these digests, so their definition never changes:
BLAKE2b (12 bytes) of the UTF-8 ``repr`` of the tuple ``(kind, *fields)``, every field of
the request in declaration order except where it sits (``position``), how long a retry
waited (``delay``) and a tool call's ``idempotency_key`` (made from the position). The
values requests hold (text, booleans, numbers, None and tuples of them) have an
unambiguous ``repr``, so no value can forge a separator.
"""

from __future__ import annotations

import hashlib
from operator import itemgetter
from typing import Any

from ..engine.oracle import HookRequest, JudgeRequest, OracleRequest, ProduceRequest, ReplyRequest, ToolRequest

UNHASHED_FIELDS = frozenset({"position", "delay", "idempotency_key"})

# Per request type, the fields a fingerprint covers, picked out of the request in one call.
HASHED_FIELDS = {
    kind: itemgetter(*(index for index, name in enumerate(kind._fields) if name not in UNHASHED_FIELDS))
    for kind in (ProduceRequest, JudgeRequest, HookRequest, ToolRequest, ReplyRequest)
}


def fingerprinted(request: OracleRequest) -> tuple[Any, ...]:
    """The values a fingerprint covers: ``(kind, *fields)`` without position, delay and idempotency key."""
    return (request.kind, *HASHED_FIELDS[type(request)](request))


def digest(values: tuple[Any, ...]) -> str:
    """The fingerprint of the values :func:`fingerprinted` picked out."""
    return hashlib.blake2b(repr(values).encode("utf-8", "surrogatepass"), digest_size=12).hexdigest()


def fingerprint(request: OracleRequest) -> str:
    """The digest of ``request`` minus its position: equal requests replay the same answer."""
    return digest(fingerprinted(request))
