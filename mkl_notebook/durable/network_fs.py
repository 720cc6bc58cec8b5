"""No SQLite store on a network filesystem: the filesystem a store's folder is on, told before the store is made.

SQLite's WAL and its locks need a filesystem that honours POSIX locks and shared memory between processes:
NFS, SMB/CIFS and the FUSE filesystems that reach a server (sshfs, s3fs, gcsfuse, rclone, …) do not, or not
reliably, and a journal there can be corrupted or two writers can both believe they hold a run. A store to be
written on one is refused, in one line naming a local path and the PostgreSQL store; ``MKL_STORE_ON_NETWORK=allow``
lets it be, for people who know their filesystem's locks hold. Reading a store there is allowed: it writes nothing.

The filesystem is read from the process's mount table (``/proc/self/mountinfo``), so the check is Linux's: where
there is no such table (macOS, Windows) nothing is refused. Nothing here writes, nor makes a file or folder.
"""

from __future__ import annotations

import getpass
import os
import re
from pathlib import Path

from .errors import StoreError

ON_NETWORK_ENV = "MKL_STORE_ON_NETWORK"  # "allow": a store may be written on a network filesystem
ALLOW = "allow"
# For tests only: the mount table read in place of the process's own (a test cannot mount NFS without root).
MOUNT_TABLE_ENV = "MKL_TEST_MOUNTINFO"
MOUNT_TABLE = Path("/proc/self/mountinfo")

# Filesystem types (the mount table's field after " - ") that reach another machine; a FUSE filesystem shows as
# "fuse.<its name>". Any other type is taken as local: ext4, xfs, btrfs, zfs, overlay, tmpfs, fuse.overlayfs, ….
NETWORK_TYPES = frozenset(
    {
        *("nfs", "nfs4", "cifs", "smb3", "smbfs", "smb2", "ncpfs", "afs", "coda", "9p", "davfs"),
        *("ceph", "glusterfs", "lustre", "gpfs", "beegfs", "orangefs", "pvfs2", "wekafs", "quobyte"),
        *("fuse.sshfs", "fuse.s3fs", "fuse.gcsfuse", "fuse.rclone", "fuse.juicefs", "fuse.davfs2"),
        *("fuse.ceph-fuse", "fuse.ceph", "fuse.glusterfs", "fuse.goofys", "fuse.mountpoint-s3", "fuse.blobfuse"),
        *("fuse.blobfuse2", "fuse.mfs", "fuse.lizardfs", "fuse.cvmfs", "fuse.s3ql", "fuse.objectivefs"),
        *("fuse.gvfsd-fuse", "fuse.smbnetfs", "fuse.curlftpfs", "fuse.quobyte", "fuse.beegfs"),
    }
)
_VOLATILE = frozenset({"tmpfs", "ramfs"})  # local, but emptied when the machine restarts
_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")
_ESCAPE = re.compile(r"\\([0-7]{3})")


def mount_table(text: str) -> list[tuple[str, str]]:
    """The ``(mount point, filesystem type)`` of each line of a ``/proc/self/mountinfo`` text, in its order (a
    mount after one it covers comes later). The kernel writes a space, tab, newline or backslash in a mount point
    as an octal escape (``\\040``); it is read back as the character."""
    mounts: list[tuple[str, str]] = []
    for line in text.splitlines():
        fields = line.split()
        if "-" not in fields[4:]:
            continue  # not a mount line
        dash = fields.index("-", 4)
        if dash + 1 >= len(fields):
            continue
        point = _ESCAPE.sub(lambda found: chr(int(found.group(1), 8)), fields[4])
        mounts.append((point, fields[dash + 1]))
    return mounts


def _read_mounts() -> list[tuple[str, str]] | None:
    """This process's mounts, or None where there is no mount table to read (not Linux)."""
    source = os.environ.get(MOUNT_TABLE_ENV) or MOUNT_TABLE
    try:
        return mount_table(Path(source).read_text(encoding="utf-8", errors="surrogateescape"))
    except OSError:
        return None


def _existing(path: Path) -> str:
    """``path`` resolved (symbolic links followed), or its nearest folder that exists when it does not yet."""
    found = Path(os.path.abspath(path))
    while not found.exists() and found.parent != found:
        found = found.parent
    return os.path.realpath(found)


def filesystem_type(path: str | Path, mounts: list[tuple[str, str]]) -> str | None:
    """The type of the filesystem ``path`` is on (of its nearest existing folder when it is not there yet): the
    mount of ``mounts`` whose mount point is the longest leading part of the resolved path, the last such when
    one is mounted over another. None when no mount holds it."""
    where = _existing(Path(path))
    best: tuple[int, str] | None = None
    for point, kind in mounts:
        holds = where == point or point == "/" or where.startswith(point.rstrip("/") + "/")
        if holds and (best is None or len(point) >= best[0]):
            best = (len(point), kind)
    return best[1] if best else None


def is_network(kind: str | None) -> bool:
    """Whether filesystem type ``kind`` (as the mount table names it) reaches another machine."""
    return kind is not None and (kind in NETWORK_TYPES or kind.split(".")[0] in NETWORK_TYPES)


def _local_instead(store: Path, mounts: list[tuple[str, str]]) -> Path | None:
    """Where a store like ``store`` could live on a local disk: under the person's data folder, else /var/tmp,
    else /tmp, the first that is local and survives a restart (else the first that is local), in a folder named
    for the person and the project; None when none is local."""
    try:
        user = getpass.getuser()
    except (OSError, KeyError):
        user = str(os.getuid()) if hasattr(os, "getuid") else "user"
    folder = store.absolute().parent
    project = folder.parent.name if folder.name == ".mkl" else folder.name
    data = os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share")
    candidates = [Path(data) / "mkl", Path("/var/tmp") / f"mkl-{user}", Path("/tmp") / f"mkl-{user}"]
    local = [(place, filesystem_type(place, mounts)) for place in candidates]
    local = [(place, kind) for place, kind in local if not is_network(kind)]
    lasting = [place for place, kind in local if kind not in _VOLATILE]
    chosen = lasting[0] if lasting else local[0][0] if local else None
    return chosen / (project or "runs") / store.name if chosen else None


def check_store_place(store: str | Path) -> None:
    """Refuse to write an SQLite store at ``store`` when its folder is on a network filesystem, unless
    ``$MKL_STORE_ON_NETWORK`` is ``allow``; one line naming the path, the filesystem, a local path and the
    PostgreSQL store. A store named by URL (``postgresql://…``) is not a file, and is not looked at."""
    allowed = os.environ.get(ON_NETWORK_ENV, "").strip()
    if allowed and allowed != ALLOW:
        raise StoreError(f"${ON_NETWORK_ENV} must be '{ALLOW}' or unset, not {allowed!r}")
    if allowed == ALLOW or _URL.match(str(store)):
        return
    mounts = _read_mounts()
    if mounts is None:
        return
    path = Path(store)
    kind = filesystem_type(path, mounts)
    if not is_network(kind):
        return
    local = _local_instead(path, mounts)
    instead = f"--store {local}" if local else "--store PATH on a local disk"
    raise StoreError(
        f"{path.absolute()} is on a network filesystem ({kind}), where SQLite's locks do not hold: keep the store "
        f"on a local disk ({instead}; in a notebook %mkl config store=…) or use PostgreSQL (--store "
        f"postgresql://…), or set {ON_NETWORK_ENV}={ALLOW} if this filesystem's locks are sound"
    )
