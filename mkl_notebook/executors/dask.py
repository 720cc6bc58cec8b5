"""Where a run's calls are made: here (the default), or on a Dask distributed cluster.

With Dask, only the calls ship: each live model, tool or hook call goes to one of the cluster's
workers; the run loop and its journal stay in this process, which remains their single writer.
Replayed answers never leave it. Calls go straight to each worker, over a stream this process
keeps open to it (see :mod:`.dask_calls`), rather than through the scheduler as one task each.

A worker lost in the middle of a call loses nothing: an idempotent call is made again as a Dask
task, which Dask reschedules until a worker answers, and the journal records the one answer that
came back. A non-idempotent tool call is never made twice: if its worker is lost, its run stops
*in doubt*, exactly as when this process stops in the middle of one. A cluster left without
workers (all lost, none restarted) holds no run forever: once none has been alive for Dask's
``distributed.scheduler.no-workers-timeout`` (60 s when unset), the calls waiting for one fail as
a provider's outage would, and nothing is journaled for them: running the run again makes them.
``max_model_calls`` caps the model calls in flight across the whole cluster (a
``distributed.Semaphore``), for rate limits.

Calls wait far more than they compute, so on every cluster they run on a pool each worker keeps for
them (``dask_worker.CALL_THREADS`` a worker), never on its CPU threads: a command has as many calls in
flight as it asks for. The command line's own cluster (:func:`local_cluster`) is sized for that: few
worker processes, free ports. A cluster given (a notebook's client, a scheduler's address) is taken as
it is, and :meth:`DaskCalls.shortfall` says when it cannot hold the calls a command asks for.

Dask is optional (``pip install mkl-notebook[dask]``) and imported only when chosen.
"""

from __future__ import annotations

import importlib
import logging
import math
import os
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..engine.oracle import (
    Effect,
    JudgeRequest,
    Oracle,
    OracleError,
    OracleRequest,
    OutcomeUnknown,
    Partial,
    ProduceRequest,
    ToolRequest,
)
from ..errors import UserError
from . import LOCAL
from .dask_calls import DaskCalls, NoWorkers, Packer, WorkerLost

CORES_PER_WORKER = 4  # the command's own cluster: its calls mostly wait, so few processes serve many
MOST_WORKERS = 4
CLOSE_SECONDS = 30  # the longest the command's own LocalCluster may take to close
DASK_HINT = "Dask is not installed: pip install 'mkl-notebook[dask]' (or pip install distributed)"


class ExecutorError(UserError):
    """A Dask cluster that cannot be used as asked (not installed, no scheduler there, no client)."""


def distributed() -> Any:
    """The ``distributed`` package, or a usage problem saying how to install it."""
    try:
        return importlib.import_module("distributed")
    except ImportError:
        raise ExecutorError(DASK_HINT) from None


def client_for(executor: str, *, start_local: bool, calls: int = 1) -> tuple[Any, Callable[[], None]]:
    """A Dask client for ``executor`` and how to let it go. ``dask`` is the current client of this process
    (a notebook's ``Client()``), or with ``start_local`` a LocalCluster started now for ``calls`` calls at once
    (:func:`local_cluster`)."""
    dask = distributed()
    if executor != LOCAL:
        address = executor.removeprefix("dask://")
        address = address if "://" in address else f"tcp://{address}"
        try:
            client = dask.Client(address, timeout="10s")
        except OSError as exc:
            raise ExecutorError(f"--executor {executor}: no Dask scheduler answers there ({exc})") from None
        return client, client.close
    if not start_local:
        try:
            return dask.get_client(), lambda: None
        except ValueError:
            raise ExecutorError(
                "executor=dask uses this notebook's Dask client, and there is none: run "
                "`from distributed import Client; client = Client()` first, or give executor=dask://ADDRESS"
            ) from None
    cluster = local_cluster(calls)
    client = dask.Client(cluster)

    def close() -> None:
        # A nanny still starting a lost worker again logs its cancelled start as an error, with a traceback: the
        # command stops its own cluster, and what its rows met they say themselves.
        quiet = logging.getLogger("distributed")
        level = quiet.level
        quiet.setLevel(logging.CRITICAL)
        try:
            client.close(timeout=CLOSE_SECONDS)
            cluster.close(timeout=CLOSE_SECONDS)
        finally:
            quiet.setLevel(level)

    return client, close


