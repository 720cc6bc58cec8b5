"""A real OTLP/HTTP trace receiver for tests: an ``http.server`` thread on localhost that decodes every
``POST /v1/traces`` body with opentelemetry-proto's ``ExportTraceServiceRequest`` and keeps it."""

from __future__ import annotations

import http.server
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Received:
    """What the receiver was sent: each body's bytes and headers, and every span decoded, as a dict."""

    bodies: list[bytes] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)
    spans: list[dict[str, Any]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def take(self, body: bytes, headers: dict[str, str]) -> None:
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

        request = ExportTraceServiceRequest()
        request.ParseFromString(body)
        decoded = [
            _span(span, resource.resource)
            for resource in request.resource_spans
            for scope in resource.scope_spans
            for span in scope.spans
        ]
        with self.lock:
            self.bodies.append(body)
            self.headers.append(headers)
            self.spans.extend(decoded)

    def wait_for(self, ready: Callable[[list[dict[str, Any]]], bool], seconds: float = 30) -> list[dict[str, Any]]:
        """The spans once ``ready`` holds of them (polled); fails after ``seconds``."""
        deadline = time.monotonic() + seconds
        while True:
            with self.lock:
                spans = list(self.spans)
            if ready(spans):
                return spans
            assert time.monotonic() < deadline, f"the receiver never got the spans awaited: {spans}"
            time.sleep(0.02)


def _value(value: Any) -> Any:
    kind = value.WhichOneof("value")
    if kind == "array_value":
        return [_value(item) for item in value.array_value.values]
    return getattr(value, kind) if kind else None


def _span(span: Any, resource: Any) -> dict[str, Any]:
    return {
        "name": span.name,
        "trace_id": span.trace_id.hex(),
        "span_id": span.span_id.hex(),
        "parent_id": span.parent_span_id.hex() or None,
        "start": span.start_time_unix_nano,
        "end": span.end_time_unix_nano,
        "attributes": {attribute.key: _value(attribute.value) for attribute in span.attributes},
        "events": [
            (event.name, {attribute.key: _value(attribute.value) for attribute in event.attributes})
            for event in span.events
        ],
        "status": span.status.code,
        "kind": span.kind,  # (OTLP: 1 internal, 3 client)
        "resource": {attribute.key: _value(attribute.value) for attribute in resource.attributes},
    }


@contextmanager
def otlp_receiver() -> Iterator[tuple[str, Received]]:
    """A receiver on a free localhost port: its base endpoint (``http://127.0.0.1:PORT``) and what it gets."""
    received = Received()

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            if self.path != "/v1/traces":
                self.send_response(404)
                self.end_headers()
                return
            received.take(body, {key.lower(): value for key, value in self.headers.items()})
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: Any) -> None:
            return None

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", received
    finally:
        server.shutdown()
        server.server_close()
