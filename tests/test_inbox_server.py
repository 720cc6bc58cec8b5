"""The inbox panel's server side, in a real Jupyter server: the questions waiting under its folder, and answering
one with no kernel for its notebook (the run goes on, its file says so, the row leaves); a late or misdirected
answer is refused in one line and journals nothing."""

from __future__ import annotations

import json
import shutil
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from browser_support import checkout_extension, lab_env, serve
from lab_client import run_all

from mkl_notebook.app.replies import os_account

from support import mkl_cli, refund_notebook

ME = os_account() or "nobody"


@pytest.fixture(scope="module")
def desk(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """A Jupyter server over a folder whose notebook (closed: no kernel) holds two runs waiting for approval."""
    root = tmp_path_factory.mktemp("desk")
    folder = root / "served"
    (folder / "team").mkdir(parents=True)
    refund_notebook(folder / "team" / "desk.ipynb", {"r1": "Parcel R-1 broke", "r2": "Parcel R-2 is late"})
    run_all(folder / "team" / "desk.ipynb")
    shutil.copy(folder / "team" / "desk.ipynb", root / "outside.ipynb")  # a real notebook, out of the server's reach
    env = lab_env(root / "lab")
    checkout_extension(env)
    with serve(folder, env, root / "server.log", app=("jupyter", "server")) as base:
        yield base, folder


def _get(base: str, path: str) -> Any:
    with urllib.request.urlopen(f"{base}{path}", timeout=60) as response:
        return json.loads(response.read())


def _post(base: str, path: str, body: Any) -> tuple[int, Any]:
    data = json.dumps(body).encode()
    request = urllib.request.Request(f"{base}{path}", data=data, method="POST")
    request.add_header("Content-Type", "application/json")
    # As a page's request carries it (JupyterLab's ServerConnection): the cross-site check's cookie, said again.
    request.add_header("Cookie", "_xsrf=inbox-test")
    request.add_header("X-XSRFToken", "inbox-test")
    try:
        with urllib.request.urlopen(request, timeout=120) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"{}")


def _kept_at(row: dict[str, Any]) -> dict[str, Any]:
    """Where an answer to ``row`` says its run is kept: the notebook, or the store, the row names."""
    return {"file": row["file"]} if row["file"] is not None else {"store": row["store"]}


def test_the_server_lists_waiting_questions_and_an_answer_continues_the_run_where_it_is_kept(
    desk: tuple[str, Path],
) -> None:
    base, folder = desk
    rows = _get(base, "/mkl/inbox")["rows"]
    assert sorted(row["run"] for row in rows) == ["r1", "r2"]
    r1 = next(row for row in rows if row["run"] == "r1")
    # Kept by the notebook and by the store its kernel kept beside it: one history, one row, both places named
    # relative to the server's folder (as the page opens files and names them back).
    places = {r1["file"] or r1["store"], *(place.split(",")[0] for place in r1["also_in"])}
    assert places == {"team/desk.ipynb", "team/.mkl/runs.sqlite"}, r1
    assert r1["ask"].startswith("The draft promises a refund") and "order A-1001" in r1["about"]
    assert r1["may_answer"] is True
    answer = {"run": "r1", "question": r1["question_id"], "reply": "approve", "note": "fine", **_kept_at(r1)}
    status, done = _post(base, "/mkl/inbox/answer", answer)
    assert status == 200, done
    # The run went on (its scripted answers, as the command continuing it names them) to its next question.
    assert (done["status"], done["at"], done["ask"]) == ("suspended", "release", "Send this reply to the customer now?")
    now = {row["run"]: row for row in _get(base, "/mkl/inbox")["rows"]}
    assert sorted(now) == ["r1", "r2"] and now["r1"]["question_id"] != r1["question_id"]  # the row asks anew
    assert now["r1"]["ask"] == "Send this reply to the customer now?"
    # Where it was answered says so: answered by this account through the inbox, with the note.
    where = ["desk.ipynb"] if r1["file"] is not None else []
    code, _, out, err = mkl_cli(folder / "team", "audit", *where, "--json")
    assert code == 0, err
    [given] = [row for row in json.loads(out.strip().splitlines()[-1]) if row["run"] == "r1"]
    assert (given["by"], given["via"], given["note"]) == (ME, "inbox", "fine"), given
    # The same question again: it is no longer asked, so nothing is journaled and the page is told why.
    status, said = _post(base, "/mkl/inbox/answer", {**answer, "reply": "reject"})
    assert status == 409 and "answered" in said["message"], said


