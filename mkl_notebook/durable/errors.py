"""What a store says when it cannot do what it was asked: one clear sentence each."""

from __future__ import annotations

from ..errors import UserError


class StoreError(UserError):
    """A store that cannot be used (corrupt file, unwritable folder); one clear sentence."""


class RunBusy(StoreError):
    """Another process or thread is already advancing this run."""
