"""Calls made on a Dask cluster's workers, over one stream to each worker.

A Dask task costs several scheduler round trips, and even one actor call costs a message each way
through Dask's RPC layer (most of a millisecond of CPU at each end here): at hundreds of calls a
second, on a small machine, that is most of the time. So each worker gets a handler (a worker
plugin, ``dask_worker``) and this process keeps one comm open to each, Dask's own comm with the
cluster's security: calls go one way as they come, answers the other way as they finish. What
queues while a message is being written goes in the next one, so no call waits for a batch to
fill and a busy moment costs few messages.

Each call and each answer is pickled on its own (cloudpickle, which Dask uses), so that one that
cannot be pickled fails alone, as that call's own error. A worker whose stream breaks fails every
call it holds with ``WorkerLost``; the caller decides what a lost call means (made again, or in
doubt). The streams are opened at first use, again after a loss, and every ``REFRESH_SECONDS`` to
workers that joined since.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import itertools
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

from ..errors import MklError

REFRESH_SECONDS = 30.0  # how often the streams are matched to the cluster's workers
WAIT_SECONDS = 0.5  # how often a cluster without workers is asked again
OPEN_SECONDS = 10.0  # the longest a worker may take to answer a new stream


def _distributed() -> Any:
    return importlib.import_module("distributed")  # present: only a chosen Dask executor reaches here


def _worker_side() -> Any:
    return importlib.import_module(f"{__package__}.dask_worker")  # imports distributed: only once chosen


def _dumps(value: Any) -> bytes:
    """``value`` pickled as Dask pickles a task: by the standard pickler, by cloudpickle only when that is needed
    (a lambda, a function defined in the notebook)."""
    return bytes(_distributed().protocol.pickle.dumps(value))


def _loads(data: bytes) -> Any:
    return _distributed().protocol.pickle.loads(data)


# -- here --------------------------------------------------------------------------------------


class WorkerLost(MklError):
    """The worker making a call was lost (or could not be reached) before it answered."""


class _Stream:
    """This process's end of one worker's stream. Its messages are written and read on the Dask client's event
    loop: one coroutine writes the calls queued (while one message is being written, the next queues), another
    reads answers for as long as the stream is open."""

    def __init__(self, address: str, comm: Any, loop: asyncio.AbstractEventLoop, on_lost: Callable[[_Stream], None]):
        self.address = address
        self.comm = comm
        self.loop = loop  # the client's asyncio event loop
        self.on_lost = on_lost
        self.lock = threading.Lock()
        self.queued: list[tuple[int, bytes, int | None]] = []
        self.waiting: dict[int, Future[tuple[bool, Any]]] = {}
        self.numbers = itertools.count()
        self.sending = False
        self.tasks: set[asyncio.Task[None]] = set()
        self.lost: str | None = None

    @classmethod
    async def open(cls, address: str, connection_args: dict[str, Any], on_lost: Callable[[_Stream], None]) -> _Stream:
        """A stream to the worker at ``address`` (on the client's loop); raises when the worker does not take it."""
        worker_side = _worker_side()
        comm = await _distributed().comm.connect(address, **connection_args)
        try:
            await comm.write({"op": worker_side.HANDLER, "reply": False})
            hello = await asyncio.wait_for(comm.read(), OPEN_SECONDS)
            if hello != worker_side.READY:
                raise OSError(f"the worker at {address} has no call handler ({hello!r})")
        except BaseException:
            comm.abort()
            raise
        stream = cls(address, comm, asyncio.get_running_loop(), on_lost)
        stream._run(stream._receive())
        return stream

    @property
    def busy(self) -> int:
        """The calls sent here that have not answered yet."""
        return len(self.waiting)

    def call(self, call: Callable[[], Any], limit: int | None) -> Future[tuple[bool, Any]] | None:
        """Queue ``call`` (from any thread); the future answers ``(made, answer)``, or raises WorkerLost. None if
        this stream was lost already (the call was not sent)."""
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
            send = not self.sending
            self.sending = True
        if send:
            self.loop.call_soon_threadsafe(self._run, self._send())
        return answer

    def close(self) -> None:
        """Fail the calls still waiting, send no more, and close the comm (the worker is not lost for that)."""
        self._fail("the Dask executor was closed", lost=False)

    def _run(self, job: Any) -> None:
        task = self.loop.create_task(job)
        self.tasks.add(task)  # the loop keeps only a weak reference to a task
        task.add_done_callback(self.tasks.discard)

    async def _send(self) -> None:
        while True:
            with self.lock:
                batch, self.queued = self.queued, []
                if not batch or self.lost is not None:
                    self.sending = False
                    return
            try:
                await self.comm.write(batch)
            except Exception as exc:
                self._fail(str(exc) or type(exc).__name__)
                return

    async def _receive(self) -> None:
        while self.lost is None:
            try:
                answered: list[tuple[int, bytes]] = await self.comm.read()
            except Exception as exc:
                self._fail(str(exc) or type(exc).__name__)
                return
            with self.lock:
                answers = [(self.waiting.pop(number, None), pickled) for number, pickled in answered]
            for answer, pickled in answers:
                if answer is not None:
                    _settle(answer, pickled)

    def _fail(self, why: str, *, lost: bool = True) -> None:
        with self.lock:
            if self.lost is not None:
                return
            self.lost = why
            waiting, self.waiting, self.queued = self.waiting, {}, []
        for answer in waiting.values():
            answer.set_exception(WorkerLost(why))
        with contextlib.suppress(RuntimeError):  # the client's loop is closed already: so is the comm
            self.loop.call_soon_threadsafe(self.comm.abort)
        if lost:
            self.on_lost(self)


def _settle(answer: Future[tuple[bool, Any]], pickled: bytes) -> None:
    """Give ``answer`` what the worker sent back; one that cannot be read here fails that call alone."""
    try:
        answer.set_result(_loads(pickled))
    except Exception as exc:  # a class this process cannot import, say
        answer.set_result((False, RuntimeError(f"the answer from the Dask worker cannot be read here: {exc}")))


class DaskCalls:
    """The streams to one Dask client's workers, chosen least busy first."""

    def __init__(self, client: Any) -> None:
        self.client = client
        self._streams: dict[str, _Stream] = {}
        self._gone: set[str] = set()  # workers lost: the scheduler may list one for a while, and it would not answer
        self._changed = threading.Condition()
        self._refreshing = False
        self._refreshed = float("-inf")
        self._handlers_given = False

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
        """Close the streams (calls still waiting fail)."""
        with self._changed:
            streams, self._streams = list(self._streams.values()), {}
        for stream in streams:
            stream.close()

    def _choose(self) -> _Stream:
        """The least busy stream, after matching the streams to the workers when that is due (one thread does
        it while the others go on with the streams there are); with no worker yet, wait for one, as a task would."""
        while True:
            with self._changed:
                due = time.monotonic() - self._refreshed > REFRESH_SECONDS
                if self._streams and (not due or self._refreshing):
                    return min(self._streams.values(), key=lambda stream: stream.busy)
                if self._refreshing:
                    self._changed.wait(WAIT_SECONDS)
                    continue
                self._refreshing = True
            try:
                self._refresh()
            finally:
                with self._changed:
                    self._refreshing = False
                    self._refreshed = time.monotonic() if self._streams else float("-inf")
                    self._changed.notify_all()
                    if not self._streams:
                        self._changed.wait(WAIT_SECONDS)  # no worker yet: ask the scheduler again soon

    def _refresh(self) -> None:
        """A stream to every worker of the cluster that has none (and none kept to workers gone)."""
        if not self._handlers_given:  # workers that join later get the handler as they join
            self.client.register_plugin(_worker_side().CallStreams())
            self._handlers_given = True
        with self._changed:
            lost = set(self._gone)
        workers = set(self.client.scheduler_info()["workers"]) - lost
        with self._changed:
            left = [self._streams.pop(address) for address in set(self._streams) - workers]
            missing = workers - set(self._streams)
        for stream in left:
            stream.close()
        loop = self.client.loop.asyncio_loop
        for address in missing:
            opening = _Stream.open(address, self.client.connection_args, self._lost)
            try:
                opened = asyncio.run_coroutine_threadsafe(opening, loop).result(OPEN_SECONDS * 2)
            except Exception:  # gone as it was asked, or not taking streams yet: the next refresh asks again
                continue
            with self._changed:
                if address in self._streams or address in self._gone:
                    opened.close()
                else:
                    self._streams[address] = opened

    def _lost(self, stream: _Stream) -> None:
        with self._changed:
            if self._streams.get(stream.address) is stream:
                del self._streams[stream.address]
                self._gone.add(stream.address)
            self._refreshed = float("-inf")  # match the streams to the workers again at the next call


def _task(call: Callable[[], Any], limit: int | None) -> Any:
    """What a worker runs as a task: the call, under the cluster's model-call semaphore when it is capped."""
    worker_side = _worker_side()
    capped = None if limit is None else _distributed().Semaphore(max_leases=limit, name=worker_side.MODEL_CALLS)
    return worker_side.capped_call(call, capped)
