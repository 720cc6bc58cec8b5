"""Which failures are the user's to fix: both front ends show them as one line, never a traceback.

Every error the package raises is a :class:`MklError`; those that are a person's mistake (a machine, a flag,
a file, a reply) are a :class:`UserError`, and these are what a front end catches and shows.
"""

from __future__ import annotations

from ..errors import MklError, UserError
from ..providers.secrets import scrub

__all__ = ["USER_ERRORS", "MklError", "Superseded", "UsageProblem", "UserError", "without_secrets"]


class UsageProblem(UserError, ValueError):
    """A mistake in how a command was called or what it was given; the message says what and where."""


class Superseded(UsageProblem):
    """A reply came too late: its question was answered (or dropped) by another path; the message says how."""


USER_ERRORS: tuple[type[Exception], ...] = (UserError,)  # what a front end shows as one line


def without_secrets(message: str) -> str:
    """A message a front end shows, without the secrets it may repeat from a person's own line (a URL's
    password or key, an API key): a usage error names the flags it was given."""
    return scrub(message)
