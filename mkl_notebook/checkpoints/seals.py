"""Signatures on a run's history: who appended which records, proved with Ed25519.

The digest chain says a history is *intact* (nothing in it changed since its digest was
computed), but anyone can recompute it. A signature says *who*: it is made with a private key
only its owner holds. Whoever advances a run (a kernel, ``mkl``) ends what it appended with a
``sign`` record: its key, the name its owner signs as, and a signature over the chain digest of
every record before it, so each stretch of the history verifies as its author's wherever the
history travels, and a copy that nobody changed keeps its signatures byte for byte.

Checkpoints written before signatures were journaled carry one *seal* over the whole envelope's
digest instead; it is still read, and still written for a history whose last records no ``sign``
record covers. Whether a key is one this person trusts is decided above this layer (``app.trust``).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import threading
import time
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from ..durable import records as rec
from ..durable.chain import chain_digest, chain_prefixes
from ..errors import UserError

KEY_PREFIX = "ed25519:"
SEAL_KEYS = ("key", "by", "signature")
MAX_NAME = 200  # characters of the name a seal signs as
_CONTEXT = b"mkl-notebook checkpoint seal 1\n"
_RECORDS_CONTEXT = b"mkl-notebook history signature 1\n"


class SealError(UserError, ValueError):
    """A seal field of the wrong shape; the message names it."""


@dataclass(frozen=True)
class Seal:
    """A checkpoint's seal as read: the key (``ed25519:BASE64``), the name it signs as, and whether the
    signature holds over the checkpoint's digest."""

    key: str
    by: str
    holds: bool

    @property
    def fingerprint(self) -> str:
        return key_fingerprint(self.key)


def key_text(public: Ed25519PublicKey) -> str:
    """A public key as people copy it: ``ed25519:`` and the raw 32 bytes in base64."""
    raw = public.public_bytes(Encoding.Raw, PublicFormat.Raw)
    return KEY_PREFIX + base64.b64encode(raw).decode("ascii")


def public_key(text: str) -> Ed25519PublicKey:
    """The key ``text`` names (``ed25519:BASE64``); :class:`SealError` when it is not one."""
    if not isinstance(text, str) or not text.startswith(KEY_PREFIX) or len(text) > 100:
        raise SealError(f"{str(text)[:60]!r} is not a key (expected ed25519:BASE64)")
    try:
        raw = base64.b64decode(text[len(KEY_PREFIX) :], validate=True)
    except (binascii.Error, ValueError):
        raise SealError(f"{text!r} is not a key (its base64 is damaged)") from None
    if len(raw) != 32:
        raise SealError(f"{text!r} is not a key (an Ed25519 key is 32 bytes, not {len(raw)})")
    return Ed25519PublicKey.from_public_bytes(raw)


def key_fingerprint(key: str) -> str:
    """A key's short name for people to compare: 16 hex digits of its hash, in groups of four."""
    digits = hashlib.sha256(key.encode("ascii", "replace")).hexdigest()[:16]
    return " ".join(digits[i : i + 4] for i in range(0, 16, 4))


def _signed_bytes(digest: str, key: str, by: str) -> bytes:
    return _CONTEXT + "\n".join((digest, key, by)).encode("utf-8")


def _history_bytes(chain: bytes, key: str, by: str, at: float) -> bytes:
    return _RECORDS_CONTEXT + "\n".join((chain.hex(), key, by, repr(float(at)))).encode("utf-8")


class Signer:
    """Signs with one private key, as ``by`` (a person's name): the records a run's history gains, and (for a
    history without such signatures) a whole checkpoint."""

    def __init__(self, private: Ed25519PrivateKey, by: str) -> None:
        self._private = private
        self.by = by[:MAX_NAME]
        self.key = key_text(private.public_key())

    @property
    def private(self) -> Ed25519PrivateKey:
        """The key it signs with (to sign as another name: ``Signer(signer.private, name)``)."""
        return self._private

    def seal(self, digest: str) -> dict[str, str]:
        signature = self._private.sign(_signed_bytes(digest, self.key, self.by))
        return {"key": self.key, "by": self.by, "signature": base64.b64encode(signature).decode("ascii")}

    def endorse(self, records: Sequence[dict[str, Any]]) -> rec.SignRecord:
        """The ``sign`` record that ends ``records``: it vouches for those since the previous one."""
        at = time.time()
        signature = self._private.sign(_history_bytes(chain_digest(records), self.key, self.by, at))
        return rec.sign_record(self.key, self.by, base64.b64encode(signature).decode("ascii"), at)


