"""Sending spans to an OTLP/HTTP receiver: the one module that imports the OpenTelemetry SDK, and only when a run
exports (``pip install 'mkl_notebook[otel]'``).

Headers (``OTEL_EXPORTER_OTLP_HEADERS``, ``OTEL_EXPORTER_OTLP_TRACES_HEADERS``), the timeout and compression are the
exporter's own, read from the standard variables; the service is ``OTEL_SERVICE_NAME``, else ``mkl``.
"""

from __future__ import annotations

import atexit
import os
from typing import Any

from .._version import __version__
from ..errors import UserError
from .spans import Span

INSTALL = "pip install 'mkl_notebook[otel]'"


class TelemetryMissing(UserError, ImportError):
    """Traces are to be exported and the OpenTelemetry SDK is not installed."""


class OtlpSender:
    """Sends the spans of one trace at a time to ``endpoint``, one exporter (one HTTP session) for all of them."""

    def __init__(self, endpoint: str) -> None:
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
        # Spans leave on the processor's own thread: an advance never waits on a slow or absent receiver, and
        # what is still queued is sent when the process ends (atexit), within the exporter's timeout.
        self._processor = BatchSpanProcessor(OTLPSpanExporter(endpoint=endpoint))
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
        self._processor.shutdown()
