"""Which executor a run's calls are made on: here (threads, the default), a Dask cluster's current client or
a LocalCluster (``dask``), or a scheduler's address (``dask://ADDRESS``); see :mod:`mkl_notebook.executors`."""

from __future__ import annotations

from ..executors.dask import LOCAL, DaskExecutor, client_for
from ..executors.dask_calls import DaskCalls
from .errors import UsageProblem

__all__ = ["LOCAL", "DaskCalls", "DaskExecutor", "check_executor", "client_for"]


def check_executor(value: str | None) -> str | None:
    """``--executor``: ``threads`` (None), ``dask``, or ``dask://ADDRESS`` (``tcp://`` and the rest pass as given)."""
    if value in (None, "", "threads"):
        return None
    if value == LOCAL or value.startswith("dask://") or "://" in value:
        return value
    raise UsageProblem(f"--executor must be threads, dask or dask://ADDRESS, not {value!r}")
