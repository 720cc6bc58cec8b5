"""Notification channels given by a machine's folder (``mkl-notify.txt``) and by a store (``mkl notify --set``):
every run of a machine of that folder, every run started in that store, announces its question on them once,
beside the run's own ``--notify``; the folder's are shown where the run starts; neither's secret reaches a
journal or a terminal; a bad file or URL is one line naming where it is.

A local webhook receiver and SMTP server (tests/test_notify.py's) take the notifications; runs are ``mkl`` in
subprocesses.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from test_notify import CANARY, MAIL_TO, MailServer, Webhook

from support import REFUND, REFUND_SCRIPT, mkl_cli

START = ("run", "refund.mkl", "--script", "refund.script.yaml", "--hitl")


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


def _machine(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "refund.mkl").write_text(REFUND, encoding="utf-8")
    shutil.copy(REFUND_SCRIPT, folder / "refund.script.yaml")
    return folder


def _env(tmp_path: Path, mail: MailServer | None = None) -> dict[str, str]:
    env = {"MKL_NOTIFY": "", "MKL_STORE": "", "HOME": str(tmp_path / "home")}  # (a PostgreSQL store's book: ~/.mkl)
    return {**env, "MKL_SMTP": mail.address} if mail is not None else env


def _journal_text(store: Path) -> str:
    with sqlite3.connect(store) as db:
        return "\n".join(body for (body,) in db.execute("SELECT body FROM records"))


def test_a_machine_folders_channel_file_announces_each_question_once_and_is_shown_where_the_run_starts(
    tmp_path: Path, webhook: Webhook
) -> None:
    team = _machine(tmp_path / "team")
    (team / "mkl-notify.txt").write_text(f"# the team's hook\n{webhook.url}  # approvals\n", encoding="utf-8")
    env = _env(tmp_path)
    code, line, out, err = mkl_cli(team, *START, "--id", "r1", env=env)
    assert code == 3, err
    shown = webhook.url.split("/services/")[0] + "/…"
    assert f"this run notifies {shown} (from {team / 'mkl-notify.txt'}, line 2)" in err
    assert line["notified"] == [shown]
    assert webhook.count() == 1 and webhook.posts[0][2]["run"] == "r1"
    # A run whose own --notify names the same channel: one channel, announced once.
    code, line, out2, err2 = mkl_cli(team, *START, "--id", "r2", "--notify", webhook.url, env=env)
    assert code == 3 and line["notified"] == [shown], err2
    assert [body["run"] for _, _, body in webhook.posts] == ["r1", "r2"]
    code, line, _, err = mkl_cli(team, "notify", env=env)  # nothing is due any more
    assert code == 0 and line["notified"][0]["sent"] == [] and webhook.count() == 2, err

    # A machine of a folder without such a file, run into the same store, announces nothing.
    _machine(team / "other")
    code, line, _, err = mkl_cli(team, "run", "other/refund.mkl", "--script", "refund.script.yaml", "--hitl", env=env)
    assert code == 3 and "notified" not in line and "this run notifies" not in err and webhook.count() == 2

    assert CANARY not in out + err + out2 + err2 + json.dumps(line)
    assert CANARY not in _journal_text(team / ".mkl" / "runs.sqlite")


def test_a_bad_channel_file_or_url_is_one_line_naming_where_it_is(tmp_path: Path) -> None:
    team = _machine(tmp_path / "team")
    listed = team / "mkl-notify.txt"
    listed.write_text(f"https://hooks.example.org/ok\n\ngopher://example.org/{CANARY}\n", encoding="utf-8")
    code, _, out, err = mkl_cli(team, *START, env=_env(tmp_path))
    assert code == 2 and "Traceback" not in err and CANARY not in out + err
    (said,) = err.strip().splitlines()
    assert said.startswith(f"mkl: error: {listed}, line 3: a channel is an https:// (or http://) webhook URL")
    assert not (team / ".mkl").exists()  # refused before anything is made

    elsewhere = _machine(tmp_path / "elsewhere")  # no channel file: a bad --notify alone is refused as early
    code, _, out, err = mkl_cli(elsewhere, *START, "--notify", f"gopher://example.org/{CANARY}", env=_env(tmp_path))
    assert code == 2 and "--notify: a channel is" in err and CANARY not in out + err
    assert not (elsewhere / ".mkl").exists()

    listed.write_bytes(b"https://hooks.example.org/\xff\n")
    code, _, _, err = mkl_cli(team, *START, env=_env(tmp_path))
    assert code == 2 and err.strip() == f"mkl: error: {listed}: is not UTF-8 text"

    code, _, out, err = mkl_cli(team, "notify", "--set", f"ftp://example.org/{CANARY}", env=_env(tmp_path))
    assert code == 2 and "Traceback" not in err and CANARY not in out + err
    assert "--set: a channel is an https:// (or http://) webhook URL or mailto:ADDRESS" in err


def _store_announces_every_run_started_in_it(
    tmp_path: Path, webhook: Webhook, mail: MailServer, store: str, stored_text: Any
) -> None:
    """A store's channel set by Alice announces Bob's run (his own --notify beside it); unset, it announces none."""
    alice, bob = _machine(tmp_path / "alice"), _machine(tmp_path / "bob")
    env = _env(tmp_path, mail)
    outputs = []
    code, line, out, err = mkl_cli(alice, "notify", "--store", store, "--set", webhook.url, env=env)
    outputs += [out, err]
    shown = webhook.url.split("/services/")[0] + "/…"
    assert code == 0 and [item["channel"] for item in line["channels"]] == [shown], err
    digest = line["channels"][0]["digest"]

    bob_env = {**env, "HOME": str(tmp_path / "bob-home")}  # another person: nothing of Alice's machine
    code, line, out, err = mkl_cli(
        bob, *START, "--id", "b1", "--store", store, "--notify", f"mailto:{MAIL_TO}", env=bob_env
    )
    outputs += [out, err]
    assert code == 3, err
    assert f"this run notifies {shown} (from the notify setting of store" in err
    assert sorted(line["notified"]) == sorted([shown, f"mailto:{MAIL_TO}"])
    assert webhook.count() == 1 and webhook.posts[0][2]["run"] == "b1" and mail.count() == 1
    code, line, out, err = mkl_cli(alice, "notify", "--store", store, env=env)  # nothing is due any more
    outputs += [out, err]
    assert code == 0 and line["notified"][0]["sent"] == [] and webhook.count() == 1, err

    code, line, out, err = mkl_cli(alice, "notify", "--store", store, "--list", env=env)
    outputs += [out, err]
    assert code == 0 and line["channels"] == [{"digest": digest, "channel": shown}]
    assert f"{digest} {shown}" in out
    code, line, out, err = mkl_cli(alice, "notify", "--store", store, "--unset", digest, env=env)
    outputs += [out, err]
    assert code == 0 and line["channels"] == [], err
    code, line, out, err = mkl_cli(bob, *START, "--id", "b2", "--store", store, env=bob_env)
    outputs += [out, err]
    assert code == 3 and "notified" not in line and webhook.count() == 1, err

    assert not [output for output in outputs if CANARY in output]
    assert CANARY not in stored_text()  # every journal and runs list of the store


def test_a_stores_channels_announce_every_run_started_in_it_whoever_starts_it(
    tmp_path: Path, webhook: Webhook, mail: MailServer
) -> None:
    store = tmp_path / "shared" / "runs.sqlite"
    _store_announces_every_run_started_in_it(tmp_path, webhook, mail, str(store), lambda: _journal_text(store))
    with sqlite3.connect(store) as db:  # unset, the store keeps nothing of the channel
        assert db.execute("SELECT count(*) FROM settings").fetchone() == (0,)


def test_a_postgresql_stores_channels_announce_every_run_started_in_it(
    tmp_path: Path, webhook: Webhook, mail: MailServer, postgres: Any
) -> None:
    import psycopg

    url = postgres.database()

    def stored_text() -> str:
        with psycopg.connect(url) as connection:
            rows = [*connection.execute("SELECT body FROM mkl_records"), *connection.execute("SELECT * FROM mkl_runs")]
        return "\n".join(str(row) for row in rows)

    _store_announces_every_run_started_in_it(tmp_path, webhook, mail, url, stored_text)


def test_a_notebooks_machine_is_in_the_notebooks_folder_and_announces_on_its_channel_file(
    ip: Any, webhook: Webhook, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A machine defined in a cell is in the notebook's folder (the kernel's working folder): its runs announce on
    that folder's file, said in the cell's output as the run starts."""
    from test_notify import _until

    monkeypatch.setenv("MKL_NOTIFY", "")
    (ip.tmp / "mkl-notify.txt").write_text(webhook.url + "\n", encoding="utf-8")
    ip.define(REFUND)
    ip.run(f"%mkl run refund --script {REFUND_SCRIPT}")  # waits at its escalate gate (a notebook's default)
    _until(lambda: webhook.count() == 1, "the kernel's notification")
    said = capsys.readouterr()
    shown = webhook.url.split("/services/")[0] + "/…"
    assert f"this run notifies {shown} (from {ip.tmp / 'mkl-notify.txt'}, line 1)" in said.err
    assert webhook.posts[0][2]["run"] == "refund"
    assert CANARY not in said.out + said.err + json.dumps([published.data for published in ip.out.published])


