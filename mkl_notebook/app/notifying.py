"""Notifying people of a new question, once per question and channel, across crashes.

Each notification has an idempotency key: a digest of the question's id and the channel's digest. A sender
journals the intent (a ``notify`` record: key, channel digest, question), sends, and journals
the outcome (a ``notified`` record: ``sent``, or ``failed`` and why). A sender that finds an intent without an
outcome (one before it was killed between the two) sends again with the same key, which the receiver gets (an
``Idempotency-Key`` header and field; an e-mail's Message-ID), so a receiver that drops a key it has seen shows
one. A key whose ``sent`` outcome is journaled is never sent again, and a replay journals no new question. That
is at-least-once delivery with a stable key: exactly one notification per question at a receiver that honours
the key; the journal says what was sent. A failed send is retried by the next sender, up to :data:`MAX_FAILURES`
times, and never holds the run up.

Who sends: the process that journals the question, right after the suspension is durable (:func:`announce`),
and ``mkl notify`` for whatever is still due (:func:`send_due`, which a scheduler such as ``mkl tick`` may call).
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode

from ..durable import records as rec
from ..durable.errors import RunBusy, StoreError
from ..durable.policy import reminder_due
from ..durable.reading import (
    MAX_FAILURES,
    Sending,
    approvers_of_journal,
    channels_of_journal,
    notification_key,
    run_state,
    sendings,
)
from ..durable.record_types import Record
from ..durable.store_opening import store_there
from ..durable.stores import RunStore
from .cells import NoCells
from .channel_places import of_run, store_channels
from .channels import (
    Channel,
    ChannelBook,
    SendFailed,
    book_path,
    entry_digest,
    entry_shown,
    journaled,
    parse_channels,
    send,
)
from .errors import UsageProblem
from .listing import run_summary, stored_resume

if TYPE_CHECKING:
    from ..durable.runs import Outcome
    from ..engine.options import RunOptions
    from ..lang.model import Machine
    from .requests import MapRequest, StartRequest
    from .settings import Settings


Send = Callable[[Channel, str, Mapping[str, Any]], None]
Endorse = Callable[[list[dict[str, Any]]], Mapping[str, Any]]
SENDING = "#notify"  # after a run's id, the lease of whoever sends its notifications ('#' is in no run id)
INBOX_URL_ENV = "MKL_INBOX_URL"  # a Lab's address, for the link of a notification to the question in the inbox
REMINDER = "#reminder"  # after a question's id, what its reminder's idempotency key is made of
LEASE_WAIT = 30.0  # seconds a sender waits for an advance holding the run to end before it leaves a record


@dataclass(frozen=True)
class DueNotice:
    """A notification to send now: of run ``run``'s ``question`` on the channel journaled as ``entry``."""

    run: str
    question: str
    entry: str
    key: str
    resent: bool  # an intent without an outcome: a send may have left, and goes again with the same key
    reminder: bool = False  # the question's reminder (its run's --remind-after passed), not its first notice

    @property
    def digest(self) -> str:
        return entry_digest(self.entry)


def due_in(run_id: str, records: Sequence[Mapping[str, Any]], now: float | None = None) -> list[DueNotice]:
    """The notifications run ``run_id``'s journal says are due (at ``now``): of the question it waits on, one
    per channel, and once its run's ``--remind-after`` has passed (and no deadline decided it), its reminder on
    each channel too (a key of its own: one reminder per question and channel); none sent already or given up
    on."""
    question = run_state(records).question_id(run_id)
    channels = channels_of_journal(records)
    if question is None or not channels:
        return []
    notices = [(question, False)]
    if reminder_due(records, time.time() if now is None else now) is not None:
        notices.append((f"{question}{REMINDER}", True))
    known = sendings(records)
    due = []
    for entry in channels:
        for about, reminder in notices:
            key = notification_key(about, entry_digest(entry))
            sending = known.get(key, Sending())
            if sending.sent or len(sending.failures) >= MAX_FAILURES:
                continue
            resent = sending.intents > len(sending.failures)
            due.append(DueNotice(run_id, question, entry, key, resent=resent, reminder=reminder))
    return due


