"""Reading the files a person hands over, within bounds: regular files only, and none too big.

A FIFO would block a read forever and ``/dev/zero`` never ends, so anything but a regular
file is refused before it is opened, and a file is read no further than its limit allows.
The limits are far above any real machine, script or notebook.
"""

from __future__ import annotations

import errno
import itertools
import json
import os
import re
import stat
from pathlib import Path
from typing import Any

from ..errors import MklError

MACHINE_LIMIT = 4 * 1024 * 1024  # a .mkl file
SCRIPT_LIMIT = 64 * 1024 * 1024  # a scripted-answers or scenario file, an --input file, a tools file
NOTEBOOK_LIMIT = 512 * 1024 * 1024  # an .ipynb or a checkpoint file


class UnfitFile(MklError, OSError):
    """A file that is not a regular file, or larger than its kind may be; ``strerror`` says which."""

    def __init__(self, message: str) -> None:
        super().__init__(errno.EINVAL, message)


def _size(count: int) -> str:
    for unit in ("bytes", "KB", "MB", "GB"):
        if count < 1024 or unit == "GB":
            return f"{count:,} {unit}" if unit == "bytes" else f"{count:.1f} {unit}"
        count //= 1024
    return f"{count} GB"  # pragma: no cover - the loop always returns


def check_regular(path: str | Path, limit: int) -> Path:
    """``path``, once it is known to be a regular file of at most ``limit`` bytes (:class:`UnfitFile` if not)."""
    path = Path(path)
    info = os.stat(path)  # follows a symlink: what it points at must be a regular file too
    if stat.S_ISDIR(info.st_mode):
        raise IsADirectoryError(errno.EISDIR, "Is a directory", str(path))
    if not stat.S_ISREG(info.st_mode):
        raise UnfitFile("is not a regular file (a pipe, a device or a socket)")
    if info.st_size > limit:
        raise UnfitFile(f"is {_size(info.st_size)}, more than the {_size(limit)} such a file may be")
    return path


def read_bytes(path: str | Path, limit: int) -> bytes:
    """The bytes of regular file ``path``, refusing other kinds of files and files over ``limit`` bytes."""
    path = check_regular(path, limit)
    with open(path, "rb") as handle:
        data = handle.read(limit + 1)
    if len(data) > limit:  # it grew while being read
        raise UnfitFile(f"is more than the {_size(limit)} such a file may be")
    return data


def read_text(path: str | Path, limit: int) -> str:
    """:func:`read_bytes` decoded as UTF-8 (a :class:`UnicodeDecodeError` if it is not)."""
    return read_bytes(path, limit).decode("utf-8")


# -- JSON within bounds ----------------------------------------------------------------------------------

VALUE_DEPTH = 200  # levels of a value a person or a model gives (an input, a row, a reply, an output)
DOCUMENT_DEPTH = VALUE_DEPTH + 56  # a notebook or a checkpoint: such values, inside the document's own levels
MAX_VALUES = 4_000_000  # keys and values of one JSON document, unless its reader says otherwise

_ESCAPED_BACKSLASH = b"\\\\"
_ESCAPED_QUOTE = b'\\"'
_STRING = re.compile(rb'"[^"]*"')  # once escapes are gone, a string runs from one quote to the next
_NOT_MARKS = bytes(range(256)).translate(None, b"[]{},:")
_STEPS = bytes.maketrans(b"[{]}", b"\x01\x01\xff\xff")  # one level in, one out (as signed bytes)


class UnfitJson(MklError, ValueError):
    """JSON text past the bounds its reader sets; the message says which (``nests too deeply``, ``too many``)."""


def check_json(data: str | bytes, *, depth: int = VALUE_DEPTH, values: int = MAX_VALUES) -> None:
    """Refuse JSON text (with :class:`UnfitJson`) that nests deeper than ``depth`` or holds more than ``values``
    keys and values (what parsing it would cost in memory), without parsing it.

    The text is measured in byte operations (no recursion, no Python loop per character), so a refusal costs
    time in proportion to the text's size: escapes are dropped, then strings, and the brackets, commas and
    colons left are counted. Text that is not JSON is measured all the same; its parser says what is wrong.
    """
    raw = data.encode("utf-8", "surrogatepass") if isinstance(data, str) else data
    if b"\\" in raw:  # backslashes pair up from the left, so after these two no quote is escaped
        raw = raw.replace(_ESCAPED_BACKSLASH, b"").replace(_ESCAPED_QUOTE, b"")
    if raw.count(b'"') > 2 * values:  # each string is a key or a value; refused before the strings are cut out
        raise UnfitJson(f"holds too many values (more than {values:,})")
    marks = _STRING.sub(b"", raw).translate(None, _NOT_MARKS)
    del raw
    opened = marks.count(b"[") + marks.count(b"{")
    if opened + marks.count(b",") + marks.count(b":") + 1 > values:
        raise UnfitJson(f"holds too many values (more than {values:,})")
    if opened > depth:
        steps = marks.translate(_STEPS, b",:")
        if max(itertools.accumulate(memoryview(steps).cast("b"))) > depth:
            raise UnfitJson(f"nests too deeply (more than {depth} levels)")


def parse_json(data: str | bytes, *, depth: int = VALUE_DEPTH, values: int = MAX_VALUES) -> Any:
    """``json.loads(data)`` once :func:`check_json` has measured it: :class:`UnfitJson` past its bounds, another
    ``ValueError`` for text that is not JSON."""
    check_json(data, depth=depth, values=values)
    return json.loads(data)


def document_values(size: int) -> int:
    """How many keys and values a notebook or a checkpoint of ``size`` bytes may hold: :data:`MAX_VALUES`, or
    one for every 16 bytes of a larger one (Jupyter's own layout spends more than that on each)."""
    return max(MAX_VALUES, size // 16)
