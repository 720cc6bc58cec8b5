"""Notifications of a new question: a webhook and e-mail, each question announced once per channel at a receiver
that honours the idempotency key, whoever sends and however often a sender is killed.

Everything is local: a webhook receiver (``http.server`` in a thread) that counts raw POSTs and keys, and a small
SMTP server (``socketserver`` in a thread) that counts messages and Message-IDs. Runs are started and notifications
sent by ``mkl`` in subprocesses, which the tests SIGKILL at chosen points while they send.
"""

from __future__ import annotations

import base64
import contextlib
import email
import http.server
import json
import os
import random
import signal
import socketserver
import sqlite3
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from mkl_notebook.app.channels import parse_channel
from mkl_notebook.app.errors import UsageProblem
from mkl_notebook.app.settings import Settings

from support import REFUND, REFUND_SCRIPT, env_without_models, mkl_cli

CANARY = "SecretCanary9f8e7d6c5b4a3"  # the secret path segment of the webhook's URL
HOOK_PATH = f"/services/T0CANARY1/B0CANARY2/{CANARY}"
MAIL_TO = "ops@example.org"
QUESTIONS = 100
WAIT = 300.0  # seconds a condition may take on a busy two-core machine before a test gives up


def _until(condition: Callable[[], bool], what: str, timeout: float = WAIT) -> None:
    """Poll ``condition`` until it holds (a test synchronises on what happened, never on time passing)."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.01)


class _Holding:
    """A receiver's way to stop a sender at a point of its choosing: the ``hold_at``-th request of a round is
    held until ``release`` is set. Held ``taken``, it was taken (counted) and is not answered, so a sender killed
    meanwhile never learns it was; held not taken, it is dropped unread once released, as if the sender had been
    killed before it sent it."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.hold_at: int | None = None
        self.taken = True
        self.seen_in_round = 0
        self.held = threading.Event()
        self.release = threading.Event()
        self.failing = 0  # answer this many requests with a failure first (the receiver is "down")

    def new_round(self, hold_at: int | None, taken: bool = True) -> None:
        with self.lock:
            self.hold_at, self.taken, self.seen_in_round = hold_at, taken, 0
            self.held.clear()
            self.release.clear()

    def _hold(self) -> None:
        self.held.set()
        self.release.wait(WAIT)

    def arriving(self) -> bool:
        """A request is coming in: whether to take it (False: it is the one to drop, and it was held first)."""
        with self.lock:
            self.seen_in_round += 1
            drop = self.seen_in_round == self.hold_at and not self.taken
        if drop:
            self._hold()
        return not drop

    def arrived(self) -> bool:
        """A request was taken (counted in): whether to fail it. Held first when it is the one to hold."""
        with self.lock:
            hold = self.seen_in_round == self.hold_at and self.taken
            fail = self.failing > 0
            if fail:
                self.failing -= 1
        if hold:
            self._hold()
        return fail


class Webhook:
    """A local webhook receiver: every POST as it came (its Idempotency-Key header and JSON body)."""

    def __init__(self) -> None:
        self.posts: list[tuple[str | None, str, dict[str, Any]]] = []  # (header key, path, body)
        self.holding = _Holding()
        receiver = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                if not receiver.holding.arriving():
                    self.close_connection = True
                    return
                with receiver.holding.lock:
                    receiver.posts.append((self.headers.get("Idempotency-Key"), self.path, body))
                failed = receiver.holding.arrived()
                with contextlib.suppress(OSError):  # the sender was killed while this was held
                    self.send_response(503 if failed else 200)
                    self.end_headers()
                    self.wfile.write(b"ok")

            def log_message(self, *args: Any) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}{HOOK_PATH}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def keys(self) -> Counter[str | None]:
        with self.holding.lock:
            return Counter(key for key, _, _ in self.posts)

    def count(self) -> int:
        with self.holding.lock:
            return len(self.posts)

    def close(self) -> None:
        self.holding.release.set()
        self.server.shutdown()
        self.server.server_close()