def due_notifications(store: RunStore) -> list[DueNotice]:
    """Every notification due in ``store``: of each question waiting there, on each of its run's channels."""
    due: list[DueNotice] = []
    for summary in store.runs():
        if summary.status == "suspended":
            due += due_in(summary.run_id, store.read(summary.run_id))
    return due


def message(run_id: str, records: list[dict[str, Any]], store_flag: str | None) -> dict[str, Any]:
    """A notification's content: ``text`` (Slack's field: the question, what it is about, the command that
    answers it) and the same as fields."""
    listed = run_summary(run_id, records, stored_resume(run_id, records, store_flag))
    state = run_state(records)
    asked = listed.get("asked_at")
    when = datetime.fromtimestamp(asked, timezone.utc).isoformat(timespec="seconds") if asked else None
    approvers = list(approvers_of_journal(records))
    text = f"mkl run {run_id} ({listed.get('machine')}) asks: {listed.get('ask')}"
    if state.about:
        text += f"\nAbout: {state.about[:1500]}"
    if approvers:
        text += f"\nWho may answer: {', '.join(approvers)}"
    text += f"\nAnswer it: {listed.get('command')}"
    inbox = inbox_link(listed.get("question_id"))
    if inbox is not None:
        text += f"\nOr in the inbox: {inbox}"
    return {
        "text": text,
        "run": run_id,
        "machine": listed.get("machine"),
        "question_id": listed.get("question_id"),
        "question": listed.get("ask"),
        "about": state.about,
        "asked_at": when,
        "approvers": approvers,
        "answer_command": listed.get("command"),
        "answer_commands": listed.get("commands", []),
        "inbox_url": inbox,
    }


def inbox_link(question: Any) -> str | None:
    """Where a notification's link opens the question in JupyterLab's inbox panel: ``$MKL_INBOX_URL`` (a Lab's
    address; on JupyterHub ``https://HUB/hub/user-redirect/lab``, which opens the reader's own server) with the
    question named; None when it is not set."""
    base = os.environ.get(INBOX_URL_ENV, "").strip()
    if not base or not isinstance(question, str):
        return None
    return f"{base}{'&' if '?' in base else '?'}{urlencode({'mkl-question': question})}"


@dataclass
class Report:
    """What a round of sending did: notifications sent, failed (run, channel shown, why), and not sent here
    because this machine does not know the channel or the run was busy."""

    sent: list[tuple[str, str]] = field(default_factory=list)
    failed: list[tuple[str, str, str]] = field(default_factory=list)
    skipped: list[tuple[str, str, str]] = field(default_factory=list)


def send_run(
    store: RunStore,
    run_id: str,
    book: ChannelBook,
    *,
    store_flag: str | None = None,
    endorse: Endorse | None = None,
    sender: Send = send,
    report: Report | None = None,
) -> Report:
    """Send what is due of run ``run_id``: for each notification its intent, the send, then its outcome;
    ``endorse`` signs what was added. One sender of a run's notifications at a time (another one's run is left
    to it); records are journaled under the run's lease, but the lease is let go while a receiver takes its
    time, so that a person answering meanwhile is not refused."""
    report = report if report is not None else Report()
    try:
        with store.lease(run_id + SENDING):
            with store.lease(run_id):
                records = store.read(run_id)
                due = due_in(run_id, records)
                content = message(run_id, records, store_flag) if due else {}
                sending = []
                for item in due:
                    channel = book.find(item.digest)
                    if channel is None:
                        report.skipped.append((run_id, entry_shown(item.entry), "the channel is not configured here"))
                    else:
                        sending.append((item, channel))
            for item, channel in sending:
                said = _reminding(content) if item.reminder else content
                _send_one(store, run_id, item, channel, said, sender, endorse, report)
    except RunBusy:
        report.skipped.append((run_id, "", "the run is being advanced or notified elsewhere; the next sender sends"))
    return report


