"""The oracle that traces: it answers as the oracle it wraps does, times every call the run makes, and turns each
advance into spans once the advance's journal is written."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from ..engine.oracle import Advanced, Effect, Oracle, OracleRequest, Partial, RunInterrupted
from .spans import Call, Conventions, Span, advance_spans

log = logging.getLogger(__name__)

Send = Callable[[str, list[Span]], None]  # exports spans of the trace whose id is given


class TracingOracle(Oracle):
    """``inner``, with every call it makes timed and every advance of a durable run exported through ``send``.

    An export that fails is logged and forgotten: a run never stops, or waits long, for its telemetry.
    """

    traced = True

    def __init__(self, inner: Oracle, send: Send, conventions: Conventions) -> None:
        self.inner = inner
        self.send = send
        self.conventions = conventions
        self._calls: list[Call] = []
        self._lock = threading.Lock()  # fan-out branches call at once

    def _timed(self, request: OracleRequest, answer: Callable[[], Any]) -> Any:
        start = time.time_ns()
        try:
            given = answer()
        except RunInterrupted:
            raise  # no call was made (a person is awaited, no model is here)
        except Exception as failure:
            self._note(Call(request, start, time.time_ns(), error=str(failure)))
            raise
        self._note(Call(request, start, time.time_ns(), answer=given))
        return given

    def _note(self, call: Call) -> None:
        with self._lock:
            self._calls.append(call)

    def ask(self, request: OracleRequest) -> Any:
        return self._timed(request, lambda: self.inner.ask(request))

    def stream(self, request: OracleRequest, partial: Partial) -> Any:
        return self._timed(request, lambda: self.inner.stream(request, partial))

    def replayed(self, request: OracleRequest) -> None:
        now = time.time_ns()
        self._note(Call(request, now, now, replayed=True))
        self.inner.replayed(request)

    def remote_call(self, request: OracleRequest) -> Callable[[], Any] | None:
        return self.inner.remote_call(request)

    @property
    def waits(self) -> bool:
        return self.inner.waits

    def has_hook(self, name: str) -> bool:
        return self.inner.has_hook(name)

    def has_tool(self, name: str) -> bool:
        return self.inner.has_tool(name)

    def tool_effect(self, name: str) -> Effect | None:
        return self.inner.tool_effect(name)

    def advanced(self, advance: Advanced) -> None:
        """Export the spans of the advance that just ended (and forget its calls: the next advance has its own)."""
        with self._lock:
            calls, self._calls = self._calls, []
        if advance.trace is None:
            return
        try:
            spans = advance_spans(advance, calls, self.conventions, time.time_ns())
            self.send(advance.trace[0], spans)
        except Exception as failure:  # telemetry never breaks a run
            log.warning("mkl: the run's trace was not exported: %s", self.conventions.scrub(str(failure)))