class MailServer:
    """A local SMTP server speaking enough of the protocol for smtplib: every message as it came."""

    def __init__(self) -> None:
        self.messages: list[email.message.Message] = []
        self.holding = _Holding()
        self.login: tuple[str, str] | None = None  # the user and password it wants (None: no login)
        receiver = self

        class Handler(socketserver.StreamRequestHandler):
            def handle(self) -> None:
                with contextlib.suppress(OSError):  # the sender was killed mid-conversation
                    self._talk()

            def _say(self, line: str) -> None:
                self.wfile.write(line.encode() + b"\r\n")

            def _talk(self) -> None:
                self._say("220 localhost ESMTP test")
                while True:
                    line = self.rfile.readline()
                    if not line:
                        return
                    verb = line.decode(errors="replace").strip().split(" ")[0].upper()
                    if verb == "EHLO":
                        self._say("250-localhost")
                        if receiver.login is not None:
                            self._say("250-AUTH PLAIN")
                        self._say("250 8BITMIME")
                    elif verb == "AUTH":
                        given = base64.b64decode(line.split()[-1]).split(b"\0")[1:]
                        wanted = [part.encode() for part in receiver.login or ("", "")]
                        self._say("235 welcome" if given == wanted else "535 bad credentials")
                    elif verb in ("HELO", "MAIL", "RCPT", "RSET", "NOOP"):
                        self._say("250 ok")
                    elif verb == "DATA":
                        self._say("354 end with .")
                        data = b""
                        while True:
                            chunk = self.rfile.readline()
                            if not chunk or chunk == b".\r\n":
                                break
                            data += chunk[1:] if chunk.startswith(b"..") else chunk
                        if not receiver.holding.arriving():
                            return
                        with receiver.holding.lock:
                            receiver.messages.append(email.message_from_bytes(data))
                        failed = receiver.holding.arrived()
                        self._say("451 try again later" if failed else "250 queued")
                    elif verb == "QUIT":
                        self._say("221 bye")
                        return
                    else:
                        self._say("502 not here")

        self.server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.address = f"127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def ids(self) -> Counter[str | None]:
        with self.holding.lock:
            return Counter(message["Message-ID"] for message in self.messages)

    def count(self) -> int:
        with self.holding.lock:
            return len(self.messages)

    def close(self) -> None:
        self.holding.release.set()
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def webhook() -> Iterator[Webhook]:
    receiver = Webhook()
    yield receiver
    receiver.close()


@pytest.fixture
def mail() -> Iterator[MailServer]:
    server = MailServer()
    yield server
    server.close()