def _reminding(content: Mapping[str, Any]) -> dict[str, Any]:
    """A question's notice as its reminder says it: still waiting."""
    return {**content, "text": f"Reminder, still waiting: {content.get('text', '')}", "reminder": True}


def _send_one(
    store: RunStore,
    run_id: str,
    item: DueNotice,
    channel: Channel,
    content: Mapping[str, Any],
    sender: Send,
    endorse: Endorse | None,
    report: Report,
) -> None:
    """One notification: its intent journaled (unless one is open: a send may have left, and goes again with the
    same key), the send, its outcome journaled."""
    if not item.resent and not _journal(store, run_id, [rec.notify_record(item.key, item.digest, item.question)]):
        report.skipped.append((run_id, entry_shown(item.entry), "the run was busy; the next sender sends"))
        return
    try:
        sender(channel, item.key, content)
    except SendFailed as problem:
        outcome = rec.notified_record(item.key, str(problem) or "failed")
        report.failed.append((run_id, entry_shown(item.entry), str(problem)))
    else:
        outcome = rec.notified_record(item.key)
        report.sent.append((run_id, entry_shown(item.entry)))
    if not _journal(store, run_id, [outcome], endorse):
        # Sent, and not journaled: the next sender sends again with the same key, which the receiver drops.
        report.skipped.append((run_id, entry_shown(item.entry), "its outcome waits for the next sender"))


def _journal(store: RunStore, run_id: str, records: list[Record], endorse: Endorse | None = None) -> bool:
    """Append ``records`` to run ``run_id`` under its lease, waiting a while for an advance that holds it to end;
    False when it did not end in time (nothing appended)."""
    from ..durable.reading import unsigned_from

    deadline = time.monotonic() + LEASE_WAIT
    while True:
        try:
            with store.lease(run_id):
                for record in records:
                    store.append(run_id, record)
                if endorse is not None:
                    journal = store.read(run_id)
                    if unsigned_from(journal) < len(journal):
                        store.append(run_id, endorse(journal))
            return True
        except RunBusy:
            if time.monotonic() > deadline:
                return False
            time.sleep(0.05)


def send_due(
    store: RunStore,
    book: ChannelBook,
    *,
    store_flag: str | None = None,
    endorse: Endorse | None = None,
    sender: Send = send,
) -> Report:
    """Send every notification due in ``store`` (see :func:`due_notifications`); what was done, in a report."""
    report = Report()
    for run_id in dict.fromkeys(item.run for item in due_notifications(store)):
        send_run(store, run_id, book, store_flag=store_flag, endorse=endorse, sender=sender, report=report)
    return report


def channel_book(store: Path | str, more: Iterable[Channel] = ()) -> ChannelBook:
    """The channels a store's runs are sent on, kept on this machine (and ``more`` given now)."""
    return ChannelBook(book_path(store), more)


def with_channels(
    options: RunOptions,
    given: str | Sequence[str] | None,
    settings: Settings,
    *,
    placed: tuple[Sequence[Channel], Sequence[Channel]] = ((), ()),
) -> RunOptions:
    """``options`` with the channels a new run announces its questions on: its own (those given, ``--notify``,
    else the ``notify`` setting, else ``$MKL_NOTIFY``) and ``placed``, its machine folder's and its store's (see
    :mod:`.channel_places`), each once. Its own and its folder's are kept whole in the store's channel book on
    this machine (the store keeps its own: one unset there is sent on no more); the run's options journal only
    their digests and redacted forms."""
    own = parse_channels(given, "--notify") if given else settings.notify_channels()
    folder, stored = placed
    channels = tuple(dict.fromkeys((*own, *folder, *stored)))
    if not channels:
        return options
    channel_book(settings.store).keep(dict.fromkeys((*own, *folder)))
    return dataclasses.replace(options, notify=journaled(channels))


