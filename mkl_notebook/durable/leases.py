"""Exclusive, non-blocking leases between processes and threads, held through OS locks that the kernel
drops when their holder dies (a killed process holds nothing).

A run's lease is one byte of its store's lease file, at an offset its id's hash chooses: taking it
creates no file, so a batch of ten thousand rows leaves one lock file behind, not ten thousand, and
costs no file creation per run (most of a millisecond of system time on some file systems). The
byte is locked with an open-file-description lock (Linux's ``F_OFD_SETLK``): like ``flock``, it
belongs to the open file, so two threads of one process exclude each other as two processes do, and
closing the file lets it go. Python offers these locks only through ``fcntl.fcntl`` and a packed
``struct flock``; no maintained library offers byte-range locks held per open file, hence the few
lines here. Where they are not available, each run gets its own lock file, locked with ``flock``.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import struct
import sys
from collections.abc import Iterator
from pathlib import Path

from .errors import RunBusy, StoreError

try:
    import fcntl
except ImportError:  # not POSIX: leases cannot be taken
    fcntl = None  # type: ignore[assignment]

# struct flock on 64-bit Linux: short l_type, short l_whence, off_t l_start, off_t l_len, pid_t l_pid (0 for OFD
# locks), padded to its 32 bytes.
_FLOCK = struct.Struct("hhqqi4x")
BYTE_LEASES = (
    sys.platform == "linux" and struct.calcsize("P") == 8 and fcntl is not None and hasattr(fcntl, "F_OFD_SETLK")
)


def _open(lock_path: Path) -> int:
    try:
        try:
            return os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o600)
        except FileNotFoundError:  # its folder is not there (yet, or any more)
            lock_path.parent.mkdir(parents=True, exist_ok=True)
            return os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o600)
    except OSError as exc:
        raise StoreError(f"{lock_path}: cannot be opened to take a lease ({exc.strerror or exc})") from None


def _busy(what: str) -> RunBusy:
    return RunBusy(f"{what} is already being advanced by another process; wait for it or stop it")


@contextlib.contextmanager
def file_lease(lock_path: Path, what: str) -> Iterator[None]:
    """``lock_path`` held exclusively (``flock``) until the block ends; RunBusy naming ``what`` if it is held."""
    if fcntl is None:
        raise StoreError(f"{lock_path}: leases need a POSIX system's file locks, which this one lacks")
    fd = _open(lock_path)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise _busy(what) from None
        yield  # closing the file lets the lock go
    finally:
        os.close(fd)


class RunLeases:
    """The leases of one store's runs: one byte each of ``lock_path`` (or, where byte leases are not available,
    one file each beside it)."""

    def __init__(self, lock_path: Path) -> None:
        self.lock_path = lock_path

    def offset(self, run_id: str) -> int:
        """The byte that stands for ``run_id``: 62 bits of its hash (two ids share one with odds of 2**-62)."""
        return int.from_bytes(hashlib.sha256(run_id.encode("utf-8")).digest()[:8], "big") >> 2

    @contextlib.contextmanager
    def hold(self, run_id: str) -> Iterator[None]:
        """Run ``run_id``'s lease until the block ends; RunBusy if another process or thread holds it."""
        what = f"run '{run_id}'"
        if not BYTE_LEASES:
            with file_lease(self.lock_path.with_name(f"{self.lock_path.stem}-{self.offset(run_id):x}.lock"), what):
                yield
            return
        fd = _open(self.lock_path)
        try:
            try:
                fcntl.fcntl(fd, fcntl.F_OFD_SETLK, _FLOCK.pack(fcntl.F_WRLCK, os.SEEK_SET, self.offset(run_id), 1, 0))
            except OSError as exc:
                if exc.errno not in (errno.EAGAIN, errno.EACCES):
                    raise StoreError(f"{self.lock_path}: cannot lock it ({exc.strerror or exc})") from None
                raise _busy(what) from None
            yield  # closing the file lets the lock go
        finally:
            os.close(fd)
