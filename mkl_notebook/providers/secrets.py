"""Keeping secrets out of everything a run shows or writes: keys, URL credentials, authorization values.

Provider text (answers, error bodies, log records) passes through :func:`scrub` before it can
reach a journal, a checkpoint, a notebook or a log; URLs pass through :func:`shown_url` before
they are displayed; a streamed answer is shown only as far as :func:`shown_so_far` allows, so a
secret it echoes is never shown a piece at a time before it can be recognised.

A URL's secrets are its ``user:password@``, the values of query parameters whose names look secret
(``?key=``, ``?api_key=``, ``&sig=``, …) and key-shaped path segments (``/v1/key/SECRET``,
``/sk-…``, a long run of letters and digits).
"""

from __future__ import annotations

import base64
import os
import re
import string
from collections.abc import Iterable, Mapping
from urllib.parse import quote, unquote, urlsplit, urlunsplit

MASK = "***"
_SECRET_NAME = re.compile(r"(KEY|TOKEN|SECRET|PASSWORD)", re.IGNORECASE)  # environment variables
# The name of a query parameter, or of the path segment before a value, that carries a secret.
_SECRET_PART = r"(?:key|token|secret|passw|pwd|auth|sig|credential|session)"
_SECRET_PARAM = re.compile(rf"(?i){_SECRET_PART}")
_QUERY_SECRET = re.compile(rf"(?i)([?&][\w.~%\-]*{_SECRET_PART}[\w.~%\-]*=)[^&#\s\"'<>]*[^&#\s\"'<>).,;:!?\]]")
# A URL from its "://" on (found fast, as a literal), not taking a sentence's last character; its scheme before.
_URL_REST = re.compile(r"://[^\s\"'<>`]*[^\s\"'<>`).,;:!?\]]")
_SCHEME_CHARACTERS = frozenset(string.ascii_letters + string.digits + "+.-")
_URL_USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.\-]*://)[^\s/@]+@")
_AUTH_VALUE = re.compile(
    r"(?i)\b((?:proxy-)?authorization|x-api-key|api-key)([\"']?\s*[:=]\s*[\"']?)(?:(bearer|basic|token)\s+)?"
    r"[^\s\"',;}]+"
)
_SCHEME_TOKEN = re.compile(r"(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/=\-]{8,}")
_KEY_LIKE = re.compile(r"\b(sk|pk|rk)-[A-Za-z0-9_\-]{8,}")
# A path segment that is a key itself: an sk-/pk-/rk- key, or 20+ letters and digits with both in it.
_KEY_SEGMENT = re.compile(
    r"(?:(?:sk|pk|rk)-[A-Za-z0-9_\-]{8,}|(?=[A-Za-z0-9]*\d)(?=[A-Za-z0-9]*[A-Za-z])[A-Za-z0-9]{20,})"
)
_URL_SECRET_MIN = 8  # a URL's value shorter than this is no key (``?auth=true``) and is not scrubbed elsewhere
# A known secret this long is also masked where only a piece of it (_PIECE characters or more) shows: an
# echo that lost a character at an edge. Pieces are found from anchors every _STEP characters.
_PIECE, _ANCHOR, _STEP = 12, 8, 4
# The characters of the word a streamed text ends in, while it may still grow into a key, a token or a URL.
_WORD_CHARACTERS = string.ascii_letters + string.digits + "._~+/=%:@?&#!$*-"


def _secret_segments(path: str) -> list[str]:
    """The segments of a URL path that carry a key: one after a segment named like a key, or key-shaped."""
    segments = path.split("/")
    found = []
    for index, segment in enumerate(segments):
        named = index > 0 and _SECRET_PARAM.search(segments[index - 1]) and len(segment) >= _URL_SECRET_MIN
        if named or _KEY_SEGMENT.fullmatch(unquote(segment)):
            found.append(segment)
    return found


