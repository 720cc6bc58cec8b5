"""A kernel that waits for a person wakes when another process answers: Alice's run waits in her kernel, someone
answers it from a terminal on the same store, and her cell redraws what was answered, by whom and how, with no
click and no cell executed in her kernel. On SQLite the kernel looks at the store's file; on PostgreSQL the
server tells it (NOTIFY), and nothing else would: a store on a server is never looked at again and again."""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from support import REFUND_SCRIPT, env_without_models

ROOT = Path(__file__).resolve().parent.parent
STARTING = ("--script", "refund.script.yaml", "--set", "ticket=broken")


def _execute(client: Any, code: str) -> list[dict[str, Any]]:
    """Execute ``code`` in the kernel as a cell would be; the messages it published, to idle."""
    published: list[dict[str, Any]] = []
    reply = client.execute_interactive(code, output_hook=published.append, timeout=120)
    assert reply["content"]["status"] == "ok", reply["content"]
    return published


def _printed(messages: list[dict[str, Any]]) -> str:
    return "".join(m["content"]["text"] for m in messages if m["msg_type"] == "stream")


def _answered_elsewhere_redraws(
    alice: Path, bob: Path, store: str | None, *, only_reads: bool = False, scripted: bool = True
) -> None:
    """Alice's kernel (in ``alice``) waits on a refund run in ``store`` (None: her folder's SQLite file); ``mkl
    resume`` in ``bob`` answers it (with the scripted answers the run goes on with, unless not ``scripted``: then
    the answer alone is journaled, and the run waits for a model there); her cell must redraw the answer with
    nothing executed in her kernel, and the run must be done. ``only_reads``: the run was started from a
    terminal, and her kernel only lists it (``%mkl pending``), never opening the store to write."""
    from jupyter_client.manager import KernelManager

    for folder in (alice, bob):
        folder.mkdir(exist_ok=True)
        shutil.copy(ROOT / "examples" / "refund.mkl", folder / "refund.mkl")
        shutil.copy(REFUND_SCRIPT, folder / "refund.script.yaml")
    manager = KernelManager(kernel_name="python3")
    manager.start_kernel(cwd=str(alice), env=env_without_models())
    client = manager.client()
    client.start_channels()
    try:
        client.wait_for_ready(timeout=120)
        _execute(client, "%load_ext mkl_notebook\n%mkl load refund.mkl")
        if store is not None:
            _execute(client, f"%mkl config store={store}")
        if only_reads:
            started = subprocess.run(
                [sys.executable, "-m", "mkl_notebook.cli", "run", "refund.mkl", "--id", "r", "--hitl", *STARTING],
                cwd=alice,
                env=env_without_models(),
                capture_output=True,
                text=True,
                check=False,
            )
            assert started.returncode == 3, started.stdout + started.stderr
        shown = _execute(
            client,
            "%mkl pending" if only_reads else "%mkl run refund --id r --script refund.script.yaml --set ticket=broken",
        )
        assert any(m["msg_type"] == "display_data" for m in shown)
        question = _printed(_execute(client, "import mkl_notebook\nprint(mkl_notebook.get_run('r').question_id)"))
        answering = ["--id", "r", *(["--script", "refund.script.yaml"] if scripted else [])]
        answering += ["--question", question.strip(), "--reply", "approve"]
        answering += ["--store", store] if store is not None else []
        answered = subprocess.run(
            [sys.executable, "-m", "mkl_notebook.cli", "resume", *answering],
            cwd=bob,
            env=env_without_models(),
            capture_output=True,
            text=True,
            check=False,
        )
        assert answered.returncode == (0 if scripted else 3), answered.stdout + answered.stderr

        redrawn: list[str] = []
        deadline = time.monotonic() + 60
        while not any("approve" in text and "via cli" in text for text in redrawn):  # nothing executed meanwhile
            assert time.monotonic() < deadline, f"the kernel's cell was not redrawn: {redrawn}"
            try:
                message = client.get_iopub_msg(timeout=1)
            except Exception:  # (queue.Empty: nothing published this second)
                continue
            if message["msg_type"] == "update_display_data":
                redrawn.append(str(message["content"]["data"].get("text/plain", "")))
        deadline = time.monotonic() + 60
        while True:  # polled: the kernel goes on with the run between cells, where it waits
            status = _printed(_execute(client, "print(mkl_notebook.get_run('r').status)")).strip()
            if status == "done":
                break
            assert time.monotonic() < deadline, f"the run did not go on in the kernel where it waits: {status}"
    finally:
        client.stop_channels()
        manager.shutdown_kernel(now=True)