@pytest.mark.parametrize(
    ("change", "said"),
    [
        ({"file": "../outside.ipynb"}, "not a notebook inside the server's folder"),
        ({"file": str(Path("..") / "served" / ".." / "outside.ipynb")}, "not a notebook inside the server's folder"),
        ({"file": None, "store": "/etc/passwd"}, "not a store in reach"),
        ({"reply": ""}, "names its run, its question and a reply"),
        ({"extra": 1}, "has no field 'extra'"),
    ],
)
def test_an_answer_that_names_no_question_in_reach_is_refused_in_one_line(
    desk: tuple[str, Path], change: dict[str, Any], said: str
) -> None:
    base, _ = desk
    [r2] = [row for row in _get(base, "/mkl/inbox")["rows"] if row["run"] == "r2"]
    answer = {"run": "r2", "question": r2["question_id"], "reply": "approve", "file": "team/desk.ipynb", **change}
    status, body = _post(base, "/mkl/inbox/answer", answer)
    assert status in (400, 409), body
    message = body.get("message", "")
    assert said in message and "\n" not in message and "Traceback" not in message, body
    assert any(row["run"] == "r2" for row in _get(base, "/mkl/inbox")["rows"])  # still waiting


def test_the_server_decides_a_question_past_its_deadline_with_no_tick_and_no_kernel(tmp_path: Path) -> None:
    """Deadlines fire from whichever runs first: here the Jupyter server, on its own, every MKL_TICK_SECONDS."""
    import time

    from support import EXAMPLES, REFUND_SCRIPT

    folder = tmp_path / "served" / "ops"
    folder.mkdir(parents=True)
    code, status, _, err = mkl_cli(
        folder, "run", str(EXAMPLES / "refund.mkl"), "--id", "late", "--hitl", "--script", str(REFUND_SCRIPT),
        "--deadline", "1s", "--on-timeout", "reject",
    )  # fmt: skip
    assert code == 3 and status["status"] == "suspended", err
    env = lab_env(tmp_path / "lab")
    checkout_extension(env)
    env["MKL_TICK_SECONDS"] = "0.5"
    with serve(tmp_path / "served", env, tmp_path / "server.log", app=("jupyter", "server")) as base:
        deadline = time.monotonic() + 90
        while any(row["run"] == "late" for row in _get(base, "/mkl/inbox")["rows"]):
            assert time.monotonic() < deadline, (tmp_path / "server.log").read_text()[-2000:]
            time.sleep(0.2)
    code, _, out, err = mkl_cli(folder, "audit", "--json")
    assert code == 0, err
    [decided] = [row for row in json.loads(out.strip().splitlines()[-1]) if row["run"] == "late"]
    assert decided["decided_by"] == "policy" and decided["value"] == "reject", decided
    assert "decided by policy (deadline 1s" in (tmp_path / "server.log").read_text()


def test_the_server_sends_a_questions_reminder_once_with_no_cron(tmp_path: Path) -> None:
    """Reminders go from whichever runs first too: here the Jupyter server's look every MKL_TICK_SECONDS."""
    import time

    from test_notify import Webhook

    from support import EXAMPLES, REFUND_SCRIPT

    folder = tmp_path / "served" / "ops"
    folder.mkdir(parents=True)
    webhook = Webhook()
    try:
        code, _, _, err = mkl_cli(
            folder, "run", str(EXAMPLES / "refund.mkl"), "--id", "slow", "--hitl", "--script", str(REFUND_SCRIPT),
            "--notify", webhook.url, "--remind-after", "1s",
        )  # fmt: skip
        assert code == 3 and webhook.count() == 1, err  # the question, announced by the command that asked it
        env = lab_env(tmp_path / "lab")
        checkout_extension(env)
        env["MKL_TICK_SECONDS"] = "0.5"
        with serve(tmp_path / "served", env, tmp_path / "server.log", app=("jupyter", "server")):
            deadline = time.monotonic() + 90
            while webhook.count() < 2:
                assert time.monotonic() < deadline, (tmp_path / "server.log").read_text()[-2000:]
                time.sleep(0.2)
            _, _, body = webhook.posts[1]
            assert body["reminder"] is True and body["text"].startswith("Reminder, still waiting: mkl run slow")
            settled = time.monotonic() + 3  # a few more looks of the server: the reminder is not sent again
            while time.monotonic() < settled:
                assert webhook.count() == 2
                time.sleep(0.5)
    finally:
        webhook.close()
