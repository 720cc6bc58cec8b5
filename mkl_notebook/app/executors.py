"""Where a run's calls are made: here (threads, the default), on a Dask cluster's current client or a
LocalCluster (``dask``), or on a scheduler's address (``dask://ADDRESS``); see :mod:`mkl_notebook.executors`.

The Dask side (and asyncio, which it needs) is imported only once a Dask executor is chosen: a command that
makes its calls here does not pay for it.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import TYPE_CHECKING

from ..engine.oracle import Oracle
from ..executors import LOCAL
from .errors import UsageProblem

if TYPE_CHECKING:
    from ..executors.dask_calls import DaskCalls

__all__ = ["LOCAL", "DaskStreams", "check_executor"]


def check_executor(value: str | None) -> str | None:
    """``--executor``: ``threads`` (None), ``dask``, or ``dask://ADDRESS`` (``tcp://`` and the rest pass as given)."""
    if value in (None, "", "threads"):
        return None
    if value == LOCAL or value.startswith("dask://") or "://" in value:
        return value
    raise UsageProblem(f"--executor must be threads, dask or dask://ADDRESS, not {value!r}")


def _to_stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


class DaskStreams:
    """The streams to the workers of each Dask cluster a workspace used, by the executor that named it; with
    ``start_local``, ``dask`` is a LocalCluster started once, sized for the calls the first command asks for
    (else the process's current client).

    A cluster it is given (the notebook's client, a scheduler's address) is checked each time a command
    chooses it: when it cannot hold the calls the command may have in flight (it has no worker, or fewer call
    slots than asked), ``notice`` is told one line saying so and what to do (stderr by default)."""

    def __init__(self, start_local: bool, notice: Callable[[str], None] = _to_stderr) -> None:
        self.start_local = start_local
        self.notice = notice
        self._calls: dict[str, DaskCalls] = {}
        self._closers: list[Callable[[], None]] = []

    def wrapper(self, chosen: str, max_model_calls: int | None, calls: int = 1) -> Callable[[Oracle], Oracle]:
        """What makes a run's calls on the cluster ``chosen`` names (``max_model_calls`` at once, at most), for a
        command that may have ``calls`` calls in flight at once."""
        from ..executors import dask  # Dask loads here, once chosen

        known = self._calls.get(chosen)
        given = not (chosen == LOCAL and self.start_local)
        if chosen == LOCAL and not self.start_local:
            client, _ = dask.client_for(chosen, start_local=False)
            if known is None or known.client is not client:  # the notebook made a new Client since
                known = self._calls[chosen] = dask.DaskCalls(client)
        elif known is None:
            client, close = dask.client_for(chosen, start_local=self.start_local, calls=calls)
            self._closers.append(close)
            known = self._calls[chosen] = dask.DaskCalls(client)
        if given:
            short = known.shortfall(calls)
            if short is not None:
                self.notice(short)
        served, packer = known, dask.Packer()  # one per command: its tools pickled once, not once a call
        return lambda oracle: dask.DaskExecutor(oracle, served, max_model_calls, packer)

    def close(self) -> None:
        """Close the streams, then what was started for them (a LocalCluster)."""
        for calls in self._calls.values():
            calls.close()
        self._calls.clear()
        for close in reversed(self._closers):
            close()
        self._closers.clear()
