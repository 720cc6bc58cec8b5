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
