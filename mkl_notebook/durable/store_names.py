"""Where the run store is unless a command says otherwise, and what a store's records can be made to survive:
names a command's help prints, importable without loading the store (``mkl --help`` reads them)."""

from __future__ import annotations

from pathlib import Path

DEFAULT_STORE = Path(".mkl") / "runs.sqlite"
DURABILITY = ("process", "power")  # what a store's records survive: a killed process, or a power cut too
