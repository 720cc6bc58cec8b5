"""Which failures are the user's to fix: both front ends show them as one line, never a traceback.

Every error the package raises is a :class:`MklError`; those that are a person's mistake (a machine, a flag,
a file, a reply) are a :class:`UserError`, and these are what a front end catches and shows.
"""

from __future__ import annotations

from ..errors import MklError, UserError

__all__ = ["USER_ERRORS", "MklError", "Superseded", "UsageProblem", "UserError"]


class UsageProblem(UserError, ValueError):
    """A mistake in how a command was called or what it was given; the message says what and where."""


class Superseded(UsageProblem):
    """A reply came too late: its question was answered (or dropped) by another path; the message says how."""


USER_ERRORS: tuple[type[Exception], ...] = (UserError,)  # what a front end shows as one line
