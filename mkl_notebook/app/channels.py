"""Notification channels: a webhook (``https://…``) or an e-mail address (``mailto:…``), what a journal may say
of one, where this machine keeps them whole, and sending one message on one.

A webhook's URL is often a secret itself (Slack's ``https://hooks.slack.com/services/T…/B…/XXXX`` lets anyone who
holds it post), and a journal travels in notebooks to other people. So a run's journal names a channel only by a
digest and a redacted form (the scheme and host; never the path, the query or a password); the channel as given
is kept on this machine alone, in a file beside the store (:class:`ChannelBook`), or in ``%mkl config notify=``
and ``$MKL_NOTIFY``; a store's own channels, in the store (see :mod:`.channel_places`). Whoever sends looks a
journaled digest up there.
"""

from __future__ import annotations

import contextlib
import hashlib
import http.client
import json
import os
import smtplib
import socket
import ssl
import urllib.error
import urllib.request
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from email.message import EmailMessage
from email.utils import formatdate
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

from ..durable.store_names import is_server_store
from ..errors import MklError
from ..providers.secrets import scrub
from .errors import UsageProblem

NOTIFY_ENV = "MKL_NOTIFY"  # channels for the runs started here, separated by spaces or commas
SMTP_ENV, SMTP_USER_ENV, SMTP_PASSWORD_ENV, SMTP_FROM_ENV = (
    "MKL_SMTP",
    "MKL_SMTP_USER",
    "MKL_SMTP_PASSWORD",
    "MKL_SMTP_FROM",
)
BOOK_NAME = "notify-channels.json"  # beside a store file: the channels this machine sends on, whole
SEND_TIMEOUT = 10.0  # seconds a receiver may take; a slower one is a failed send, retried later
_REASON_MAX = 200


class SendFailed(MklError):
    """A receiver did not take a notification; the message says why, with no secret of the channel in it."""


@dataclass(frozen=True)
class Channel:
    """One channel as given (``given``: kept only on this machine), and what a journal may say of it."""

    given: str
    kind: str  # "webhook" or "email"

    @property
    def digest(self) -> str:
        """The name of the channel in a journal: a digest of it as given (a webhook's secret cannot be read back)."""
        return "sha256:" + hashlib.sha256(self.given.encode("utf-8")).hexdigest()[:32]

    @property
    def redacted(self) -> str:
        """The channel as anyone may be shown it: a webhook's scheme and host (its path, query and any password
        are secrets), an e-mail's address."""
        if self.kind == "email":
            return self.given
        parts = urlsplit(self.given)
        host = parts.netloc.rpartition("@")[2]
        rest = "/…" if parts.path.strip("/") or parts.query else ""
        return f"{parts.scheme}://{host}{rest}"

    @property
    def entry(self) -> str:
        """The channel as a run's options journal it: its digest, then its redacted form."""
        return f"{self.digest} {self.redacted}"

    @property
    def address(self) -> str:
        """An e-mail channel's address."""
        return unquote(self.given.removeprefix("mailto:").partition("?")[0])


def parse_channel(text: str, given_as: str) -> Channel:
    """A channel from its text (a webhook's ``http(s)://`` URL or ``mailto:ADDRESS``); anything else is refused,
    naming ``given_as`` (the message never repeats a webhook's URL)."""
    text = text.strip()
    lowered = text.lower()
    if lowered.startswith(("https://", "http://")):
        try:
            parts = urlsplit(text)
            parts.port  # noqa: B018 (a bad port is refused now, not at the first send)
        except ValueError:
            raise UsageProblem(f"{given_as}: not a webhook URL one can post to") from None
        if not parts.hostname:
            raise UsageProblem(f"{given_as}: a webhook URL names a host (https://HOST/…)")
        return Channel(text, "webhook")
    if lowered.startswith("mailto:"):
        address = unquote(text[len("mailto:") :].partition("?")[0])
        if address.count("@") != 1 or not all(address.split("@")) or any(c in address for c in " ,;<>"):
            raise UsageProblem(f"{given_as}: mailto: names one e-mail address (mailto:someone@example.org)")
        return Channel(text, "email")
    shown = text if len(text) < 40 and "/" not in text else text[:12] + "…"
    raise UsageProblem(
        f"{given_as}: a channel is an https:// (or http://) webhook URL or mailto:ADDRESS, not {shown!r}"
    )


def parse_channels(values: str | Iterable[str] | None, given_as: str) -> tuple[Channel, ...]:
    """The channels given as one text (separated by spaces or commas) or several; none for None."""
    if values is None:
        return ()
    texts = [values] if isinstance(values, str) else list(values)
    words = [word for text in texts for word in text.replace(",", " ").split()]
    return tuple(dict.fromkeys(parse_channel(word, given_as) for word in words))


def journaled(channels: Iterable[Channel]) -> frozenset[str]:
    """The channels as a run's options journal them (:attr:`Channel.entry`)."""
    return frozenset(channel.entry for channel in channels)


def entry_digest(entry: str) -> str:
    """The digest a journaled channel entry names it by."""
    return entry.partition(" ")[0]