def _folder(tmp_path: Path, rows: int) -> Path:
    (tmp_path / "refund.mkl").write_text(REFUND, encoding="utf-8")
    (tmp_path / "refund.script.yaml").write_text(REFUND_SCRIPT.read_text(encoding="utf-8"), encoding="utf-8")
    lines = [json.dumps({"id": f"t{number:03d}", "ticket": f"ticket {number}"}) for number in range(rows)]
    (tmp_path / "rows.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return tmp_path


def _env(mail: MailServer) -> dict[str, str]:
    return {**env_without_models(), "MKL_SMTP": mail.address, "PYTHONPATH": os.environ.get("PYTHONPATH", "")}


def _mkl(folder: Path, env: dict[str, str], *args: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "mkl_notebook.cli", *args],
        cwd=folder,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def _journals(folder: Path) -> dict[str, list[dict[str, Any]]]:
    with sqlite3.connect(folder / ".mkl" / "runs.sqlite") as db:
        rows = db.execute("SELECT run_id, body FROM records ORDER BY run_id, seq").fetchall()
    journals: dict[str, list[dict[str, Any]]] = {}
    for run_id, body in rows:
        journals.setdefault(run_id, []).append(json.loads(body))
    return journals


def _all_bytes(folder: Path, *, but: tuple[str, ...] = ()) -> bytes:
    return b"".join(path.read_bytes() for path in sorted(folder.rglob("*")) if path.is_file() and path.name not in but)


def test_a_hundred_questions_are_announced_once_each_however_often_the_sender_is_killed(
    tmp_path: Path, webhook: Webhook, mail: MailServer
) -> None:
    folder = _folder(tmp_path, QUESTIONS)
    env = _env(mail)
    rng = random.Random(52)
    said = b""

    def killed_round(args: tuple[str, ...], receiver: Webhook | MailServer, hold_at: int) -> bool:
        """Start ``mkl ARGS`` and SIGKILL it while ``receiver`` holds its ``hold_at``-th request of the round
        (taken and not answered, or not taken at all: chosen at random); False when the sender finished first."""
        nonlocal said
        taken = rng.random() < 0.5
        for each in (webhook, mail):
            each.holding.new_round(hold_at if each is receiver else None, taken)
        process = _mkl(folder, env, *args)
        _until(lambda: receiver.holding.held.is_set() or process.poll() is not None, "the held request")
        if process.poll() is None:
            process.send_signal(signal.SIGKILL)
        out, err = process.communicate(timeout=WAIT)
        said += out + err
        receiver.holding.release.set()
        return process.returncode == -signal.SIGKILL

    # The first sender is the process that journals the questions: `mkl map` announces them once its rows wait.
    start = ("map", "refund.mkl", "--over", "rows.jsonl", "--key", "id", "--script", "refund.script.yaml", "--hitl")
    start += ("--notify", webhook.url, "--notify", f"mailto:{MAIL_TO}")
    assert killed_round(start, webhook, rng.randint(1, 30)), "the map finished before it was killed"
    kills = 1
    # Then `mkl notify`, killed at random points (while the webhook or the mail server holds a request it took),
    # round after round, and at last left to finish until nothing is due.
    for _ in range(8):
        receiver: Webhook | MailServer = rng.choice([webhook, mail])
        kills += killed_round(("notify",), receiver, rng.randint(1, 40))
    for _ in range(10):
        for each in (webhook, mail):
            each.holding.new_round(None)
        done = subprocess.run(
            [sys.executable, "-m", "mkl_notebook.cli", "notify"], cwd=folder, env=env, capture_output=True, check=False
        )
        said += done.stdout + done.stderr
        assert done.returncode == 0, done.stderr
        line = json.loads(done.stdout.decode().strip().splitlines()[-1])
        if not line["notified"][0]["sent"]:
            break
    assert kills >= 5  # (most rounds were cut off mid-send)

    journals = _journals(folder)
    assert len(journals) == QUESTIONS
    questions: dict[str, str] = {}
    for run_id, records in journals.items():
        suspend = [record for record in records if record["t"] == "suspend"]
        assert suspend, run_id
        outcomes = [record for record in records if record["t"] == "notified"]
        intents = {record["key"]: record for record in records if record["t"] == "notify"}
        sent = [record for record in outcomes if record["outcome"] == "sent"]
        # One `notified` outcome per channel, each for an intent journaled before it, each key its own.
        assert len(sent) == 2 and len({record["key"] for record in sent}) == 2, (run_id, outcomes)
        assert all(record["key"] in intents for record in sent)
        assert records[-1]["t"] in ("notified", "sign")
        questions[run_id] = next(iter(intents.values()))["question"]
    assert len(set(questions.values())) == QUESTIONS

    # At the receivers: exactly one notification per question by key, the same key in header and body.
    keys = webhook.keys()
    assert len(keys) == QUESTIONS and None not in keys
    with webhook.holding.lock:
        posts = list(webhook.posts)
    assert all(body["idempotency_key"] == key for key, _, body in posts)
    by_question = {body["question_id"]: set() for _, _, body in posts}
    for key, _, body in posts:
        by_question[body["question_id"]].add(key)
    assert set(by_question) == set(questions.values())
    assert all(len(found) == 1 for found in by_question.values())
    assert all(body["answer_command"] and body["run"] in journals for _, _, body in posts)
    ids = mail.ids()
    assert len(ids) == QUESTIONS and None not in ids
    with mail.holding.lock:
        assert {message["To"] for message in mail.messages} == {MAIL_TO}
    # The kills cut sends off after the receiver took them: those went again, with the same key.
    assert webhook.count() > QUESTIONS or mail.count() > QUESTIONS

    # A replay of every run (the same `mkl map` again) asks nothing new and sends nothing.
    before = (webhook.count(), mail.count())
    code, line, out, err = mkl_cli(folder, *start, env=env)
    said += (out + err).encode()
    assert code == 3 and line["counts"] == {"suspended": QUESTIONS}
    assert (webhook.count(), mail.count()) == before
    assert "notified" not in line

    # The webhook's secret path is in no journal, no printed byte, no file but this machine's channel book.
    assert all(path == HOOK_PATH for _, path, _ in posts)
    assert CANARY.encode() not in said
    assert CANARY.encode() not in _all_bytes(folder, but=("notify-channels.json",))
    assert CANARY.encode() in (folder / ".mkl" / "notify-channels.json").read_bytes()
    assert (folder / ".mkl" / "notify-channels.json").stat().st_mode & 0o077 == 0


def test_a_failed_send_is_journaled_shown_without_secrets_and_retried_until_given_up(
    tmp_path: Path, webhook: Webhook, mail: MailServer
) -> None:
    folder = _folder(tmp_path, 1)
    env = _env(mail)
    webhook.holding.failing = 1  # the receiver is down for the first send
    code, line, out, err = mkl_cli(
        folder,
        *("run", "refund.mkl", "--script", "refund.script.yaml", "--hitl", "--id", "r1", "--notify", webhook.url),
        env=env,
    )
    assert code == 3, err
    shown = webhook.url.split("/services/")[0] + "/…"
    assert line["notification_failed"] == f"{shown}: the webhook answered HTTP 503"
    assert "notification failed" in out
    code, listing, listed, _ = mkl_cli(folder, "runs", env=env)
    assert listing["runs"][0]["notification_failed"] == f"{shown}: the webhook answered HTTP 503"
    assert f"notification failed: {shown}: the webhook answered HTTP 503" in listed

    # The next sender retries with the same key; the run's status no longer says it failed.
    code, line, out, err = mkl_cli(folder, "notify", env=env)
    assert code == 0, err
    assert line["notified"][0]["sent"] == [{"run": "r1", "channel": shown}]
    assert len(set(webhook.keys())) == 1 and webhook.count() == 2
    code, listing, _, _ = mkl_cli(folder, "runs", env=env)
    assert "notification_failed" not in listing["runs"][0]

    # A receiver that stays down is tried a bounded number of times, then given up on, and the run says so.
    webhook.holding.failing = 100
    code, line, out, err = mkl_cli(
        folder,
        *("run", "refund.mkl", "--script", "refund.script.yaml", "--hitl", "--id", "r2", "--notify", webhook.url),
        env=env,
    )
    assert code == 3, err
    attempts = [mkl_cli(folder, "notify", env=env)[1] for _ in range(6)]
    assert [bool(round_["notified"][0]["failed"]) for round_ in attempts] == [True] * 4 + [False] * 2
    code, listing, listed, _ = mkl_cli(folder, "runs", env=env)
    assert listing["runs"][-1]["notification_failed"].endswith("(given up)")
    assert CANARY not in out + err + listed + json.dumps(attempts)
    assert CANARY.encode() not in _all_bytes(folder, but=("notify-channels.json",))


def test_channels_are_checked_and_shown_redacted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    slack = "https://hooks.slack.com/services/T0001/B0002/" + CANARY
    channel = parse_channel(slack, "--notify")
    assert channel.redacted == "https://hooks.slack.com/…"
    assert CANARY not in channel.entry and channel.entry.startswith("sha256:")
    assert parse_channel("https://user:pw@example.org:8443/x?y=1", "--notify").redacted == "https://example.org:8443/…"
    assert parse_channel(f"mailto:{MAIL_TO}", "--notify").address == MAIL_TO
    for bad in ("ftp://example.org/" + CANARY, "mailto:nobody", "https:///" + CANARY):
        with pytest.raises(UsageProblem) as refused:
            parse_channel(bad, "--notify")
        assert CANARY not in str(refused.value)
    settings = Settings(store=tmp_path / "runs.sqlite")
    settings.change("notify", f"{slack}, mailto:{MAIL_TO}")
    assert f"notify = https://hooks.slack.com/…, mailto:{MAIL_TO}" in settings.lines()
    assert CANARY not in repr(settings)
    monkeypatch.setenv("MKL_NOTIFY", slack)
    assert "notify = https://hooks.slack.com/… ($MKL_NOTIFY)" in Settings().lines()
    _folder(tmp_path, 1)
    code, _, out, err = mkl_cli(
        tmp_path, "run", "refund.mkl", "--notify", "gopher://example.org/" + CANARY, env={"MKL_NOTIFY": ""}
    )
    assert code == 2 and "Traceback" not in err and CANARY not in out + err
    assert "--notify: a channel is an https:// (or http://) webhook URL or mailto:ADDRESS" in err


def test_a_notebooks_kernel_announces_its_questions_and_the_notebook_never_holds_the_webhooks_secret(
    tmp_path: Path, webhook: Webhook, mail: MailServer
) -> None:
    """Restart & Run All of a notebook whose webhook is read from the environment (its cells hold no secret): the
    `notify` setting and a run's `--notify` announce each question once; the saved notebook, its outputs, the
    store and the kernel's printing hold no piece of the webhook's secret path."""
    import nbformat
    from lab_client import run_all

    _folder(tmp_path, 0)
    notebook = tmp_path / "approvals.ipynb"
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell("%load_ext mkl_notebook"),
        nbformat.v4.new_code_cell("import os\nhook = os.environ['HOOK']"),
        nbformat.v4.new_code_cell("%mkl config notify=$hook"),
        nbformat.v4.new_code_cell("%mkl config"),
        nbformat.v4.new_code_cell("%%mkl\n" + REFUND),
        nbformat.v4.new_code_cell("%mkl run refund --id nb1 --set ticket=one --script refund.script.yaml"),
        nbformat.v4.new_code_cell("%mkl config notify="),
        nbformat.v4.new_code_cell(
            "%mkl run refund --id nb2 --set ticket=two --script refund.script.yaml --notify $hook"
        ),
        nbformat.v4.new_code_cell("rows = [{'id': 'a', 'ticket': 'three'}, {'id': 'b', 'ticket': 'four'}]"),
        nbformat.v4.new_code_cell("%mkl map refund --over $rows --key id --script refund.script.yaml --notify $hook"),
        nbformat.v4.new_code_cell("%mkl runs"),
    ]
    nbformat.write(nb, notebook)
    run_all(notebook, env={**_env(mail), "HOOK": webhook.url, "PYTHONUNBUFFERED": "1"})
    # The kernel sent on a thread of its own; whatever a kernel shut down before it sent is sent by `mkl notify`.
    code, _, out, err = mkl_cli(tmp_path, "notify", env=_env(mail))
    assert code == 0, err
    keys = webhook.keys()
    with webhook.holding.lock:
        runs = sorted(body["run"] for _, _, body in webhook.posts)
    assert len(keys) == 4 and sorted(set(runs)) == ["nb1", "nb2", "refund-a", "refund-b"]
    assert all(count == 1 for count in keys.values())

    from mkl_notebook.checkpoints import notebook_file

    embedded, damaged = notebook_file.scan(notebook)
    assert not damaged and {"nb1", "nb2"} <= {run.run_id for run in embedded}
    for run in embedded:  # the journals the notebook carries name the channel by digest and host only
        journal = json.dumps(run.records)
        assert CANARY not in journal
        (entry,) = run.records[0]["options"]["notify"]
        assert entry.startswith("sha256:") and entry.endswith(webhook.url.split("/services/")[0] + "/…")
    saved = notebook.read_text(encoding="utf-8")
    assert "notify = http://127.0.0.1:" in saved and "/…" in saved  # %mkl config shows it redacted
    assert CANARY not in saved + out + err
    assert CANARY.encode() not in _all_bytes(tmp_path, but=("notify-channels.json",))