@dataclass(frozen=True)
class Signed:
    """A stretch of a history, records ``start`` up to ``end`` (not included), and the seal that vouches for it:
    the ``sign`` record at ``end``, or the checkpoint's whole-envelope seal (``time`` None); ``seal`` None: no
    one signed it."""

    start: int
    end: int
    seal: Seal | None
    time: float | None = None


def _holds(record: dict[str, Any], chain: bytes) -> Seal:
    key, by, at = str(record.get("key")), str(record.get("by")), record.get("time")
    signed = _history_bytes(chain, key, by, at if isinstance(at, (int, float)) else float("nan"))
    sig = str(record.get("sig"))
    with _CHECKED_LOCK:
        holds = _CHECKED.get((signed, sig))
    if holds is None:
        try:
            public_key(key).verify(base64.b64decode(sig, validate=True), signed)
            holds = True
        except (SealError, binascii.Error, ValueError, InvalidSignature):
            holds = False
        with _CHECKED_LOCK:
            _CHECKED[(signed, sig)] = holds
            while len(_CHECKED) > MAX_CHECKED:
                _CHECKED.pop(next(iter(_CHECKED)))
    return Seal(key, by, holds=holds)


# Whether a signature holds over what it signs is a fact that never changes: a view of a run checks each ``sign``
# record of its history once, not again at every click as the history grows. Keyed by the signed bytes and the
# signature, so nothing else can match; the oldest are let go past a few thousand.
MAX_CHECKED = 4096
_CHECKED: dict[tuple[bytes, str], bool] = {}
_CHECKED_LOCK = threading.Lock()


def covering(stretches: Sequence[Signed], index: int) -> Signed | None:
    """The signed stretch that covers record ``index`` of a history (None: the history has none there)."""
    return next((stretch for stretch in stretches if stretch.start <= index < stretch.end), None)


def signatures(records: Sequence[dict[str, Any]], envelope_seal: Seal | None = None) -> list[Signed]:
    """Who signed each stretch of ``records``, checked: every ``sign`` record over the history before it, and
    for the records after the last one, the checkpoint's whole-envelope seal (``envelope_seal``) if it has one."""
    with _RECENT_LOCK:
        for seen, length, seal, known in _RECENT:
            if seen is records and length == len(records) and seal is envelope_seal:
                return list(known)
    found: list[Signed] = []
    chains = chain_prefixes(records if isinstance(records, list) else list(records))
    start = 0
    for position, record in enumerate(records):
        if rec.is_sign(record):
            at = record.get("time")
            held = _holds(record, chains[position])
            found.append(Signed(start, position, held, at if isinstance(at, (int, float)) else None))
            start = position + 1
    if start < len(records):
        found.append(Signed(start, len(records), envelope_seal))
    with _RECENT_LOCK:
        _RECENT.append((records, len(records), envelope_seal, found))
    return list(found)


# One view of a run reads the signatures of the history it shows several times (who asked, who answered, the
# run's answers, what became of a question): each reading of the same history object, unchanged, is the first
# one's. Held by identity, with the object itself (so no other can take its id), and its length (a history only
# grows); a journal's records are never changed once written. A few views at a time.
_RECENT: deque[tuple[Sequence[dict[str, Any]], int, Seal | None, list[Signed]]] = deque(maxlen=8)
_RECENT_LOCK = threading.Lock()


def read(block: Any, digest: str) -> Seal:
    """A seal block as found in a checkpoint, checked by shape, and whether it holds over ``digest``."""
    if not isinstance(block, dict) or set(block) != set(SEAL_KEYS):
        raise SealError("the seal is not {key, by, signature}")
    by, signature = block["by"], block["signature"]
    if not isinstance(by, str) or len(by) > MAX_NAME:
        raise SealError(f"the seal's name is not text of at most {MAX_NAME} characters")
    if not isinstance(signature, str) or len(signature) > 200:
        raise SealError("the seal's signature is not base64 text")
    public = public_key(block["key"])
    try:
        raw = base64.b64decode(signature, validate=True)
    except (binascii.Error, ValueError):
        raise SealError("the seal's signature is not base64 text") from None
    try:
        public.verify(raw, _signed_bytes(digest, block["key"], by))
    except InvalidSignature:
        return Seal(block["key"], by, holds=False)
    return Seal(block["key"], by, holds=True)