def start_options(ws: Any, asks: StartRequest | MapRequest, machine: Machine, **more: Any) -> RunOptions:
    """What workspace ``ws`` starts a run of ``machine`` with (:meth:`Settings.start_options`), with the channels
    announcing its questions (:func:`with_channels`): its own, its machine folder's and its store's
    (:func:`~.channel_places.of_run`, each shown as the run starts). Bad flags are refused before the store,
    which the store's channels are read from, is opened (or made)."""
    options = ws.settings.start_options(asks, **more)
    if asks.notify:
        parse_channels(asks.notify, "--notify")
    return with_channels(options, asks.notify, ws.settings, placed=of_run(ws, machine))


def known_channels(ws: Any, more: Iterable[Channel] = ()) -> ChannelBook:
    """The channels workspace ``ws`` can send on: those this machine keeps for its store, its ``notify``
    setting's, its store's (looked up now: one unset there is sent on no more) and ``more``."""
    stored = [placed.channel for placed in store_channels(ws.store)]
    return channel_book(ws.settings.store, (*ws.settings.notify_channels(), *stored, *more))


def after_advance(ws: Any, run_id: str) -> Report:
    """Send run ``run_id``'s due notifications from workspace ``ws``; a failure is journaled, and never fails
    the command or the cell."""
    try:
        book = known_channels(ws)
        return send_run(ws.store, run_id, book, store_flag=ws.store_flag(), endorse=ws.equipment.endorser())
    except (StoreError, UsageProblem, OSError) as problem:
        return Report(skipped=[(run_id, "", f"not sent now ({type(problem).__name__}); `mkl notify` sends it")])


def announce(ws: Any, outcome: Outcome) -> None:
    """Right after an advance of workspace ``ws`` left a run waiting (its suspension durable), send the
    notifications of its question: at once from a command (``ws.notified`` keeps what it did), on a thread of
    its own in a kernel, so that the cell is not held up by a slow receiver (a kernel stopped meanwhile leaves
    the intent journaled, and ``mkl notify`` sends it again with its key)."""
    ws.notified.pop(outcome.run_id, None)
    if outcome.result.status != "suspended" or not channels_of_journal(outcome.records):
        return
    if isinstance(ws.cells, NoCells):
        ws.notified[outcome.run_id] = after_advance(ws, outcome.run_id)
    else:
        threading.Thread(target=after_advance, args=(ws, outcome.run_id), name="mkl-notify", daemon=True).start()


def store_in_reach(location: Path | str) -> bool:
    """Whether there is a run store at ``location`` to send from (sending never makes one)."""
    return store_there(location)


def stores_under(folder: Path) -> tuple[list[Path], list[str]]:
    """The run stores (``.mkl/runs.sqlite``) under ``folder``, and why any found was refused (a link out of it)."""
    from .listing import files_under

    stores, refused = [], []
    for path, _shown, problem in files_under(folder):
        if problem is not None:
            refused.append(problem)
        elif path.suffix != ".ipynb":
            stores.append(path)
    return stores, refused


def send_from(ws: Any, channels: Iterable[Channel] = ()) -> Report:
    """Send every notification due in workspace ``ws``'s store (``channels``: given now, beside those this machine
    keeps), journaling and signing as ``ws`` does."""
    book = known_channels(ws, channels)
    return send_due(ws.store, book, store_flag=ws.store_flag(), endorse=ws.equipment.endorser())


def announce_waiting(ws: Any) -> None:
    """Send whatever is due in workspace ``ws``'s store on a thread of its own (a kernel's batch just left rows
    waiting: the cell is not held up by a slow receiver); a failure is journaled, or left to ``mkl notify``."""

    def sending() -> None:
        with contextlib.suppress(StoreError, UsageProblem, OSError):  # (what is due stays due for the next sender)
            send_from(ws)

    threading.Thread(target=sending, name="mkl-notify", daemon=True).start()