def test_a_person_answers_while_a_receiver_takes_its_time_and_the_sent_notification_is_still_journaled(
    tmp_path: Path, webhook: Webhook, mail: MailServer
) -> None:
    """Sending never holds the run: while the webhook keeps the sender waiting, an answer is taken at once."""
    folder = _folder(tmp_path, 0)
    env = _env(mail)
    webhook.holding.new_round(1)  # the first notification is taken and not answered until released
    sender = _mkl(
        folder,
        env,
        *("run", "refund.mkl", "--script", "refund.script.yaml", "--hitl", "--id", "r2", "--notify", webhook.url),
    )
    _until(webhook.holding.held.is_set, "the webhook to hold the notification")
    code, listing, _, err = mkl_cli(folder, "runs", env=env)
    (waiting,) = [run for run in listing["runs"] if run["run"] == "r2"]
    code, line, _, err = mkl_cli(
        folder,
        *("resume", "--id", "r2", "--script", "refund.script.yaml", "--question", waiting["question_id"]),
        *("--reply", "approve"),
        env=env,
    )
    assert code == 0 and line["status"] == "done", err
    webhook.holding.release.set()
    out, err_bytes = sender.communicate(timeout=WAIT)
    assert sender.returncode == 3, err_bytes
    assert json.loads(out.decode().strip().splitlines()[-1])["notified"] == [webhook.url.split("/services/")[0] + "/…"]
    records = _journals(folder)["r2"]
    assert [r["outcome"] for r in records if r["t"] == "notified"] == ["sent"]
    assert [r["value"] for r in records if r["t"] == "reply"] == ["approve"]