def test_a_stores_channels_are_kept_by_every_kind_of_store_and_two_people_adding_at_once_both_add(
    store_at: Any,
) -> None:
    import threading

    from mkl_notebook.app.channel_places import add_to_store, remove_from_store, store_channels
    from mkl_notebook.app.errors import UsageProblem

    first = store_at()
    assert store_channels(first) == []
    hooks = [f"https://hooks.example.org/services/{number}/{CANARY}" for number in range(8)]
    stores = [store_at() for _ in hooks]  # a store each, as separate people have (one for memory)
    threads = [
        threading.Thread(target=add_to_store, args=(store, [hook])) for store, hook in zip(stores, hooks, strict=True)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(placed.channel.given for placed in store_channels(first)) == sorted(hooks)
    if store_at.location is not None:  # opened to be read only, the store lists them as well
        assert len(store_channels(store_at(read_only=True))) == len(hooks)

    with pytest.raises(UsageProblem) as refused:
        remove_from_store(first, [hooks[0], "https://other.example.org/x"])
    assert "https://other.example.org/… is not a channel of store" in str(refused.value)
    assert CANARY not in str(refused.value) and len(store_channels(first)) == len(hooks)  # nothing changed
    digest = store_channels(first)[0].channel.digest
    assert len(remove_from_store(first, [digest])) == len(hooks) - 1
    assert remove_from_store(first, ["all"]) == [] and store_channels(store_at()) == []


def test_mkl_config_lists_the_folders_and_the_stores_channels_redacted_and_writes_nothing(
    ip: Any, webhook: Webhook, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """What a run started here would announce on besides its own is in `%mkl config`: this folder's file's
    channels and the store's, each redacted with where it was given; listing them makes no store."""
    from mkl_notebook.app.channel_places import kept_in_store

    monkeypatch.setenv("MKL_NOTIFY", "")
    store = ip.tmp / ".mkl" / "runs.sqlite"
    (ip.tmp / "mkl-notify.txt").write_text(f"# the team's\n{webhook.url}\n", encoding="utf-8")
    ip.run("%mkl config")
    said = capsys.readouterr().out
    shown = webhook.url.split("/services/")[0] + "/…"
    assert f"notify (mkl-notify.txt here) = {shown} ({ip.tmp / 'mkl-notify.txt'}, line 2)" in said
    assert "notify (the store's) = none\n" in said and not store.exists()  # listing wrote nothing
    kept_in_store(store, add=[f"mailto:{MAIL_TO}"])
    (ip.tmp / "mkl-notify.txt").write_text("ftp://files.example.org/drop\n", encoding="utf-8")
    ip.run("%mkl config")
    said = capsys.readouterr().out
    assert f"notify (the store's) = mailto:{MAIL_TO} (the notify setting of store .mkl/runs.sqlite)" in said
    assert "notify (mkl-notify.txt here) = not read: " in said and "line 1" in said  # said, not a traceback
    assert CANARY not in said
