"""The workers' end of the calls a run makes on a Dask cluster (see ``dask_calls``).

A worker plugin adds one handler to each worker, ``mkl_calls``: a client opens a comm to the worker
(Dask's own, with the cluster's security), names the handler once, and from then on the comm is a
stream both ways. Each message this way is a list of calls ``(number, pickled call, limit)``; each
message back is a list of answers ``(number, pickled (made, value))``, sent as the calls finish
(those that finish while a message is being written go together in the next). A call runs under
the cluster's model-call semaphore when its ``limit`` caps it.

Calls mostly wait (on a model's answer, a tool's server), so they do not run on the worker's own
thread pool, which Dask sizes for CPU work (one thread per core): that would hold the calls in
flight to the cluster's core count. The plugin gives each worker a pool of its own for them,
``CALL_POOL`` in ``worker.executors`` (so a call made again as a task runs there too): up to
``CALL_THREADS`` threads, each made only when a call finds no idle one. A client never has more
calls in flight than its own threads wait on, so the cap is a bound, not a size.

This module imports ``distributed``: only a chosen Dask executor (and the workers) import it.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import distributed
from distributed.comm.core import CommClosedError
from distributed.protocol import pickle as dask_pickle

HANDLER = "mkl_calls"
MODEL_CALLS = "mkl-model-calls"  # the cluster-wide semaphore's name
READY = "mkl-calls ready"  # the first message of every stream: the worker has the handler
CALL_POOL = "mkl-calls"  # the name of each worker's pool for calls, in ``worker.executors``
CALL_THREADS = 256  # the most calls one worker makes at once (its threads are made as calls need them)


def capped_call(call: Callable[[], Any], capped: Any) -> Any:
    """The call, under the cluster's model-call semaphore when it has one."""
    if capped is None:
        return call()
    with capped:
        return call()


def _pickled(made: bool, value: Any) -> bytes:
    try:
        return bytes(dask_pickle.dumps((made, value)))
    except Exception as exc:  # an answer that cannot travel back fails as that call's error
        failure = RuntimeError(f"the answer could not be sent back from the worker: {exc}")
        return bytes(dask_pickle.dumps((False, failure)))


def outcome(pickled: bytes, capped: Any) -> bytes:
    """The call's answer, or the exception it raised, pickled: so that the call's own failure travels back as
    its answer, and a stream that fails always means the worker could not be reached."""
    try:
        return _pickled(True, capped_call(dask_pickle.loads(pickled), capped))
    except Exception as exc:
        return _pickled(False, exc)


class CallStreams(distributed.WorkerPlugin):
    """Gives every worker of the cluster (those there now and those that join) the ``mkl_calls`` handler."""

    name = "mkl-call-streams"
    idempotent = True  # registered again by another executor of the same cluster: nothing changes

    def setup(self, worker: Any) -> None:
        pool = worker.executors.get(CALL_POOL)
        if pool is None:  # the worker shuts it down with its own executors when it closes
            pool = worker.executors[CALL_POOL] = ThreadPoolExecutor(CALL_THREADS, thread_name_prefix="mkl-call")
        worker.handlers[HANDLER] = _Calls(worker, pool).serve


class _Calls:
    """What one worker's streams share: its pool for calls and its semaphore leases, one holder per cap."""

    def __init__(self, worker: Any, pool: ThreadPoolExecutor) -> None:
        self.worker = worker
        self.pool = pool
        self.semaphores: dict[int, Any] = {}

    def capped(self, limit: int | None) -> Any:
        if limit is None:
            return None
        capped = self.semaphores.get(limit)
        if capped is None:  # made here: the worker's threads outside a task know no client of their own
            capped = self.semaphores[limit] = distributed.Semaphore(
                max_leases=limit, name=MODEL_CALLS, scheduler_rpc=self.worker.scheduler, loop=self.worker.loop
            )
        return capped

    async def serve(self, comm: Any) -> None:
        """One client's stream: make the calls it sends, and send each answer back as soon as it is there (Dask
        passes a handler whose first argument is named ``comm`` the comm it came on)."""
        loop = asyncio.get_running_loop()
        answered: list[tuple[int, bytes]] = []
        ready = asyncio.Event()

        def answer(number: int, done: asyncio.Future[bytes]) -> None:
            answered.append((number, done.result()))
            ready.set()

        async def send() -> None:
            while True:
                await ready.wait()
                ready.clear()
                batch = answered[:]
                del answered[:]
                await comm.write(batch)

        await comm.write(READY)
        sender = asyncio.create_task(send())
        try:
            while not sender.done():
                for number, call, limit in await comm.read():
                    done = loop.run_in_executor(self.pool, outcome, call, self.capped(limit))
                    done.add_done_callback(functools.partial(answer, number))
        except (CommClosedError, OSError):
            pass  # the client went away: its calls still running finish, with no one to tell
        finally:
            sender.cancel()
            with contextlib.suppress(asyncio.CancelledError, CommClosedError, OSError):
                await sender
            await comm.close()