def test_an_e_mail_logs_in_carries_the_key_as_its_message_id_and_a_refused_login_leaks_no_password(
    tmp_path: Path, webhook: Webhook, mail: MailServer
) -> None:
    folder = _folder(tmp_path, 0)
    password = "SmtpPw-Canary-61d0c2"
    mail.login = ("mkl-bot", password)
    env = {**_env(mail), "MKL_SMTP_USER": "mkl-bot", "MKL_SMTP_PASSWORD": "wrong-" + password}
    run = ("run", "refund.mkl", "--script", "refund.script.yaml", "--hitl", "--id", "m1", "--notify")
    code, line, out, err = mkl_cli(folder, *run, f"mailto:{MAIL_TO}", env=env)
    assert code == 3 and mail.count() == 0
    assert line["notification_failed"].startswith(f"mailto:{MAIL_TO}: (535")
    code, line, out2, err2 = mkl_cli(folder, "notify", env={**env, "MKL_SMTP_PASSWORD": password})
    assert code == 0 and line["notified"][0]["sent"] == [{"run": "m1", "channel": f"mailto:{MAIL_TO}"}]
    (message,) = mail.messages
    records = _journals(folder)["m1"]
    (key,) = {record["key"] for record in records if record["t"] == "notified"}
    assert message["Message-ID"] == f"<{key}@mkl-notebook>" and message["To"] == MAIL_TO
    assert message["Subject"] == "mkl: m1 asks: The draft promises a refund. Approve sending it?"
    body = message.get_payload()
    assert "mkl resume --id m1" in body and "--question q-" in body
    assert password not in out + err + out2 + err2
    assert password.encode() not in _all_bytes(folder)


