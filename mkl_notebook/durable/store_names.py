"""Where the run store is unless a command says otherwise, and what a store's records can be made to survive:
names a command's help prints, importable without loading the store (``mkl --help`` reads them)."""

from __future__ import annotations

from pathlib import Path

DEFAULT_STORE = Path(".mkl") / "runs.sqlite"
# What a store's records survive. process: a killed process loses nothing committed, a power cut may lose the last
# model answers (never a person's answer nor a tool's intent: those are synced); power: every record is synced
# before it is used.
DURABILITY = ("process", "power")
