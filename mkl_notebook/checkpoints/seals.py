"""Seals on checkpoints: an Ed25519 signature over an envelope's digest, saying which key made it.

The digest chain says a checkpoint is *intact* (nothing in it changed since its digest was
computed), but anyone can recompute it. A seal says *who*: it is made with a private key
only its owner holds, over the digest, the key and the name the owner signs as. Whether
that key is one this person trusts is decided above this layer (``app.trust``).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from dataclasses import dataclass
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from ..errors import UserError

KEY_PREFIX = "ed25519:"
SEAL_KEYS = ("key", "by", "signature")
MAX_NAME = 200  # characters of the name a seal signs as
_CONTEXT = b"mkl-notebook checkpoint seal 1\n"


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


class Signer:
    """Makes seals with one private key, signing as ``by`` (a person's name)."""

    def __init__(self, private: Ed25519PrivateKey, by: str) -> None:
        self._private = private
        self.by = by[:MAX_NAME]
        self.key = key_text(private.public_key())

    def seal(self, digest: str) -> dict[str, str]:
        signature = self._private.sign(_signed_bytes(digest, self.key, self.by))
        return {"key": self.key, "by": self.by, "signature": base64.b64encode(signature).decode("ascii")}


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
