"""Findings about a machine document, and the error raised when loading fails."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from ..errors import UserError

Severity = Literal["error", "warning"]


@dataclass(frozen=True)
class Finding:
    severity: Severity
    code: str  # a stable, short identifier such as "unknown-key" or "no-path-to-end"
    message: str  # one sentence a user can act on
    line: int | None = None
    column: int | None = None
    state: str | None = None
    key: str | None = None

    def location(self) -> str:
        if self.line is None:
            return ""
        return f"line {self.line}" + (f", column {self.column}" if self.column else "")

    def __str__(self) -> str:
        where = self.location()
        prefix = f"{where}: " if where else ""
        return f"{prefix}{self.severity}: {self.message}"


class MachineError(UserError, ValueError):
    """A machine document that cannot be loaded.

    ``str()`` is one sentence naming where and what; ``findings`` holds every
    error found, so tools can show them all.
    """

    def __init__(self, message: str, findings: tuple[Finding, ...] = (), source_name: str | None = None):
        super().__init__(message)
        self.message = message
        self.findings = findings
        self.source_name = source_name

    @classmethod
    def from_findings(cls, findings: list[Finding], source_name: str | None = None) -> MachineError:
        # The first in the document first, as ``mkl check`` lists them: what a person reads and fixes first.
        errors = sorted((f for f in findings if f.severity == "error"), key=lambda f: f.line or 0)
        first = errors[0]
        where = first.location()
        name = f"{source_name}: " if source_name else ""
        more = f" (and {len(errors) - 1} more error{'s' if len(errors) > 2 else ''})" if len(errors) > 1 else ""
        text = f"{name}{where + ': ' if where else ''}{first.message}{more}"
        return cls(text, tuple(errors), source_name)
