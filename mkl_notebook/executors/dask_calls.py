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

No wait here is unbounded. A call waiting for its answer checks every ``CHECK_SECONDS`` that the
scheduler still lists its worker (a comm to a machine that vanished may never close; the scheduler
drops such a worker after its ``worker-ttl``), and a call waiting for a worker, or made again as a
task, gives up with ``NoWorkers`` once no worker has been alive for Dask's own
``distributed.scheduler.no-workers-timeout`` (``NO_WORKERS_SECONDS`` when that is unset).
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import io
import itertools
import pickle
import threading
import time
import types
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

from ..errors import MklError

REFRESH_SECONDS = 30.0  # how often the streams are matched to the cluster's workers
WAIT_SECONDS = 0.5  # how often a cluster without workers is asked again
OPEN_SECONDS = 10.0  # the longest a worker may take to answer a new stream
CHECK_SECONDS = 1.0  # how often a call waiting on a worker checks that the cluster still has it
NO_WORKERS_SECONDS = 60.0  # without a worker this long, calls fail (unless Dask's no-workers-timeout says)
NO_WORKERS_SETTING = "distributed.scheduler.no-workers-timeout"


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


class Packer:
    """Pickles the calls of one command. A function that cannot be pickled by reference (defined in a notebook,
    a tools file or a lambda) goes by value, as Dask sends it; cloudpickle takes most of a millisecond of this
    process's CPU for one, so it is pickled once per command and its bytes sent with each of its calls. Its
    globals travel as they were at the command's first call of it (the next command pickles it again)."""

    def __init__(self) -> None:
        self._by_value: dict[int, tuple[Any, bytes | None]] = {}  # id -> the function (kept alive), its bytes

    def dumps(self, call: Callable[[], Any]) -> bytes:
        """``call`` pickled, for a worker to load with ``pickle.loads``; raises when it cannot be."""
        buffer = io.BytesIO()
        try:
            _CallPickler(buffer, self).dump(call)
        except Exception:  # something else cannot go by reference: pickle it all as Dask would (or fail so)
            return _dumps(call)
        return buffer.getvalue()

    def function(self, function: Any) -> bytes | None:
        """The bytes of ``function`` pickled by value, or None when it pickles by reference (importable there)."""
        known = self._by_value.get(id(function))
        if known is not None and known[0] is function:
            return known[1]
        try:
            by_reference: bytes | None = pickle.dumps(function, protocol=pickle.HIGHEST_PROTOCOL)
        except Exception:
            by_reference = None
        if by_reference is not None and b"__main__" not in by_reference:
            pickled = None
        else:
            pickled = _cloudpickle().dumps(function, protocol=pickle.HIGHEST_PROTOCOL)
        self._by_value[id(function)] = (function, pickled)  # threads may race here: each pickles the same
        return pickled


class _CallPickler(pickle.Pickler):
    def __init__(self, buffer: io.BytesIO, packer: Packer) -> None:
        super().__init__(buffer, protocol=pickle.HIGHEST_PROTOCOL)
        self.packer = packer

    def reducer_override(self, obj: Any) -> Any:
        if isinstance(obj, type) and obj.__module__ == "__main__":
            raise pickle.PicklingError("a class of __main__ goes by value")  # a notebook's: the workers have none
        if type(obj) is not types.FunctionType:
            return NotImplemented
        pickled = self.packer.function(obj)
        return NotImplemented if pickled is None else (pickle.loads, (pickled,))


def _cloudpickle() -> Any:
    return importlib.import_module("cloudpickle")  # Dask's own dependency


# -- here --------------------------------------------------------------------------------------


class WorkerLost(MklError):
    """The worker making a call was lost (or could not be reached) before it answered."""


class NoWorkers(MklError):
    """No worker of the cluster has been alive (or reachable) for the time allowed: the call was not made, or
    its task, made again after its worker was lost, found no worker to run on."""


