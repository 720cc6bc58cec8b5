"""Calls made on a Dask cluster's workers, straight to a *call server* on each (a Dask actor).

A Dask task costs several scheduler round trips, and even one actor call costs a message each way
through Dask's comms (about a millisecond of CPU at each end here): at hundreds of calls a second,
on a small machine, that is most of the time. So the calls to one worker travel in batches, over
two actor calls that stay in flight: ``start`` sends the calls that arrived since the last batch
went (and brings back the answers ready then), and ``answers`` waits for those the worker has
answered since it was last asked. Every call
still answers as soon as it is done (a slow call holds back no other), and a batch is just what
queued while the previous message was on its way, so no call waits for a batch to fill.

Each call and each answer is pickled on its own (cloudpickle, which Dask uses), so that one that
cannot be pickled fails alone, as that call's own error. A worker that cannot be reached fails
every call it holds with ``WorkerLost``; the caller decides what a lost call means (made again, or
in doubt). The servers are placed on the workers at first use, again after a loss, and every
``REFRESH_SECONDS`` (a cluster may grow).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import importlib
import itertools
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from typing import Any

MODEL_CALLS = "mkl-model-calls"  # the cluster-wide semaphore's name
REFRESH_SECONDS = 30.0  # how often the servers are matched to the cluster's workers
WAIT_SECONDS = 0.5  # how often a cluster without workers is asked again
POLL_SECONDS = 1.0  # the longest one ``answers`` waits on the worker before asking again


def _distributed() -> Any:
    return importlib.import_module("distributed")  # present: only a chosen Dask executor reaches here


def _dumps(value: Any) -> bytes:
    return bytes(importlib.import_module("cloudpickle").dumps(value))  # Dask's own pickler, installed with it


def _loads(data: bytes) -> Any:
    return importlib.import_module("cloudpickle").loads(data)


# -- on the workers ----------------------------------------------------------------------------


def capped_call(call: Callable[[], Any], capped: Any) -> Any:
    """The call, under the cluster's model-call semaphore when it has one."""
    if capped is None:
        return call()
    with capped:
        return call()


def _pickled(made: bool, value: Any) -> bytes:
    try:
        return _dumps((made, value))
    except Exception as exc:  # an answer that cannot travel back fails as that call's error
        return _dumps((False, RuntimeError(f"the answer could not be sent back from the worker: {exc}")))


def _outcome(pickled: bytes, capped: Any) -> bytes:
    """The call's answer, or the exception it raised, as a pickled value: so that anything the actor calls raise
    at the caller mean the worker could not be reached, never the call's own failure."""
    try:
        return _pickled(True, capped_call(_loads(pickled), capped))
    except Exception as exc:  # the call's own failure travels back as its answer
        return _pickled(False, exc)


class CallServer:
    """A Dask actor, one per worker, that makes the calls sent to it in the worker's own threads."""

    def __init__(self) -> None:
        self.worker = _distributed().get_worker()
        self.semaphores: dict[int, Any] = {}  # by cap: one lease holder for all the calls it caps here
        self.answered: list[tuple[int, bytes]] = []
        self.ready: asyncio.Event | None = None  # made on the worker's event loop, where the methods run

    async def start(self, calls: Sequence[tuple[int, bytes, int | None]]) -> list[tuple[int, bytes]]:
        """Begin each ``(number, pickled call, limit)`` in one of the worker's threads, under the cluster's
        model-call semaphore when ``limit`` caps it; its answer goes back with a later ``start`` or ``answers``.
        The answers of earlier calls ready now travel back with this one's reply."""
        loop = asyncio.get_running_loop()
        for number, call, limit in calls:
            done = loop.run_in_executor(self.worker.executor, _outcome, call, self._capped(limit))
            done.add_done_callback(functools.partial(self._answer, number))
        return self._take()

    async def answers(self, wait: float) -> list[tuple[int, bytes]]:
        """The ``(number, pickled (made, answer))`` of the calls answered since last asked: as soon as there is
        one, or none after ``wait`` seconds."""
        if not self.answered:
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._ready().wait(), wait)
        return self._take()

    def _take(self) -> list[tuple[int, bytes]]:
        self._ready().clear()
        answered, self.answered = self.answered, []
        return answered

    def _answer(self, number: int, done: asyncio.Future[bytes]) -> None:
        self.answered.append((number, done.result()))
        self._ready().set()

    def _ready(self) -> asyncio.Event:
        if self.ready is None:
            self.ready = asyncio.Event()
        return self.ready

    def _capped(self, limit: int | None) -> Any:
        if limit is None:
            return None
        capped = self.semaphores.get(limit)
        if capped is None:  # made here: the worker's threads outside a task know no client of their own
            capped = self.semaphores[limit] = _distributed().Semaphore(
                max_leases=limit, name=MODEL_CALLS, scheduler_rpc=self.worker.scheduler, loop=self.worker.loop
            )
        return capped


