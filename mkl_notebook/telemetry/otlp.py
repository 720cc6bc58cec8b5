"""Sending spans to an OTLP/HTTP receiver: the one module that imports the OpenTelemetry SDK, and only when a run
exports (``pip install 'mkl_notebook[otel]'``).

Headers (``OTEL_EXPORTER_OTLP_HEADERS``, ``OTEL_EXPORTER_OTLP_TRACES_HEADERS``), the timeout and compression are the
exporter's own, read from the standard variables; the service is ``OTEL_SERVICE_NAME``, else ``mkl``.
"""

from __future__ import annotations

import atexit
import logging
import os
from collections.abc import Callable
from typing import Any

from .._version import __version__
from ..errors import UserError
from .spans import Span

INSTALL = "pip install 'mkl_notebook[otel]'"
# The loggers through which the exporter and the SDK's batch processor tell of a failed export.
EXPORT_LOGGERS = ("opentelemetry.exporter.otlp.proto.http.trace_exporter", "opentelemetry.sdk.trace.export")
log = logging.getLogger(__name__)


class _FailedExport(logging.Filter):
    """Stands in for the exporter's own words when an export fails: they repeat the endpoint (its credentials
    too) at every retry, in a paragraph each; one scrubbed line per receiver is said instead."""

    def __init__(self, endpoint: str, scrub: Callable[[str], str]) -> None:
        super().__init__()
        self.endpoint, self.scrub, self.said = endpoint, scrub, False
        self.closing: Callable[[], None] | None = None  # while the process ends: what stops the exporter's retries

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno < logging.WARNING:
            return False
        if not self.said:
            self.said = True
            reason = self.scrub(record.getMessage()).splitlines()[0][:300]
            log.warning("mkl: traces could not be sent to %s; they are dropped (%s)", self.scrub(self.endpoint), reason)
        if self.closing is not None:  # a command that ends does not wait through a dead receiver's retries
            stop, self.closing = self.closing, None
            stop()
        return False


class TelemetryMissing(UserError, ImportError):
    """Traces are to be exported and the OpenTelemetry SDK is not installed."""


class OtlpSender:
    """Sends the spans of one trace at a time to ``endpoint``, one exporter (one HTTP session) for all of them."""

    def __init__(self, endpoint: str, scrub: Callable[[str], str] = str) -> None:
        try:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
            from opentelemetry.sdk.resources import Resource
            from opentelemetry.sdk.util.instrumentation import InstrumentationScope
        except ImportError as missing:
            raise TelemetryMissing(
                f"exporting traces to {endpoint} needs the OpenTelemetry SDK ({missing.name} is missing): {INSTALL}"
            ) from None
        from opentelemetry.sdk.trace.export import BatchSpanProcessor

        self.endpoint = endpoint
        self._quiet = _FailedExport(endpoint, scrub)
        for name in EXPORT_LOGGERS:
            logging.getLogger(name).addFilter(self._quiet)
        # Spans leave on the processor's own thread: an advance never waits on a slow or absent receiver, and
        # what is still queued is sent when the process ends (atexit), within the exporter's timeout.
        self._exporter = OTLPSpanExporter(endpoint=endpoint)
        self._processor = BatchSpanProcessor(self._exporter)
        named = {} if os.environ.get("OTEL_SERVICE_NAME") else {"service.name": "mkl"}
        self._resource = Resource.create({**named, "service.version": __version__})
        self._scope = InstrumentationScope("mkl_notebook", __version__)
        atexit.register(self.close)

    def __call__(self, trace_id: str, spans: list[Span]) -> None:
        """Queue ``spans`` of the trace ``trace_id`` for export (a receiver that refuses them is logged by the SDK)."""
        for span in spans:
            self._processor.on_end(self._readable(int(trace_id, 16), span))

    def _readable(self, trace_id: int, span: Span) -> Any:
        from opentelemetry.sdk.trace import Event, ReadableSpan
        from opentelemetry.trace import SpanContext, SpanKind, Status, StatusCode, TraceFlags

        flags = TraceFlags(TraceFlags.SAMPLED)
        context = SpanContext(trace_id, int(span.span_id, 16), is_remote=False, trace_flags=flags)
        parent = None
        if span.parent_id is not None:
            parent = SpanContext(trace_id, int(span.parent_id, 16), is_remote=False, trace_flags=flags)
        status = Status(StatusCode.ERROR, span.error) if span.error is not None else Status(StatusCode.UNSET)
        return ReadableSpan(
            span.name,
            context=context,
            parent=parent,
            resource=self._resource,
            attributes=span.attributes,
            events=[Event(name, attributes, timestamp) for name, timestamp, attributes in span.events],
            status=status,
            kind=SpanKind.CLIENT if span.client else SpanKind.INTERNAL,
            start_time=span.start_ns,
            end_time=span.end_ns,
            instrumentation_scope=self._scope,
        )

    def close(self) -> None:
        """Send what is queued, and let go of the exporter's thread and HTTP session (once)."""
        atexit.unregister(self.close)
        self._quiet.closing = self._exporter.shutdown
        self._processor.shutdown()
        for name in EXPORT_LOGGERS:
            logging.getLogger(name).removeFilter(self._quiet)
