"""Where the run store is unless a command says otherwise, and what a store's records can be made to survive:
names a command's help prints, importable without loading the store (``mkl --help`` reads them).

The path is a string here (the store and the settings make it a ``Path``): importing :mod:`pathlib` would cost
``mkl --help`` more than the rest of its parser."""

from __future__ import annotations

import os

DEFAULT_STORE_NAME = os.path.join(".mkl", "runs.sqlite")
# What a store's records survive. process: a killed process loses nothing committed, a power cut may lose the last
# model answers (never a person's answer nor a tool's intent: those are synced); power: every record is synced
# before it is used.
DURABILITY = ("process", "power")
STORE_ENV = "MKL_STORE"  # the store a kernel or a command uses when none is named: a path or a postgresql:// URL
SERVER_SCHEMES = ("postgresql://", "postgres://")
# Query parameters of a PostgreSQL URL that carry a secret (libpq's names): never shown, never printed.
SECRET_PARAMETERS = frozenset({"password", "sslpassword"})


def is_server_store(location: object) -> bool:
    """Whether ``location`` names a store on a PostgreSQL server (a ``postgresql://`` URL), not a file."""
    return isinstance(location, str) and location.lower().startswith(SERVER_SCHEMES)


def public_store(location: str) -> str:
    """A store's location as anything shown or written names it: a server URL without its password (in the
    ``user:password@`` part or a ``?password=`` parameter), which its reader supplies from ``PGPASSWORD``,
    ``~/.pgpass`` or ``$MKL_STORE``. A path is shown as it is."""
    if not is_server_store(location):
        return location
    from urllib.parse import urlsplit, urlunsplit  # (only for a server store: `mkl --help` never loads it)

    try:
        parts = urlsplit(location)
    except ValueError:
        return location.split("://", 1)[0] + "://…"  # not a URL one can read: nothing of it is shown
    netloc = parts.netloc
    if "@" in netloc:
        userinfo, _, host = netloc.rpartition("@")
        user = userinfo.partition(":")[0]
        netloc = f"{user}@{host}" if user else host
    query = "&".join(
        item for item in parts.query.split("&") if item and item.partition("=")[0].lower() not in SECRET_PARAMETERS
    )
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))