# -- here --------------------------------------------------------------------------------------


class WorkerLost(Exception):
    """The worker making a call was lost (or could not be reached) before it answered."""


class _Server:
    """This process's end of one call server. Its messages are sent from the Dask client's event loop, where
    awaiting an actor call costs no thread hand-over: one coroutine sends the calls queued (while one batch
    is on its way, the next queues), another waits for answers while any call is out."""

    def __init__(self, address: str, actor: Any, future: Any, loop: Any, on_lost: Callable[[_Server], None]) -> None:
        self.address = address
        self.actor = actor
        self.future = future  # holds the actor on its worker for as long as this process keeps it
        self.loop = loop  # the client's asyncio event loop
        self.on_lost = on_lost
        self.lock = threading.Lock()
        self.queued: list[tuple[int, bytes, int | None]] = []
        self.waiting: dict[int, Future[tuple[bool, Any]]] = {}
        self.numbers = itertools.count()
        self.sending = self.receiving = False
        self.tasks: set[asyncio.Task[None]] = set()
        self.lost: str | None = None

    @property
    def busy(self) -> int:
        """The calls sent here that have not answered yet."""
        return len(self.waiting)

    def call(self, call: Callable[[], Any], limit: int | None) -> Future[tuple[bool, Any]] | None:
        """Queue ``call`` (from any thread); the future answers ``(made, answer)``, or raises WorkerLost. None if
        this server was lost already (the call was not sent)."""
        answer: Future[tuple[bool, Any]] = Future()
        try:
            pickled = _dumps(call)
        except Exception as exc:  # a call that cannot be sent fails as its own error
            answer.set_result((False, RuntimeError(f"this call cannot be sent to the Dask cluster's workers: {exc}")))
            return answer
        with self.lock:
            if self.lost is not None:
                return None
            number = next(self.numbers)
            self.waiting[number] = answer
            self.queued.append((number, pickled, limit))
            send, receive = not self.sending, not self.receiving
            self.sending = self.receiving = True
        if send or receive:
            self.loop.call_soon_threadsafe(self._begin, send, receive)
        return answer

    def close(self) -> None:
        """Fail the calls still waiting, and send no more."""
        self._fail("the Dask executor was closed")

    def _begin(self, send: bool, receive: bool) -> None:
        for job in [self._send] * send + [self._receive] * receive:
            task = self.loop.create_task(job())
            self.tasks.add(task)  # the loop keeps only a weak reference to a task
            task.add_done_callback(self.tasks.discard)

    async def _send(self) -> None:
        while True:
            with self.lock:
                batch, self.queued = self.queued, []
                if not batch or self.lost is not None:
                    self.sending = False
                    return
            answered = await self._sent("start", batch)
            if answered is None:
                return
            self._hand_out(answered)

    async def _receive(self) -> None:
        while True:
            with self.lock:
                if not self.waiting or self.lost is not None:
                    self.receiving = False
                    return
            answered = await self._sent("answers", POLL_SECONDS)
            if answered is None:
                return
            self._hand_out(answered)

    async def _sent(self, method: str, argument: Any) -> list[tuple[int, bytes]] | None:
        """What the actor's ``method`` answered, or None when its worker could not be reached (then every call
        here fails, WorkerLost). The actor calls carry only bytes and numbers: they fail for no other reason."""
        try:
            answered: list[tuple[int, bytes]] = await getattr(self.actor, method)(argument)
            return answered
        except Exception as exc:
            self._fail(str(exc) or type(exc).__name__)
            return None

    def _hand_out(self, answered: list[tuple[int, bytes]]) -> None:
        with self.lock:
            answers = [(self.waiting.pop(number, None), pickled) for number, pickled in answered]
        for answer, pickled in answers:
            if answer is not None:
                answer.set_result(_loads(pickled))

    def _fail(self, why: str) -> None:
        with self.lock:
            if self.lost is not None:
                return
            self.lost = why
            waiting, self.waiting, self.queued = self.waiting, {}, []
        for answer in waiting.values():
            answer.set_exception(WorkerLost(why))
        self.on_lost(self)