def test_a_waiting_kernel_redraws_a_question_a_terminal_answered_with_no_click(tmp_path: Path) -> None:
    _answered_elsewhere_redraws(tmp_path, tmp_path, None)


def test_a_kernel_that_only_lists_a_waiting_run_redraws_it_when_a_terminal_answers(tmp_path: Path) -> None:
    """Listing writes nothing, so the kernel never opens its store to write: it is looked at read-only all the
    same."""
    _answered_elsewhere_redraws(tmp_path, tmp_path, None, only_reads=True)


def test_a_waiting_kernel_on_a_postgresql_store_redraws_an_answer_given_from_another_folder(
    postgres: Any, tmp_path: Path
) -> None:
    # Bob's folder shares no file with Alice's: only the server carries the answer, and its NOTIFY the news.
    _answered_elsewhere_redraws(tmp_path / "alice", tmp_path / "bob", postgres.database())


def test_a_waiting_kernel_goes_on_with_a_run_answered_where_no_model_could_go_on_with_it(tmp_path: Path) -> None:
    """A colleague's server on a hub (or a terminal) with no model journals the answer and stops for want of one:
    the run goes on in the kernel where it waits, with the scripted answers it was started with."""
    _answered_elsewhere_redraws(tmp_path, tmp_path, None, scripted=False)


def test_a_waiting_kernel_on_postgresql_goes_on_with_a_run_answered_where_no_model_could(
    postgres: Any, tmp_path: Path
) -> None:
    _answered_elsewhere_redraws(tmp_path / "alice", tmp_path / "bob", postgres.database(), scripted=False)


def test_a_form_whose_question_a_terminal_answered_asks_the_next_question_with_no_click(tmp_path: Path) -> None:
    """Alice's run cell asks gate A; a terminal answers it and the run goes on to gate B there: her cell, with
    nothing executed in her kernel, asks gate B in a live form where gate A was asked (not only a line saying
    the run went on elsewhere), as it would had she clicked."""
    import json

    from jupyter_client.manager import KernelManager
    from test_one_history import GATE_B, SCRIPT, TWO_GATES

    (tmp_path / "twogates.mkl").write_text(TWO_GATES, encoding="utf-8")
    (tmp_path / "twogates.script.json").write_text(json.dumps(SCRIPT), encoding="utf-8")
    manager = KernelManager(kernel_name="python3")
    manager.start_kernel(cwd=str(tmp_path), env=env_without_models())
    client = manager.client()
    client.start_channels()
    try:
        client.wait_for_ready(timeout=120)
        _execute(client, "%load_ext mkl_notebook\n%mkl load twogates.mkl")
        _execute(client, "%mkl run twogates --id r --hitl --script twogates.script.json")
        question = _printed(_execute(client, "import mkl_notebook\nprint(mkl_notebook.get_run('r').question_id)"))
        answering = ["--id", "r", "--script", "twogates.script.json", "--question", question.strip()]
        answered = subprocess.run(
            [sys.executable, "-m", "mkl_notebook.cli", "resume", *answering, "--reply", "approve"],
            cwd=tmp_path,
            env=env_without_models(),
            capture_output=True,
            text=True,
            check=False,
        )
        assert answered.returncode == 3, answered.stdout + answered.stderr  # (it waits at gate B)

        asked: list[str] = []
        form_redrawn = False
        deadline = time.monotonic() + 60
        while not (any(GATE_B in text for text in asked) and form_redrawn):  # nothing executed meanwhile
            assert time.monotonic() < deadline, f"the cell did not ask the next question: {asked}"
            try:
                message = client.get_iopub_msg(timeout=1)
            except Exception:  # (queue.Empty: nothing published this second)
                continue
            if message["msg_type"] == "update_display_data":
                data = message["content"]["data"]
                asked.append(str(data.get("text/plain", "")))
                form_redrawn |= "application/vnd.jupyter.widget-view+json" in data
    finally:
        client.stop_channels()
        manager.shutdown_kernel(now=True)


