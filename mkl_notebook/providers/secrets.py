"""Keeping secrets out of everything a run shows or writes: keys, URL credentials, authorization values.

Provider text (answers, error bodies, log records) passes through :func:`scrub` before it can
reach a journal, a checkpoint, a notebook or a log; URLs pass through :func:`shown_url` before
they are displayed.
"""

from __future__ import annotations

import base64
import os
import re
from collections.abc import Iterable, Mapping
from urllib.parse import unquote, urlsplit

MASK = "***"
_SECRET_NAME = re.compile(r"(KEY|TOKEN|SECRET|PASSWORD)", re.IGNORECASE)
_URL_USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.\-]*://)[^\s/@]+@")
_AUTH_VALUE = re.compile(
    r"(?i)\b((?:proxy-)?authorization|x-api-key|api-key)([\"']?\s*[:=]\s*[\"']?)(?:(bearer|basic|token)\s+)?"
    r"[^\s\"',;}]+"
)
_SCHEME_TOKEN = re.compile(r"(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/=\-]{8,}")
_KEY_LIKE = re.compile(r"\b(sk|pk|rk)-[A-Za-z0-9_\-]{8,}")


def url_secrets(url: str | None) -> list[str]:
    """The credentials a URL carries, as they may show up elsewhere: the password, ``user:password``,
    and its base64 (what a basic-auth header holds)."""
    if not url:
        return []
    try:
        parts = urlsplit(url)
    except ValueError:
        return []
    if parts.password is None:
        return []
    user, password = unquote(parts.username or ""), unquote(parts.password)
    pair = f"{user}:{password}"
    return [pair, base64.b64encode(pair.encode()).decode(), password]


def shown_url(url: str | None) -> str | None:
    """``url`` with any ``user:password@`` replaced by a mask, for display."""
    return _URL_USERINFO.sub(rf"\1{MASK}@", url) if url else url


def scrub(text: str, secrets: Iterable[str] = (), env: Mapping[str, str] | None = None) -> str:
    """``text`` without the given ``secrets``, secret-looking environment values, URL credentials,
    authorization header values and API-key-shaped tokens."""
    known = [value for value in secrets if value and len(value) >= 4]
    environment = env if env is not None else os.environ
    known += [value for name, value in environment.items() if value and len(value) >= 6 and _SECRET_NAME.search(name)]
    for value in sorted(set(known), key=len, reverse=True):  # longest first: a pair before its password
        if value in text:
            text = text.replace(value, MASK)
    text = _URL_USERINFO.sub(rf"\1{MASK}@", text)
    text = _AUTH_VALUE.sub(lambda m: f"{m.group(1)}{m.group(2)}{MASK}", text)
    text = _SCHEME_TOKEN.sub(lambda m: f"{m.group(1)} {MASK}", text)
    return _KEY_LIKE.sub(MASK, text)