class DaskCalls:
    """The call servers of one Dask client's cluster, chosen least busy first."""

    def __init__(self, client: Any) -> None:
        self.client = client
        self._servers: dict[str, _Server] = {}
        self._gone: set[str] = set()  # workers lost: the scheduler may list one for a while, and it would not answer
        self._changed = threading.Condition()
        self._refreshing = False
        self._refreshed = float("-inf")

    def call(self, call: Callable[[], Any], limit: int | None) -> Any:
        """The answer of ``call`` made on a worker (or the exception it raised there); WorkerLost when the worker
        went away first."""
        answer = None
        while answer is None:
            answer = self._choose().call(call, limit)
        made, value = answer.result()
        if not made:
            raise value
        return value

    def task(self, call: Callable[[], Any], limit: int | None, key: str) -> Any:
        """The answer of ``call`` made as one Dask task, which Dask reschedules if its worker is lost."""
        return self.client.submit(_task, call, limit, key=key, pure=False).result()

    def close(self) -> None:
        """Let go of the servers and their threads."""
        with self._changed:
            servers, self._servers = list(self._servers.values()), {}
        for server in servers:
            server.close()

    def _choose(self) -> _Server:
        """The least busy server, after matching the servers to the workers when that is due (one thread does
        it while the others go on with the servers there are); with no worker yet, wait for one, as a task would."""
        while True:
            with self._changed:
                due = time.monotonic() - self._refreshed > REFRESH_SECONDS
                if self._servers and (not due or self._refreshing):
                    return min(self._servers.values(), key=lambda server: server.busy)
                if self._refreshing:
                    self._changed.wait(WAIT_SECONDS)
                    continue
                self._refreshing = True
            try:
                self._refresh()
            finally:
                with self._changed:
                    self._refreshing = False
                    self._refreshed = time.monotonic() if self._servers else float("-inf")
                    self._changed.notify_all()
                    if not self._servers:
                        self._changed.wait(WAIT_SECONDS)  # no worker yet: ask the scheduler again soon

    def _refresh(self) -> None:
        """One server on every worker of the cluster that has none (and none kept for workers gone)."""
        with self._changed:
            lost = set(self._gone)
        workers = set(self.client.scheduler_info()["workers"]) - lost
        with self._changed:
            left = [self._servers.pop(address) for address in set(self._servers) - workers]
            missing = workers - set(self._servers)
        for server in left:
            server.close()
        for address in missing:
            future = self.client.submit(
                CallServer,
                actor=True,
                workers=[address],
                allow_other_workers=True,  # the worker may be gone by now: then wherever there is one
                pure=False,
                key=f"mkl-call-server-{uuid.uuid4().hex[:8]}",
            )
            try:
                actor = future.result()
            except (OSError, RuntimeError, asyncio.CancelledError, _distributed().KilledWorker):
                continue  # its worker was lost as it started: the next refresh places one on those there are
            placed = next(iter(self.client.who_has(future).get(future.key, ())), None)  # asks the scheduler only
            with self._changed:
                if placed is not None and placed not in self._servers and placed not in self._gone:
                    self._servers[placed] = _Server(placed, actor, future, self.client.loop.asyncio_loop, self._lost)

    def _lost(self, server: _Server) -> None:
        with self._changed:
            if self._servers.get(server.address) is server:
                del self._servers[server.address]
                self._gone.add(server.address)
            self._refreshed = float("-inf")  # match the servers to the workers again at the next call


def _task(call: Callable[[], Any], limit: int | None) -> Any:
    """What a worker runs as a task: the call, under the cluster's model-call semaphore when it is capped."""
    capped = None if limit is None else _distributed().Semaphore(max_leases=limit, name=MODEL_CALLS)
    return capped_call(call, capped)
