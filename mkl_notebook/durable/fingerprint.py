"""Request fingerprints: what a journaled answer is the answer to.

A recorded answer replays only while the request that would be made now has the same
fingerprint. Journals carry these digests, so their definition never changes:
BLAKE2b (12 bytes) of the UTF-8 ``repr`` of the tuple ``(kind, *fields)``, every field of
the request in declaration order except where it sits (``position``) and how long a
retry waited (``delay``). The values requests hold (text, booleans, numbers, None and
tuples of them) have an unambiguous ``repr``, so no value can forge a separator.
"""

from __future__ import annotations

import hashlib
from dataclasses import fields

from ..engine.oracle import OracleRequest

UNHASHED_FIELDS = frozenset({"position", "delay"})


def fingerprint(request: OracleRequest) -> str:
    """The digest of ``request`` minus its position: equal requests replay the same answer."""
    values = (request.kind, *(getattr(request, f.name) for f in fields(request) if f.name not in UNHASHED_FIELDS))
    return hashlib.blake2b(repr(values).encode("utf-8", "surrogatepass"), digest_size=12).hexdigest()