def entry_shown(entry: str) -> str:
    """The redacted form a journaled channel entry shows."""
    return entry.partition(" ")[2] or entry


def book_path(store: Path | str) -> Path:
    """Where the channels of a store's runs are kept whole: beside a store file; for a server's store, in
    ``~/.mkl``."""
    if is_server_store(str(store)):
        return Path.home() / ".mkl" / BOOK_NAME
    return Path(store).parent / BOOK_NAME


class ChannelBook:
    """The channels this machine sends on, whole, by digest: a file only its owner can read, beside the store."""

    def __init__(self, path: Path, more: Iterable[Channel] = ()) -> None:
        self.path = path
        self.more = {channel.digest: channel for channel in more}

    def _read(self) -> dict[str, str]:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        return {str(key): str(value) for key, value in data.items()} if isinstance(data, dict) else {}

    def keep(self, channels: Iterable[Channel]) -> None:
        """Remember ``channels`` whole (written atomically, readable by this user alone)."""
        known = self._read()
        added = {channel.digest: channel.given for channel in channels if known.get(channel.digest) != channel.given}
        if not added:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        temporary = self.path.with_name(f".{self.path.name}.{os.getpid()}")
        descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(descriptor, "w", encoding="utf-8") as file:
            json.dump({**known, **added}, file, indent=1, sort_keys=True)
        os.replace(temporary, self.path)

    def find(self, digest: str) -> Channel | None:
        """The channel a journal names by ``digest``, when this machine knows it."""
        if digest in self.more:
            return self.more[digest]
        given = self._read().get(digest)
        if given is None:
            return None
        try:
            channel = parse_channel(given, str(self.path))
        except UsageProblem:
            return None
        return channel if channel.digest == digest else None


def _reason(problem: BaseException, channel: Channel) -> str:
    """Why a send failed, in a line with no secret of the channel (its URL, path or password) in it."""
    text = str(getattr(problem, "reason", None) or problem) or type(problem).__name__
    for secret in (channel.given, urlsplit(channel.given).path, urlsplit(channel.given).query):
        if secret and len(secret) > 1:
            text = text.replace(secret, "…")
    return scrub(" ".join(text.split()))[:_REASON_MAX]


def send(channel: Channel, key: str, message: Mapping[str, Any]) -> None:
    """Send ``message`` (its ``text`` and structured fields) on ``channel`` with idempotency ``key``; raises
    :class:`SendFailed` (saying why, without the channel's secrets) when the receiver did not take it."""
    try:
        if channel.kind == "webhook":
            _post(channel, key, message)
        else:
            _mail(channel, key, message)
    except SendFailed:
        raise
    except (OSError, http.client.HTTPException, smtplib.SMTPException, ssl.SSLError, ValueError) as problem:
        raise SendFailed(_reason(problem, channel)) from None


def _post(channel: Channel, key: str, message: Mapping[str, Any]) -> None:
    body = json.dumps({**message, "idempotency_key": key}).encode("utf-8")
    request = urllib.request.Request(
        channel.given,
        data=body,
        method="POST",
        headers={"Content-Type": "application/json", "Idempotency-Key": key, "User-Agent": "mkl-notebook"},
    )
    try:
        with urllib.request.urlopen(request, timeout=SEND_TIMEOUT) as response:
            response.read()
    except urllib.error.HTTPError as problem:
        raise SendFailed(f"the webhook answered HTTP {problem.code}") from None


def message_id(key: str) -> str:
    """The Message-ID an e-mail notification ``key`` carries, the same on every attempt."""
    return f"<{key}@mkl-notebook>"


def _mail(channel: Channel, key: str, message: Mapping[str, Any]) -> None:
    server = os.environ.get(SMTP_ENV, "").strip()
    if not server:
        raise SendFailed(f"no SMTP server: set ${SMTP_ENV} to host:port")
    host, _, port = server.rpartition(":") if ":" in server else (server, "", "25")
    mail = EmailMessage()
    mail["Subject"] = f"mkl: {message.get('run')} asks: {str(message.get('question') or '')[:120]}"
    mail["From"] = os.environ.get(SMTP_FROM_ENV) or f"mkl@{socket.gethostname()}"
    mail["To"] = channel.address
    mail["Date"] = formatdate(localtime=False)
    mail["Message-ID"] = message_id(key)
    mail["X-Mkl-Idempotency-Key"] = key
    fields = "\n".join(f"{name}: {value}" for name, value in message.items() if name != "text")
    mail.set_content(f"{message.get('text', '')}\n\n{fields}\n")
    with smtplib.SMTP(host, int(port), timeout=SEND_TIMEOUT) as smtp:
        smtp.ehlo()
        if smtp.has_extn("starttls"):
            smtp.starttls(context=ssl.create_default_context())
            smtp.ehlo()
        user = os.environ.get(SMTP_USER_ENV)
        if user:
            smtp.login(user, os.environ.get(SMTP_PASSWORD_ENV, ""))
        smtp.send_message(mail)
        with contextlib.suppress(smtplib.SMTPException, OSError):
            smtp.quit()
