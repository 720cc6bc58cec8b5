"""The channels a run announces its questions on besides its own: those of its machine's folder and its store's.

- **A machine's folder**: a file ``mkl-notify.txt`` beside the machine's ``.mkl`` file (for a machine defined in
  a notebook, beside the notebook), one or more channels a line in ``--notify``'s syntax, ``#`` starting a
  comment. Such a file often came with a clone, written by someone else, and a webhook in it makes this machine
  POST each question to an address its writer chose. So it is read, never obeyed unseen: every channel it names
  is shown, redacted, where each run starts, naming the file and line; only ``https://``, ``http://`` and
  ``mailto:`` channels are taken, and a line that is anything else stops the run in one line naming file and line.
- **A store**: its ``notify`` setting (:mod:`~mkl_notebook.durable.store_settings`), set with ``mkl notify
  --store S --set URL``: every run started in the store announces on them, whoever starts it. They are kept in
  the store whole (whoever sends must know them), never in a journal, and shown redacted.

A run announces on the union of its own channels (``--notify``, else the ``notify`` setting, else
``$MKL_NOTIFY``), its folder's and its store's, each once.
"""

from __future__ import annotations

import contextlib
import re
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..durable.store_settings import SettingsStore
from ..durable.stores import RunStore
from ..lang import files
from ..lang.model import Machine
from ..render.common import printable
from .cells import NoCells
from .channels import Channel, parse_channel, parse_channels
from .errors import UsageProblem

FOLDER_FILE = "mkl-notify.txt"  # beside a folder's machines: the channels of every run of them
STORE_KEY = "notify"  # the store's setting that holds its channels, one a line, as given
_FILE_LIMIT = 64 * 1024
_COMMENT = re.compile(r"(^|\s)#.*$")  # (a '#' inside a URL, its fragment, is not a comment)


@dataclass(frozen=True)
class GivenChannel:
    """A channel and where it was given (``FILE, line N``, or the store), as a run's start shows it."""

    channel: Channel
    source: str


def folder_channels(folder: Path | None) -> list[GivenChannel]:
    """The channels folder ``folder``'s ``mkl-notify.txt`` names (none without one); a line that is not channels
    is refused in one line naming the file and line."""
    if folder is None:
        return []
    path = folder / FOLDER_FILE
    if not path.exists():
        return []
    try:
        text = files.read_text(path, _FILE_LIMIT)
    except UnicodeDecodeError:
        raise UsageProblem(f"{path}: is not UTF-8 text") from None
    except (OSError, files.UnfitFile) as problem:
        raise UsageProblem(f"{path}: {getattr(problem, 'strerror', None) or problem}") from None
    found = []
    for number, line in enumerate(text.splitlines(), 1):
        where = f"{path}, line {number}"
        words = _COMMENT.sub("", line).replace(",", " ").split()
        found += [GivenChannel(parse_channel(word, where), where) for word in words]
    return found


def _stored(store: RunStore) -> str:
    if not isinstance(store, SettingsStore):
        return ""
    return store.setting(STORE_KEY) or ""


def store_channels(store: RunStore) -> list[GivenChannel]:
    """The channels store ``store`` announces every run's questions on (its ``notify`` setting)."""
    where = f"the notify setting of store {store.location}"
    return [GivenChannel(channel, where) for channel in parse_channels(_stored(store).splitlines(), where)]


def _change_store(store: RunStore, change: Callable[[list[Channel]], list[Channel]]) -> list[Channel]:
    """Store ``store``'s channels as ``change`` makes them of those it has, in one transaction of the store (two
    people adding a channel at once both add theirs); the channels it now has."""
    if not isinstance(store, SettingsStore):
        raise UsageProblem(f"{store.location}: this store keeps no settings")
    where = f"the notify setting of store {store.location}"

    def changed(value: str | None) -> str | None:
        kept = list(dict.fromkeys(change(list(parse_channels((value or "").splitlines(), where)))))
        return "\n".join(channel.given for channel in kept) or None

    return list(parse_channels((store.change_setting(STORE_KEY, changed) or "").splitlines(), where))


def add_to_store(store: RunStore, given: Iterable[str]) -> list[Channel]:
    """Store ``store``'s channels with those ``given`` (``--set``) added; the channels it now has."""
    added = parse_channels(list(given), "--set")
    return _change_store(store, lambda kept: [*kept, *added])


