"""Which failures are the user's to fix: both front ends show them as one line, never a traceback."""

from __future__ import annotations

from ..durable.envelope import EnvelopeError
from ..durable.nbfile import NotebookFileError
from ..durable.runs import RunStateError
from ..durable.seals import SealError
from ..durable.stores import StoreError
from ..lang.findings import MachineError
from ..providers.config import ConfigError
from ..providers.scripted import ScriptError


class UsageProblem(ValueError):
    """A mistake in how a command was called or what it was given; the message says what and where."""


class Superseded(UsageProblem):
    """A reply came too late: its question was answered (or dropped) by another path; the message says how."""


# Every error whose message is meant for the person who made the mistake.
USER_ERRORS: tuple[type[Exception], ...] = (
    UsageProblem,
    MachineError,
    ScriptError,
    ConfigError,
    EnvelopeError,
    NotebookFileError,
    StoreError,
    RunStateError,
    SealError,
)
