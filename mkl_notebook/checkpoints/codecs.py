"""How a checkpoint's journal is encoded: codecs behind one tagged wrapper.

A journal travels as ``{"encoding": TAG, "count": N, ...}``: plain JSON records under ``records`` (tag
``json``), or the JSON text packed under ``data`` by a codec named by its tag. A codec is a text form of
compressed bytes: how to deflate and how to inflate (bounded by whoever reads, see ``envelope.Inflation``).
New checkpoints are written with :data:`PACKED`; every codec ever written stays readable. Adding an encoding is
adding a codec here; nothing else branches on tags.
"""

from __future__ import annotations

import base64
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .journal_words import WORDS

PLAIN = "json"  # the records themselves, uncompressed (small journals)


@dataclass(frozen=True)
class Codec:
    """One packed encoding: deflate with ``dictionary`` (b"" for none), written as text by ``to_text``, read
    back by ``from_text`` (which refuses what is not its alphabet)."""

    tag: str
    dictionary: bytes
    to_text: Callable[[bytes], bytes]
    from_text: Callable[[str], bytes]

    def pack(self, raw: bytes) -> str:
        """``raw`` deflated, as text."""
        packer = zlib.compressobj(9, zdict=self.dictionary) if self.dictionary else zlib.compressobj(9)
        return self.to_text(packer.compress(raw) + packer.flush()).decode("ascii")

    def unpacker(self, packed: str) -> tuple[Any, bytes]:
        """What inflates ``packed``: a zlib decompressor and the compressed bytes to give it (the caller bounds
        how much it inflates)."""
        inflater = zlib.decompressobj(zdict=self.dictionary) if self.dictionary else zlib.decompressobj()
        return inflater, self.from_text(packed)


def _b64(packed: str) -> bytes:
    return base64.b64decode(packed, validate=True)


# Deflate from the preset dictionary of journal_words, in base85 (a quarter larger than its bytes, where base64 is
# a third): what this release writes. Earlier releases wrote plain zlib in base64.
PACKED_CODEC = Codec("zlib+words1+base85", WORDS, base64.b85encode, base64.b85decode)
EARLIER_CODEC = Codec("zlib+base64", b"", base64.b64encode, _b64)
CODECS = {codec.tag: codec for codec in (PACKED_CODEC, EARLIER_CODEC)}
PACKED, PACKED_BEFORE = PACKED_CODEC.tag, EARLIER_CODEC.tag
