"""Replacing a person's file so that a power cut leaves the old file or the new one, never an older one.

A file is replaced by writing a temporary file beside it, syncing it, and renaming it over the file. The
rename lives in the folder's entries, which the file's own sync does not reach: until the folder is synced
too, a power cut can bring back the file as it was before (a notebook's answer, a trusted key, a mark that
says a payment is under way, gone). So every replacement syncs its folder after the rename.
"""

from __future__ import annotations

import os
from pathlib import Path


def sync_folder(folder: str | Path) -> None:
    """Make the entries of ``folder`` (a rename into it, a file made in it) durable. A file system that cannot
    sync a folder (some network ones) orders its renames itself: nothing more can be done there."""
    try:
        fd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def replace_file(temp: str | Path, path: str | Path) -> None:
    """Rename ``temp`` (written and synced already) over ``path``, durably: its folder is synced after."""
    os.replace(temp, path)
    sync_folder(Path(path).parent)