def no_workers_seconds() -> float:
    """How long calls wait for a cluster without workers: Dask's ``distributed.scheduler.no-workers-timeout``
    (as ``DASK_DISTRIBUTED__SCHEDULER__NO_WORKERS_TIMEOUT`` sets it, say), else ``NO_WORKERS_SECONDS``."""
    dask = importlib.import_module("dask")
    setting = dask.config.get(NO_WORKERS_SETTING, None)
    if setting is None:
        return NO_WORKERS_SECONDS
    return float(dask.utils.parse_timedelta(setting, default="seconds"))


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

    def call(self, pickled: bytes, limit: int | None) -> Future[tuple[bool, Any]] | None:
        """Queue a call, pickled (from any thread); the future answers ``(made, answer)``, or raises WorkerLost.
        None if this stream was lost already (the call was not sent)."""
        answer: Future[tuple[bool, Any]] = Future()
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

    def give_up(self, why: str) -> None:
        """Take the worker for lost (its comm may never say so): fail the calls still waiting, send no more."""
        self._fail(why)

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
        self._no_workers_seconds = no_workers_seconds()
        self._unreached_since: float | None = None  # since when no stream could be opened, if so
        self._unlisted_since: float | None = None  # since when the scheduler has listed no worker, if so
        self._listing: tuple[float, set[str] | None] = (float("-inf"), None)  # when the scheduler was asked, what

    def call(self, call: Callable[[], Any], limit: int | None, packer: Packer | None = None) -> Any:
        """The answer of ``call`` made on a worker (or the exception it raised there); WorkerLost when the worker
        went away first; NoWorkers when no worker could be reached for the time allowed (it was not sent).
        ``packer`` pickles it (one per command: see :class:`Packer`)."""
        try:
            pickled = (packer or Packer()).dumps(call)
        except Exception as exc:  # a call that cannot be sent fails as its own error
            raise RuntimeError(f"this call cannot be sent to the Dask cluster's workers: {exc}") from None
        answer = None
        while answer is None:
            stream = self._choose()
            answer = stream.call(pickled, limit)
        while True:
            try:
                made, value = answer.result(timeout=CHECK_SECONDS)
                break
            except TimeoutError:  # still waiting: is its worker still one of the cluster's?
                listed = self._listed()
                if listed is not None and stream.address not in listed:
                    stream.give_up(f"the Dask scheduler no longer lists the worker at {stream.address}")
        if not made:
            raise value
        return value

    def shortfall(self, calls: int) -> str | None:
        """One line saying why this cluster cannot have ``calls`` calls in flight at once, and what to do: it has
        no worker, or fewer call slots (``CALL_THREADS`` a worker) than that. None when it can, or when its
        scheduler cannot be asked now (the calls will say so themselves)."""
        listed = self._listed(fresh=True)
        if listed is None:
            return None
        where = getattr(self.client.scheduler, "address", None) or "its address"
        if not listed:
            return (
                f"The Dask cluster at {where} has no worker: calls wait for one up to {self._no_workers_seconds:g}s, "
                f"then fail. Start workers for it (dask worker {where}), or make the calls here (executor threads)."
            )
        slots = len(listed) * _worker_side().CALL_THREADS
        if slots >= calls:
            return None
        workers = f"{len(listed)} worker{'s' if len(listed) > 1 else ''}"
        return (
            f"The Dask cluster at {where} has {workers}, room for {slots} calls at once, fewer than the {calls} "
            "asked for: the rest wait their turn. Add workers to it, or ask for fewer at once."
        )

    def task(self, call: Callable[[], Any], limit: int | None, key: str) -> Any:
        """The answer of ``call`` made as one Dask task, which Dask reschedules if its worker is lost; NoWorkers
        when no worker has been alive for the time allowed while it waited (the task is cancelled)."""
        dask = _distributed()
        with importlib.import_module("dask").annotate(executor=_worker_side().CALL_POOL):  # a wait, not CPU work
            future = self.client.submit(_task, call, limit, key=key, pure=False)
        while not future.done():
            try:
                dask.wait(future, timeout=CHECK_SECONDS)
            except TimeoutError:
                self._listed()
                with self._changed:
                    since = self._unlisted_since
                try:
                    self._check_alone(since, "alive")
                except NoWorkers:
                    future.cancel()
                    raise
        try:
            return future.result()
        except (dask.client.CancelledError, asyncio.CancelledError):
            raise NoWorkers("its Dask task was cancelled (the Dask client is closing)") from None
        except (dask.scheduler.NoWorkerError, dask.scheduler.NoValidWorkerError) as none:  # the scheduler's own bound
            raise NoWorkers(f"no Dask worker has been alive for {none.timeout:g}s") from None

    def close(self) -> None:
        """Close the streams (calls still waiting fail)."""
        with self._changed:
            streams, self._streams = list(self._streams.values()), {}
        for stream in streams:
            stream.close()

    def _choose(self) -> _Stream:
        """The least busy stream, after matching the streams to the workers when that is due (one thread does
        it while the others go on with the streams there are); with no worker yet, wait for one, as a task would,
        for as long as a cluster may go without workers (then NoWorkers)."""
        while True:
            with self._changed:
                due = time.monotonic() - self._refreshed > REFRESH_SECONDS
                if self._streams and (not due or self._refreshing):
                    return min(self._streams.values(), key=lambda stream: stream.busy)
                refreshing = not self._refreshing
                if refreshing:
                    self._refreshing = True
                else:
                    self._changed.wait(WAIT_SECONDS)
            if refreshing:
                try:
                    self._refresh()
                finally:
                    with self._changed:
                        self._refreshing = False
                        self._refreshed = time.monotonic() if self._streams else float("-inf")
                        if self._streams:
                            self._unreached_since = None
                        elif self._unreached_since is None:
                            self._unreached_since = time.monotonic()
                        self._changed.notify_all()
            with self._changed:
                if self._streams:
                    continue
                since = self._unreached_since
            self._check_alone(since, "reachable")
            if refreshing:
                with self._changed:
                    self._changed.wait(WAIT_SECONDS)  # no worker yet: ask the scheduler again soon

    def _check_alone(self, since: float | None, how: str) -> None:
        """NoWorkers when the cluster has had no worker (``how``: alive, reachable) ``since`` longer than it may."""
        if since is not None and time.monotonic() - since > self._no_workers_seconds:
            raise NoWorkers(f"no Dask worker has been {how} for {self._no_workers_seconds:g}s")

    def _listed(self, fresh: bool = False) -> set[str] | None:
        """The workers the scheduler lists and this process has not lost, asked at most every ``CHECK_SECONDS``
        (unless ``fresh``); None when the scheduler cannot be asked. Notes since when it has listed none."""
        with self._changed:
            asked, listed = self._listing
            if not fresh and time.monotonic() - asked < CHECK_SECONDS:
                return listed
            self._listing = (time.monotonic(), listed)  # the other threads take this answer meanwhile
        try:
            listed = set(self.client.scheduler_info()["workers"])
        except Exception:  # the scheduler is not there (or the client is closing): no worker can be known
            listed = None
        with self._changed:
            if listed is not None:
                listed -= self._gone
            self._listing = (time.monotonic(), listed)
            if listed:
                self._unlisted_since = None
            elif self._unlisted_since is None:
                self._unlisted_since = time.monotonic()
        return listed

    def _refresh(self) -> None:
        """A stream to every worker of the cluster that has none (and none kept to workers gone)."""
        if not self._handlers_given:  # workers that join later get the handler as they join
            try:
                self.client.register_plugin(_worker_side().CallStreams())
            except Exception:  # the scheduler is not there: no stream yet, the next refresh asks again
                return
            self._handlers_given = True
        workers = self._listed(fresh=True)
        if workers is None:
            return  # the scheduler cannot be asked: the streams there are go on as they are
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