def remove_from_store(store: RunStore, given: Iterable[str]) -> list[Channel]:
    """Store ``store``'s channels without those ``given`` (``--unset``: a channel as given, its digest as
    ``--list`` shows it, or ``all``); the channels it now has. One it does not have is refused, naming it
    redacted, and nothing changes."""
    given = [text.strip() for text in given]
    for text in given:
        if text != "all" and not text.startswith("sha256:"):
            parse_channel(text, "--unset")  # (refused now if it is no channel at all)

    def removing(kept: list[Channel]) -> list[Channel]:
        for text in given:
            matching = [channel for channel in kept if text in ("all", channel.given, channel.digest)]
            if not matching and text != "all":
                shown = text if text.startswith("sha256:") else parse_channel(text, "--unset").redacted
                raise UsageProblem(f"--unset: {shown} is not a channel of store {store.location} (`--list` lists them)")
            kept = [channel for channel in kept if channel not in matching]
        return kept

    return _change_store(store, removing)


def placed_channels(
    folder: Path | None, store: Callable[[], RunStore], tell: Callable[[str], None] | None
) -> tuple[list[Channel], list[Channel]]:
    """The channels a run of a machine in ``folder`` started in ``store`` (opened once the folder's file is
    read: a bad file makes no store) announces on besides its own: its folder's and its store's, each ``told``
    (redacted, with where it was given) as the run starts."""
    in_folder = folder_channels(folder)
    in_store = store_channels(store())
    if tell is not None:
        for item in (*in_folder, *in_store):
            tell(printable(f"this run notifies {item.channel.redacted} (from {item.source})"))
    return [item.channel for item in in_folder], [item.channel for item in in_store]


def tell_stderr(text: str) -> None:
    """Show ``text`` to whoever started a run: on stderr (a terminal's, or a kernel's cell output)."""
    print(text, file=sys.stderr, flush=True)


def of_run(ws: Any, machine: Machine) -> tuple[list[Channel], list[Channel]]:
    """:func:`placed_channels` of a run of ``machine`` in workspace ``ws``: the folder of the machine's file; for
    a machine defined in a notebook's cell, the notebook's folder (the kernel's working folder); a command's
    machine without a file (the library's) is in none. Shown with ``ws.tell``."""
    made_from = ws.shelf.files.get(machine.name)
    folder: Path | None = None
    if made_from is not None:
        folder = made_from.parent
    elif not isinstance(ws.cells, NoCells):
        with contextlib.suppress(OSError):  # (a kernel whose working folder was deleted is in none)
            folder = Path.cwd()
    return placed_channels(folder, lambda: ws.store, ws.tell)


def shown_beside(ws: Any) -> list[str]:
    """The channels a run of a machine defined here would announce on besides its own, as ``%mkl config`` lists
    them: this folder's file's (the kernel's working folder) and the store's, redacted, each with where it was
    given. Reading writes nothing: a store not made yet is none; a file that is no channels says why."""

    def said(found: Iterable[GivenChannel]) -> str:
        return ", ".join(printable(f"{item.channel.redacted} ({item.source})") for item in found) or "none"

    try:
        in_folder = said(folder_channels(Path.cwd()))
    except (UsageProblem, OSError) as problem:  # (a bad file stops a run that starts here; listed, it is said)
        in_folder = printable(f"not read: {problem}")
    with ws.reading() as store:
        in_store = said(store_channels(store)) if store is not None else "none"  # (alike before a store is made)
    return [f"notify ({FOLDER_FILE} here) = {in_folder}", f"notify (the store's) = {in_store}"]


def kept_in_store(location: Path | str, add: Iterable[str] = (), remove: Iterable[str] = ()) -> list[Channel]:
    """The channels of the store at ``location`` once those in ``add`` are kept there and those in ``remove``
    dropped (``mkl notify --set / --unset / --list``); only listing (neither given) writes and makes nothing."""
    from ..durable.store_opening import close_store, open_store, reading_store

    add, remove = list(add), list(remove)
    if not add and not remove:
        with reading_store(None, location) as reading:
            return [] if reading is None else [placed.channel for placed in store_channels(reading)]
    store = open_store(location)
    try:
        return add_to_store(store, add) if add else remove_from_store(store, remove)
    finally:
        close_store(store)