def local_cluster(calls: int) -> Any:
    """The command's own LocalCluster, sized for calls that wait rather than for CPU work: one worker process
    for every ``CORES_PER_WORKER`` cores (at least one, at most ``MOST_WORKERS``; more only when ``calls``
    exceeds their call slots), one CPU thread each, as the calls run on each worker's own pool
    (``CALL_THREADS``); a process more would cost the command its start (seconds on a busy machine) and
    serve only the CPU share of the calls. It binds no fixed port: its scheduler and HTTP server take free
    ports of this machine, and it serves no dashboard."""
    worker_side = importlib.import_module(f"{__package__}.dask_worker")
    few = max(1, min((os.cpu_count() or 1) // CORES_PER_WORKER, MOST_WORKERS))
    workers = max(few, math.ceil(calls / worker_side.CALL_THREADS))
    return distributed().LocalCluster(
        n_workers=workers,
        threads_per_worker=1,
        processes=True,
        host="127.0.0.1",
        dashboard_address="127.0.0.1:0",  # None would still serve HTTP on 8787, warning when that is taken
        scheduler_kwargs={"dashboard": False},
    )


def _not_made(why: str) -> OracleError:
    """A call the cluster could not make for want of workers: not the provider's answer, so nothing is journaled
    and running the run again makes it (a provider outage: a suspendable run suspends)."""
    return OracleError(
        f"provider-error: {why}; run it again once the Dask cluster has workers, or with --executor threads",
        suspendable=True,
        called=False,
    )


@dataclass
class DaskExecutor(Oracle):
    """Makes ``inner``'s calls on a Dask cluster (those it can make elsewhere); the rest here."""

    inner: Oracle
    calls: DaskCalls
    max_model_calls: int | None = None
    packer: Packer = field(default_factory=Packer)  # share one across a command's runs: see Packer

    def ask(self, request: OracleRequest) -> Any:
        call = self.inner.remote_call(request)
        if call is None:
            return self.inner.ask(request)
        model = isinstance(request, (ProduceRequest, JudgeRequest))
        once = isinstance(request, ToolRequest) and not request.idempotent
        limit = self.max_model_calls if model else None
        try:
            return self.calls.call(call, limit, self.packer)
        except NoWorkers as none:  # the call was not sent
            raise _not_made(f"{none} (the call was not sent)") from None
        except WorkerLost as lost:
            if once:
                assert isinstance(request, ToolRequest)
                raise OutcomeUnknown(request.position, request.name, request.state) from None
            return self._again(request, call, limit, lost)

    def _again(self, request: OracleRequest, call: Callable[[], Any], limit: int | None, lost: WorkerLost) -> Any:
        """An idempotent call whose worker was lost, made again as a task Dask reschedules until it is answered."""
        key = f"mkl-{request.kind}-{request.position}-{uuid.uuid4().hex[:8]}"
        try:
            return self.calls.task(call, limit, key)
        except distributed().KilledWorker as killed:
            raise OracleError(
                f"provider-error: the Dask workers making this call were lost ({lost}; {killed})",
                suspendable=True,
                called=True,
            ) from None
        except NoWorkers as none:
            raise _not_made(f"the Dask worker making this call was lost, and {none} since") from None

    def stream(self, request: OracleRequest, partial: Partial) -> Any:
        return self.ask(request)  # a call made on a worker answers whole

    def replayed(self, request: OracleRequest) -> None:
        self.inner.replayed(request)

    @property
    def waits(self) -> bool:
        return True  # every call waits on the cluster: fan-out branches overlap their waits

    def has_hook(self, name: str) -> bool:
        return self.inner.has_hook(name)

    def has_tool(self, name: str) -> bool:
        return self.inner.has_tool(name)

    def tool_effect(self, name: str) -> Effect | None:
        return self.inner.tool_effect(name)
