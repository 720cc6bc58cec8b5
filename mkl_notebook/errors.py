"""The one base of every error this package raises, and the branch of it that is the person's to fix.

A :class:`UserError` is a mistake in what a person gave (a machine, a flag, a file, a reply): the ``mkl``
command and the magics show its message as one line, never a traceback. Every other :class:`MklError` is a
signal between the package's own layers (a run interrupted, a call that failed) or a failure of ours.
"""

from __future__ import annotations


class MklError(Exception):
    """Any error mkl_notebook raises."""


class UserError(MklError):
    """A mistake the person can fix; the message says what and where."""
