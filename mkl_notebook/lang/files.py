"""Reading the files a person hands over, within bounds: regular files only, and none too big.

A FIFO would block a read forever and ``/dev/zero`` never ends, so anything but a regular
file is refused before it is opened, and a file is read no further than its limit allows.
The limits are far above any real machine, script or notebook.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

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


def read_bytes(path: str | Path, limit: int) -> bytes:
    """The bytes of regular file ``path``, refusing other kinds of files and files over ``limit`` bytes."""
    path = Path(path)
    info = os.stat(path)  # follows a symlink: what it points at must be a regular file too
    if stat.S_ISDIR(info.st_mode):
        raise IsADirectoryError(errno.EISDIR, "Is a directory", str(path))
    if not stat.S_ISREG(info.st_mode):
        raise UnfitFile("is not a regular file (a pipe, a device or a socket)")
    if info.st_size > limit:
        raise UnfitFile(f"is {_size(info.st_size)}, more than the {_size(limit)} such a file may be")
    with open(path, "rb") as handle:
        data = handle.read(limit + 1)
    if len(data) > limit:  # it grew while being read
        raise UnfitFile(f"is more than the {_size(limit)} such a file may be")
    return data


def read_text(path: str | Path, limit: int) -> str:
    """:func:`read_bytes` decoded as UTF-8 (a :class:`UnicodeDecodeError` if it is not)."""
    return read_bytes(path, limit).decode("utf-8")
