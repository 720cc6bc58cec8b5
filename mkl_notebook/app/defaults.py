"""What a setting is when no flag names it, as a command's help states it: a module that imports nothing heavy,
as ``mkl --help`` reads it (the settings themselves are checked in :mod:`.settings`)."""

from ..durable.store_names import DEFAULT_STORE_NAME

__all__ = ["DEFAULT_CONCURRENCY", "DEFAULT_STORE_NAME", "DURABILITY_ENV"]

DURABILITY_ENV = "MKL_DURABILITY"  # the durability of the store when no flag or setting names one
DEFAULT_CONCURRENCY = 8  # rows of a batch run at once when no flag says