def _secret_params(query: str) -> list[tuple[str, str]]:
    """The ``name=value`` pairs of a query whose name looks secret or whose value is key-shaped."""
    pairs = [item.partition("=") for item in query.split("&")]
    return [
        (name, value)
        for name, sep, value in pairs
        if sep and value and (_SECRET_PARAM.search(unquote(name)) or _KEY_SEGMENT.fullmatch(unquote(value)))
    ]


def url_secrets(url: str | None) -> list[str]:
    """The credentials a URL carries, as they may show up elsewhere: the password, ``user:password``, its
    base64 (what a basic-auth header holds), and the keys in its query and path, as written and decoded."""
    if not url:
        return []
    try:
        parts = urlsplit(url)
        password = parts.password
    except ValueError:
        return []
    found: list[str] = []
    if password is not None:
        user, password = unquote(parts.username or ""), unquote(password)
        pair = f"{user}:{password}"
        # The header's base64, and the base64 of the pair as it would read from its 2nd or 3rd character on.
        encoded = [base64.b64encode(pair[skip:].encode()).decode() for skip in range(3)]
        found += [pair, encoded[0], password, *encoded[1:]]
    keys = _secret_segments(parts.path) + [value for _, value in _secret_params(parts.query)]
    for key in keys:
        plain = unquote(key)
        found += [form for form in (key, plain, quote(plain, safe="")) if len(form) >= _URL_SECRET_MIN]
    return list(dict.fromkeys(found))


def shown_url(url: str | None) -> str | None:
    """``url`` with its credentials masked, host and path readable: ``user:password@``, the values of secret
    query parameters (``?key=***``) and key-shaped path segments."""
    if not url:
        return url
    try:
        parts = urlsplit(url)
    except ValueError:
        return _URL_USERINFO.sub(rf"\1{MASK}@", url)
    secret_segments = set(_secret_segments(parts.path))
    secret_names = {name for name, _ in _secret_params(parts.query)}
    if "@" not in parts.netloc and not secret_segments and not secret_names:
        return url  # as it was written, not as urlsplit would spell it again
    netloc = parts.netloc
    if "@" in netloc:
        netloc = f"{MASK}@{netloc.rpartition('@')[2]}"
    path = "/".join(MASK if segment in secret_segments else segment for segment in parts.path.split("/"))
    query = "&".join(
        f"{item.partition('=')[0]}={MASK}" if item.partition("=")[0] in secret_names else item
        for item in parts.query.split("&")
    )
    return urlunsplit((parts.scheme, netloc, path, query, parts.fragment))


def _known(secrets: Iterable[str], env: Mapping[str, str] | None) -> tuple[list[str], list[str]]:
    """The secrets to look for: (masked also by their pieces, masked only whole)."""
    given = [value for value in secrets if value and len(value) >= 4]
    environment = env if env is not None else os.environ
    named = [value for name, value in environment.items() if value and len(value) >= 6 and _SECRET_NAME.search(name)]
    pieces = [value for value in given if len(value) > _PIECE] + [value for value in named if _keylike(value)]
    whole = [value for value in (*given, *named) if value not in pieces]
    return list(dict.fromkeys(pieces)), list(dict.fromkeys(whole))


def _keylike(value: str) -> bool:
    """Whether an environment value looks like a key (random letters and digits), not a path or a name."""
    return (
        len(value) > _PIECE
        and not re.search(r"\s|://|^[/~.]", value)
        and bool(re.search(r"\d", value))
        and bool(re.search(r"[A-Za-z]", value))
    )