def test_a_run_another_process_is_still_advancing_is_not_caught_up_half_way(tmp_path: Path) -> None:
    """The watch may look while another process is advancing the run, its journal holding the reply and not yet
    what followed (a model's call takes seconds): the handle stays on the question it shows, and catches up to
    the next one once that process has written it. A view never draws the run as cut off half way."""
    import json
    import sqlite3

    from test_one_history import GATE_A, GATE_B, SCRIPT, TWO_GATES

    from mkl_notebook.app.settings import Settings
    from mkl_notebook.app.workspace import Workspace

    (tmp_path / "twogates.script.json").write_text(json.dumps(SCRIPT), encoding="utf-8")
    store = tmp_path / "runs.sqlite"
    workspace = Workspace(Settings(store=str(store)))
    workspace.shelf.define(TWO_GATES)
    handle = workspace.start("twogates", id="r", hitl="all", script=SCRIPT)
    assert handle.pending is not None and handle.pending["ask"] == GATE_A
    mkl = [sys.executable, "-m", "mkl_notebook.cli", "resume", "--id", "r", "--store", str(store)]
    mkl += ["--script", "twogates.script.json"]
    answered = subprocess.run(
        [*mkl, "--question", str(handle.question_id), "--reply", "approve"],
        cwd=tmp_path,
        env=env_without_models(),
        capture_output=True,
        text=True,
        check=False,
    )
    assert answered.returncode == 3, answered.stdout + answered.stderr
    with sqlite3.connect(store) as db:  # as the journal stood while that process was calling its model
        records = db.execute("SELECT seq, body FROM records WHERE run_id = 'r'").fetchall()
        [reply] = [seq for seq, body in records if json.loads(body).get("t") == "reply"]
        db.execute("DELETE FROM records WHERE run_id = 'r' AND seq > ?", (reply,))

    assert handle.catch_up() is False
    assert handle.pending is not None and handle.pending["ask"] == GATE_A

    gone_on = subprocess.run(mkl, cwd=tmp_path, env=env_without_models(), capture_output=True, text=True, check=False)
    assert gone_on.returncode == 3, gone_on.stdout + gone_on.stderr
    assert handle.catch_up() is True
    assert handle.pending is not None and handle.pending["ask"] == GATE_B


def test_a_queue_with_no_model_says_a_run_answered_elsewhere_went_on_and_does_not_take_it_for_its_own(
    tmp_path: Path,
) -> None:
    """Carol's review queue shows Alice's question; Bob answers it where no model is, and the run waits for one
    (Alice's kernel goes on with it, not Carol's): Carol's cell says the run went on, and never that it left the
    run needing a model, which it did not."""
    from jupyter_client.manager import KernelManager

    store = tmp_path / "runs.sqlite"
    for folder in ("alice", "carol", "bob"):
        (tmp_path / folder).mkdir()
    shutil.copy(ROOT / "examples" / "refund.mkl", tmp_path / "alice" / "refund.mkl")
    shutil.copy(REFUND_SCRIPT, tmp_path / "alice" / "refund.script.yaml")
    mkl = [sys.executable, "-m", "mkl_notebook.cli"]
    starting = ["run", "refund.mkl", "--id", "r", "--hitl", "--store", str(store), "--script", "refund.script.yaml"]
    started = subprocess.run(
        [*mkl, *starting, "--set", "ticket=broken"],
        cwd=tmp_path / "alice",
        env=env_without_models(),
        capture_output=True,
        text=True,
        check=False,
    )
    assert started.returncode == 3, started.stdout + started.stderr
    question = started.stdout.strip().splitlines()[-1].split('"question_id": "')[1].split('"')[0]
    manager = KernelManager(kernel_name="python3")
    manager.start_kernel(cwd=str(tmp_path / "carol"), env=env_without_models())
    client = manager.client()
    client.start_channels()
    try:
        client.wait_for_ready(timeout=120)
        _execute(client, f"%load_ext mkl_notebook\n%mkl config store={store}")
        shown = _execute(client, "%mkl pending")
        assert any(m["msg_type"] == "display_data" for m in shown)
        answered = subprocess.run(
            [*mkl, "resume", "--id", "r", "--store", str(store), "--question", question, "--reply", "approve"],
            cwd=tmp_path / "bob",
            env=env_without_models(),
            capture_output=True,
            text=True,
            check=False,
        )
        assert answered.returncode == 3, answered.stdout + answered.stderr  # (it waits for a model)

        redrawn: list[str] = []
        deadline = time.monotonic() + 60
        while not any("The run went on after this cell" in text for text in redrawn):
            assert time.monotonic() < deadline, f"the queue's cell did not say the run went on: {redrawn}"
            try:
                message = client.get_iopub_msg(timeout=1)
            except Exception:  # (queue.Empty: nothing published this second)
                continue
            if message["msg_type"] == "update_display_data":
                redrawn.append(str(message["content"]["data"].get("text/plain", "")))
        assert not any("left the run needing a model" in text for text in redrawn), redrawn
    finally:
        client.stop_channels()
        manager.shutdown_kernel(now=True)