def test_a_reminder_goes_once_on_each_channel_after_remind_after_and_never_before(
    tmp_path: Path, webhook: Webhook, mail: MailServer
) -> None:
    folder = _folder(tmp_path, 1)
    env = _env(mail)
    code, _, _, err = mkl_cli(
        folder,
        *("run", "refund.mkl", "--script", "refund.script.yaml", "--hitl", "--id", "r1", "--notify", webhook.url),
        *("--remind-after", "1s"),
        env=env,
    )
    assert code == 3, err
    assert webhook.count() == 1 and "Reminder" not in webhook.posts[0][2]["text"]  # the question, announced

    def reminded() -> bool:
        mkl_cli(folder, "notify", env=env)
        return webhook.count() == 2

    _until(reminded, "the reminder")
    key, _, body = webhook.posts[1]
    assert body["text"].startswith("Reminder, still waiting: mkl run r1") and body["reminder"] is True
    assert key != webhook.posts[0][0] and key == body["idempotency_key"]
    code, line, _, err = mkl_cli(folder, "notify", env=env)  # sent once: never again
    assert code == 0 and line["notified"][0]["sent"] == [] and webhook.count() == 2, (line, err)


def test_a_notifications_link_opens_the_question_in_the_inbox_when_the_inbox_is_named(
    tmp_path: Path, webhook: Webhook, mail: MailServer
) -> None:
    folder = _folder(tmp_path, 1)
    env = {**_env(mail), "MKL_INBOX_URL": "https://hub.example.org/hub/user-redirect/lab"}
    code, line, _, err = mkl_cli(
        folder,
        *("run", "refund.mkl", "--script", "refund.script.yaml", "--hitl", "--id", "r1", "--notify", webhook.url),
        env=env,
    )
    assert code == 3, err
    [(_, _, body)] = webhook.posts
    link = f"https://hub.example.org/hub/user-redirect/lab?mkl-question={line['question_id']}"
    assert body["inbox_url"] == link and body["text"].endswith(f"Or in the inbox: {link}")
    code, _, _, err = mkl_cli(
        folder,
        *("run", "refund.mkl", "--script", "refund.script.yaml", "--hitl", "--id", "r2", "--notify", webhook.url),
        env=_env(mail),
    )
    assert code == 3 and webhook.posts[1][2]["inbox_url"] is None and "inbox" not in webhook.posts[1][2]["text"]