def _piece_spans(text: str, secret: str) -> list[tuple[int, int]]:
    """Where ``text`` holds ``secret`` or any piece of it at least ``_PIECE`` characters long.

    Any such piece contains one of the anchors (the secret's ``_ANCHOR`` characters at every ``_STEP``-th
    position); each anchor found is grown both ways while the text goes on matching the secret.
    """
    spans = []
    for offset in range(0, len(secret) - _ANCHOR + 1, _STEP):
        anchor = secret[offset : offset + _ANCHOR]
        at = text.find(anchor)
        while at >= 0:
            start, first = at, offset
            while start > 0 and first > 0 and text[start - 1] == secret[first - 1]:
                start, first = start - 1, first - 1
            end, last = at + _ANCHOR, offset + _ANCHOR
            while end < len(text) and last < len(secret) and text[end] == secret[last]:
                end, last = end + 1, last + 1
            if end - start >= _PIECE:
                spans.append((start, end))
            at = text.find(anchor, at + 1)
    return spans


def _whole_spans(text: str, secret: str) -> list[tuple[int, int]]:
    spans = []
    at = text.find(secret)
    while at >= 0:
        spans.append((at, at + len(secret)))
        at = text.find(secret, at + 1)
    return spans


def _masked(text: str, spans: list[tuple[int, int]]) -> str:
    """``text`` with each of the (possibly overlapping) spans, merged, replaced by one mask."""
    if not spans:
        return text
    kept, cursor = [], 0
    for start, end in sorted(spans):
        if end <= cursor:
            continue
        if start > cursor:
            kept += [text[cursor:start], MASK]
        elif not kept:
            kept.append(MASK)
        cursor = end
    return "".join(kept) + text[cursor:]


def _urls_shown(text: str) -> str:
    """``text`` with each URL in it as :func:`shown_url` shows it."""
    kept, cursor = [], 0
    for rest in _URL_REST.finditer(text):
        start = rest.start()
        while start > cursor and text[start - 1] in _SCHEME_CHARACTERS:
            start -= 1
        while start < rest.start() and not text[start].isalpha():
            start += 1  # a scheme begins with a letter
        if start == rest.start():
            continue
        kept += [text[cursor:start], shown_url(text[start : rest.end()]) or ""]
        cursor = rest.end()
    return "".join(kept) + text[cursor:]


def scrub(text: str, secrets: Iterable[str] = (), env: Mapping[str, str] | None = None) -> str:
    """``text`` without the given ``secrets`` (or pieces of the long ones), secret-looking environment values,
    URL credentials and keys, authorization header values and API-key-shaped tokens."""
    pieces, whole = _known(secrets, env)
    spans = [span for secret in pieces for span in _piece_spans(text, secret)]
    spans += [span for secret in whole for span in _whole_spans(text, secret)]
    text = _masked(text, spans)
    # Each pattern runs only where the text holds what it needs (a streamed answer is scrubbed at every chunk).
    if "://" in text:
        text = _urls_shown(text)
    if "=" in text:
        text = _QUERY_SECRET.sub(rf"\1{MASK}", text)
    lowered = text.lower()
    if "authorization" in lowered or "api-key" in lowered:
        text = _AUTH_VALUE.sub(lambda m: f"{m.group(1)}{m.group(2)}{MASK}", text)
    if "bearer" in lowered or "basic" in lowered:
        text = _SCHEME_TOKEN.sub(lambda m: f"{m.group(1)} {MASK}", text)
    return _KEY_LIKE.sub(MASK, text) if "k-" in text else text


def shown_so_far(text: str, secrets: Iterable[str] = (), env: Mapping[str, str] | None = None) -> str:
    """What of a streamed answer may be shown before the rest of it has arrived: :func:`scrub`-bed, without
    the word it ends in (a key, a token or a URL still arriving cannot be recognised yet) and without any
    ending that could be the start of a known secret. Once the answer is whole, :func:`scrub` shows it all."""
    secrets = list(secrets)
    held = len(text) - len(text.rstrip(_WORD_CHARACTERS))
    pieces, whole = _known(secrets, env)
    known = pieces + whole
    # The longest ending found in a known secret (an ending that is not, has no longer one that is).
    size = 1
    while size <= len(text) and any(text[-size:] in secret for secret in known):
        held, size = max(held, size), size + 1
    return scrub(text[: len(text) - held], secrets, env)
