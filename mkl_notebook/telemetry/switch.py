"""Whether traces are exported, and where to: read from the standard OpenTelemetry variables or a setting.

Cheap to import (no OpenTelemetry): a run without export, and ``mkl --help``, load nothing more.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import unquote, urlsplit

from ..errors import UserError

TRACES_PATH = "/v1/traces"  # where an OTLP/HTTP receiver takes traces, under the endpoint it is given
LATEST = "gen_ai_latest_experimental"  # OTEL_SEMCONV_STABILITY_OPT_IN: the newest GenAI attribute names


class EndpointProblem(UserError, ValueError):
    """An ``otel`` setting or ``--otel`` flag that names no OTLP/HTTP endpoint."""


@dataclass(frozen=True)
class Export:
    """Where spans go and what they carry: prompts and answers only with ``capture``; the latest GenAI
    attribute names with ``latest``."""

    endpoint: str
    capture: bool = False
    latest: bool = False


def traces_url(endpoint: str) -> str:
    """The traces URL of an OTLP/HTTP ``endpoint`` given as a base (``http://localhost:4318``) or in full."""
    path = urlsplit(endpoint).path
    return endpoint if path not in ("", "/") else endpoint.rstrip("/") + TRACES_PATH


def export_of(configured: str | None, env: Mapping[str, str]) -> Export | None:
    """Where this process exports traces: ``configured`` (``--otel`` or the ``otel`` setting; ``off``: nowhere),
    else ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` as given, else ``OTEL_EXPORTER_OTLP_ENDPOINT`` with
    ``/v1/traces``; None (no export) when none is, or ``OTEL_SDK_DISABLED`` or ``OTEL_TRACES_EXPORTER=none`` says
    so."""
    if configured is not None and configured.strip().lower() in ("off", "none", ""):
        return None
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return None
    if configured is None and env.get("OTEL_TRACES_EXPORTER", "").strip().lower() == "none":
        return None
    if configured is not None:
        endpoint = traces_url(configured.strip())
    elif env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "").strip():
        endpoint = env["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"].strip()
    elif env.get("OTEL_EXPORTER_OTLP_ENDPOINT", "").strip():
        endpoint = env["OTEL_EXPORTER_OTLP_ENDPOINT"].strip().rstrip("/") + TRACES_PATH
    else:
        return None
    capture = env.get("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "").strip().lower() == "true"
    opted = {word.strip() for word in env.get("OTEL_SEMCONV_STABILITY_OPT_IN", "").split(",")}
    return Export(endpoint, capture=capture, latest=LATEST in opted)


def check_endpoint(value: str, given_as: str) -> str:
    """An endpoint given as a setting or flag: an http(s) URL, or ``off``; anything else is refused in a line."""
    text = value.strip()
    if text.lower() in ("off", "none", ""):
        return "off"
    parts = urlsplit(text)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise EndpointProblem(f"{given_as}: an OTLP/HTTP endpoint is an http:// or https:// URL, or off; not {text!r}")
    return text


HEADER_VARIABLES = ("OTEL_EXPORTER_OTLP_HEADERS", "OTEL_EXPORTER_OTLP_TRACES_HEADERS")


def header_values(env: Mapping[str, str] | None = None) -> tuple[str, ...]:
    """The values of the headers the exporter sends (``key=value,…`` in :data:`HEADER_VARIABLES`): secrets to the
    spans, which never carry them (an ``Authorization`` header's token, a collector's API key)."""
    given = os.environ if env is None else env
    values = []
    for variable in HEADER_VARIABLES:
        for pair in given.get(variable, "").split(","):
            _, equals, value = pair.partition("=")
            if equals and value.strip():
                value = unquote(value).strip()
                values.extend([value, value.split()[-1]])  # (and an "Authorization: Bearer …" header's token alone)
    return tuple(values)
