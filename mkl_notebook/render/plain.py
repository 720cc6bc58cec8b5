"""Text shown so that a terminal acts on nothing in it: what every text view starts from, and all a usage error
of ``mkl`` needs of the views. It imports only :mod:`re`.
"""

from __future__ import annotations

import re

# What a terminal acts on instead of showing: C0 controls (ESC starts the sequences that move the cursor,
# erase or recolour; CR and backspace write over what is shown), DEL, C1 controls (U+009B is a one-character
# CSI to some terminals) and the marks that reorder a line right to left (U+202E shows "abc" as "cba").
_CONTROLS = "\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069"
_IN_A_LINE = re.compile(f"[{_CONTROLS}\t\n]")
_IN_LINES = re.compile(f"[{_CONTROLS}]")
_NAMED = {"\t": "\\t", "\n": "\\n", "\r": "\\r"}


def _visible(match: re.Match[str]) -> str:
    char = match.group()
    code = ord(char)
    return _NAMED.get(char) or (f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}")


def printable(value: object, lines: bool = False) -> str:
    """``value`` as text a terminal shows as it is: every control character written as its escape (ESC as
    ``\\x1b``, CR as ``\\r``). A line break (and a tab) is kept only where the text is a block of ``lines``;
    in a line of a listing it is shown as ``\\n``, so no text can add a line that seems the listing's own."""
    if lines:
        return _IN_LINES.sub(_visible, str(value).replace("\r\n", "\n"))
    return _IN_A_LINE.sub(_visible, str(value))
