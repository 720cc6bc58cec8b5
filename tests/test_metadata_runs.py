"""A notebook's runs live in its metadata too (``metadata.mkl.runs``), so Clear All Outputs, nbstripout and
``nbconvert --clear-output`` no longer take them away once a headless resume has written them there.

The copy in metadata is untrusted input like any checkpoint: verified, typed, judged by its signatures; a
damaged or contradicting copy is refused in one line, never passed over.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import nbformat
import pytest

from mkl_notebook.checkpoints import envelope
from mkl_notebook.checkpoints import notebook_file as nbfile
from mkl_notebook.checkpoints.seals import signatures

from support import ROOT, env_without_models, mkl_cli

DATA = ROOT / "notebooks" / "data"
FIRST = "The draft promises a refund. Approve it?"
SECOND = "Send this reply to the customer now?"


def _copy(waiting: Path, folder: Path) -> Path:
    folder.mkdir()
    for source in waiting.parent.iterdir():
        if source.is_file():
            shutil.copy(source, folder / source.name)
    return folder / waiting.name


def _listed(folder: Path, name: str) -> dict[str, Any]:
    code, listing, _out, err = mkl_cli(folder, "runs", name)
    assert code == 0, err
    [listed] = listing["runs"]
    return listed


def _approve(folder: Path, name: str, question: str, *reply: str) -> dict[str, Any]:
    code, status, _, err = mkl_cli(
        folder, "resume", name, "--run", "r", "--question", question, *reply, "--script", "refund.script.yaml"
    )
    assert code in (0, 3), err
    return status


def _strip_with_nbstripout(path: Path) -> None:
    subprocess.run([sys.executable, "-m", "nbstripout", str(path)], check=True, capture_output=True)


def _clear_with_nbconvert(path: Path) -> None:
    command = [sys.executable, "-m", "jupyter", "nbconvert", "--clear-output", "--inplace", str(path)]
    subprocess.run(command, check=True, capture_output=True)


@pytest.mark.parametrize("strip", [_strip_with_nbstripout, _clear_with_nbconvert], ids=["nbstripout", "nbconvert"])
def test_a_stripped_notebook_still_lists_its_runs_and_finishes_them(waiting: Path, tmp_path: Path, strip: Any) -> None:
    path = _copy(waiting, tmp_path / "work")
    folder = path.parent
    first = _listed(folder, path.name)
    assert (first["ask"], first["cell"], first["in_metadata"]) == (FIRST, 3, False)
    assert _approve(folder, path.name, first["question_id"], "--set", "refund_approval=approve")["ask"] == SECOND

    strip(path)
    stripped = nbformat.read(path, as_version=4)
    assert all(not cell.get("outputs") for cell in stripped.cells if cell.cell_type == "code")  # outputs gone
    listed = _listed(folder, path.name)
    assert (listed["ask"], listed["cell"], listed["in_metadata"]) == (SECOND, None, True)
    _code, _, out, _ = mkl_cli(folder, "runs", path.name)
    assert f"r  refund  suspended (escalated) at release (metadata) — asks: {SECOND}" in out
    assert [answer["value"] for answer in listed["answers"]] == ["approve"]  # the audit survived too

    done = _approve(folder, path.name, listed["question_id"], "--reply", "approve")
    assert done["status"] == "done" and done["calls"]["replayed"] >= 3  # nothing made twice
    after = nbformat.read(path, as_version=4)
    nbformat.validate(after)
    header, records, seal = envelope.verify_checkpoint(after.metadata["mkl"]["runs"]["r"])
    assert header["status"] == "done" and seal is None  # each stretch of the history carries its signature
    assert all(stretch.seal is not None and stretch.seal.holds for stretch in signatures(records))
    assert [r["value"] for r in records if r["t"] == "reply"] == ["approve", "approve"]
    assert [cell.source for cell in after.cells] == [cell.source for cell in stripped.cells]


def test_a_metadata_copy_and_an_output_copy_say_the_same_after_a_write_back(waiting: Path, tmp_path: Path) -> None:
    path = _copy(waiting, tmp_path / "work")
    question = _listed(path.parent, path.name)["question_id"]
    _approve(path.parent, path.name, question, "--set", "refund_approval=approve")
    saved = nbformat.read(path, as_version=4)
    [output] = [o for o in saved.cells[2].outputs if envelope.MIME_TYPE in o.get("data", {})]
    assert output["data"][envelope.MIME_TYPE] == saved.metadata["mkl"]["runs"]["r"]  # never contradicting


def test_a_damaged_metadata_copy_is_refused_not_passed_over(waiting: Path, tmp_path: Path) -> None:
    path = _copy(waiting, tmp_path / "work")
    question = _listed(path.parent, path.name)["question_id"]
    _approve(path.parent, path.name, question, "--set", "refund_approval=approve")
    data = json.loads(path.read_text(encoding="utf-8"))
    data["metadata"]["mkl"]["runs"]["r"]["digest"] = "0" * 64
    path.write_text(json.dumps(data), encoding="utf-8")
    before = path.read_bytes()
    code, _status, _, err = mkl_cli(path.parent, "resume", path.name, "--run", "r", "--reply", "approve")
    assert code == 2 and err.count("\n") == 1
    assert "metadata run 'r'" in err and "is not resumed in its place" in err
    assert path.read_bytes() == before
    code, _listing, out, _ = mkl_cli(path.parent, "runs", path.name)
    assert code == 1 and "r  damaged checkpoint in metadata: not used" in out


def test_copies_that_went_different_ways_are_both_kept_and_each_resumes(waiting: Path, tmp_path: Path) -> None:
    """The output says one history, the metadata another (two people's edits merged by git, say): neither is
    dropped. The metadata's keeps the run's id, the output's is listed beside it under an id of its own."""
    path = _copy(waiting, tmp_path / "work")
    question = _listed(path.parent, path.name)["question_id"]
    _approve(path.parent, path.name, question, "--set", "refund_approval=approve")
    other = _copy(waiting, tmp_path / "other")
    _approve(other.parent, other.name, question, "--set", "refund_approval=no, not like this")
    data = json.loads(path.read_text(encoding="utf-8"))
    data["metadata"]["mkl"]["runs"]["r"] = json.loads(other.read_text(encoding="utf-8"))["metadata"]["mkl"]["runs"]["r"]
    path.write_text(json.dumps(data), encoding="utf-8")
    code, listing, out, err = mkl_cli(path.parent, "runs", path.name)
    assert code == 0 and "damaged" not in out, out + err
    listed = {run["run"]: run for run in listing["runs"]}
    [branch] = [run_id for run_id in listed if run_id != "r"]
    assert branch.startswith("r:") and set(listed) == {"r", branch}
    assert [a["value"] for a in listed["r"]["answers"]] == ["no, not like this"]  # the metadata's
    assert [a["value"] for a in listed[branch]["answers"]] == ["approve"]  # the output's, beside it
    assert listed[branch]["ask"] == SECOND  # the approved one waits on its second question
    for run_id in [run_id for run_id, run in listed.items() if run.get("question_id")]:
        code, listing, _, err = mkl_cli(path.parent, "runs", path.name)
        pending = next(run for run in listing["runs"] if run["run"] == run_id)["question_id"]
        code, status, _, err = mkl_cli(
            path.parent, "resume", path.name, "--run", run_id, "--question", pending, "--reply", "approve",
            "--script", "refund.script.yaml",
        )  # fmt: skip
        assert code in (0, 3) and status["run"] == run_id, err
    final = {run.run_id: run for run in nbfile.embedded_runs(path)}
    assert set(final) == {"r", branch}  # the file carries both, each gone on


def test_a_metadata_copy_for_another_run_id_is_refused(waiting: Path, tmp_path: Path) -> None:
    path = _copy(waiting, tmp_path / "work")
    question = _listed(path.parent, path.name)["question_id"]
    _approve(path.parent, path.name, question, "--set", "refund_approval=approve")
    data = json.loads(path.read_text(encoding="utf-8"))
    data["metadata"]["mkl"]["runs"]["payday"] = data["metadata"]["mkl"]["runs"]["r"]
    path.write_text(json.dumps(data), encoding="utf-8")
    embedded, damaged = nbfile.scan(path)
    assert [run.run_id for run in embedded] == ["r"]
    assert [(bad.run_id, bad.where) for bad in damaged] == [("payday", "metadata")]
    assert "holds the checkpoint of run 'r'" in damaged[0].reason


def test_pending_in_a_new_kernel_shows_the_form_of_a_run_only_the_stripped_files_metadata_holds(
    waiting: Path, tmp_path: Path, shell: Any, load_mkl: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mkl_notebook.notebook.forms import QuestionForm

    from support import record_presented

    path = _copy(waiting, tmp_path / "work")
    question = _listed(path.parent, path.name)["question_id"]
    _approve(path.parent, path.name, question, "--set", "refund_approval=approve")
    _strip_with_nbstripout(path)
    shutil.rmtree(path.parent / ".mkl")  # a new machine: no store
    monkeypatch.setenv("JPY_SESSION_NAME", str(path))
    magics = load_mkl(lambda *args, **kwargs: None)
    monkeypatch.chdir(path.parent)
    presented = record_presented(magics, monkeypatch)
    assert shell.run_cell("%mkl pending").success
    [view] = presented
    form = view.current_form
    assert isinstance(form, QuestionForm) and form.pending["ask"] == SECOND
    form.approve.click()  # journaled; the next step needs a model this kernel does not have
    import mkl_notebook

    run = mkl_notebook.get_run("r")
    assert (run.status, run.error) == ("suspended", run.error) and "no model is configured" in str(run.error)
    assert [(answer["value"], answer["via"]) for answer in run.run_result.answers] == [
        ("approve", "notebook-file"),
        ("approve", "form"),
    ]
    run = mkl_notebook.get_run("r", script=str(path.parent / "refund.script.yaml")).resume()
    assert run.status == "done" and run.calls["replayed"] >= 3


# -- the kernel's link to the extension (a real kernel; this test stands where the extension would) --------


class _Kernel:
    """A real ipykernel driven over its channels, as a frontend drives it."""

    def __init__(self, folder: Path, notebook: str = "untitled.ipynb", env: dict[str, str] | None = None) -> None:
        from jupyter_client.manager import KernelManager

        self.manager = KernelManager(kernel_name="python3")
        # as a Jupyter server starts it: it names the notebook's session, so a frontend with the extension may listen
        env = {**env_without_models(), **(env or {}), "JPY_SESSION_NAME": str(folder / notebook)}
        self.manager.start_kernel(cwd=str(folder), env=env)
        self.client = self.manager.client()
        self.client.start_channels()
        self.client.wait_for_ready(timeout=60)

    def execute(self, code: str, *, every: bool = False) -> list[dict[str, Any]]:
        """Run ``code``; every iopub message it caused (with ``every``, also those another message caused before
        it: a comm message's), until the kernel is idle again."""
        msg_id = self.client.execute(code)
        seen: list[dict[str, Any]] = []
        while True:
            message = self.client.get_iopub_msg(timeout=60)
            if message["parent_header"].get("msg_id") != msg_id:
                if every:
                    seen.append(message)
                continue
            seen.append(message)
            if message["msg_type"] == "status" and message["content"]["execution_state"] == "idle":
                reply = self.client.get_shell_msg(timeout=60)
                assert reply["content"]["status"] == "ok", reply["content"]
                return seen

    def load_mkl(self) -> str:
        """``%load_ext mkl_notebook``: the id of the comm it opens to the notebook's extension."""
        loaded = self.execute("%load_ext mkl_notebook")
        [opened] = [m for m in loaded if m["msg_type"] == "comm_open"]
        assert opened["content"]["target_name"] == "mkl.metadata"
        return str(opened["content"]["comm_id"])

    def say(self, comm_id: str, data: dict[str, Any]) -> None:
        self.client.shell_channel.send(self.client.session.msg("comm_msg", {"comm_id": comm_id, "data": data}))

    def close(self) -> None:
        self.client.stop_channels()
        self.manager.shutdown_kernel(now=True)


def test_the_kernel_takes_up_runs_the_metadata_hands_it_and_sends_back_each_checkpoint(
    waiting: Path, tmp_path: Path
) -> None:
    path = _copy(waiting, tmp_path / "alices")
    question = _listed(path.parent, path.name)["question_id"]
    _approve(path.parent, path.name, question, "--set", "refund_approval=approve")
    runs = json.loads(path.read_text(encoding="utf-8"))["metadata"]["mkl"]["runs"]
    elsewhere = tmp_path / "elsewhere"  # another machine: no store, and no file to read
    elsewhere.mkdir()
    kernel = _Kernel(elsewhere)
    try:
        kernel.say(kernel.load_mkl(), {"op": "hello", "runs": runs, "path": "renamed.ipynb"})
        shown = kernel.execute("%mkl pending")
        texts = "".join(str(m["content"].get("data", {}).get("text/plain", "")) for m in shown)
        assert SECOND in texts  # the waiting run, from the metadata alone
        held = kernel.execute("import mkl_notebook; print(len(mkl_notebook.get_run('r').outcome.records))")
        printed = "".join(m["content"].get("text", "") for m in held if m["msg_type"] == "stream")
        assert int(printed) == len(envelope.verify_checkpoint(runs["r"]).records)  # taken up as it was
        sent = [m["content"]["data"] for m in shown if m["msg_type"] == "comm_msg"]
        assert sent == []  # the metadata holds it as it stands: nothing to send back
        answered = kernel.execute("mkl_notebook.get_run('r').submit('approve')")
        sent = [m["content"]["data"] for m in answered if _stored(m)]
        assert {(data["op"], data["run"]) for data in sent} == {("put", "r")}
        header, records, seal = envelope.verify_checkpoint(sent[-1]["envelope"])
        assert header["status"] == "suspended" and seal is None and records[-1]["t"] == "sign"  # (needs a model)
        assert [stretch.seal is not None and stretch.seal.holds for stretch in signatures(records)] == [True] * 3
        assert (
            records[: len(envelope.verify_checkpoint(runs["r"]).records)]
            == envelope.verify_checkpoint(runs["r"]).records
        )  # the history it was handed, and the answer after it
    finally:
        kernel.close()


def _stored(message: dict[str, Any]) -> bool:
    """Whether a kernel's message asks the page to store or remove a run in its metadata (not to redraw an output)."""
    return message["msg_type"] == "comm_msg" and message["content"]["data"].get("op") in ("put", "delete")


def test_a_forged_run_handed_over_by_the_metadata_is_refused_in_one_line(waiting: Path, tmp_path: Path) -> None:
    path = _copy(waiting, tmp_path / "alices")
    question = _listed(path.parent, path.name)["question_id"]
    _approve(path.parent, path.name, question, "--set", "refund_approval=approve")
    forged = json.loads(path.read_text(encoding="utf-8"))["metadata"]["mkl"]["runs"]["r"]
    forged["digest"] = "0" * 64
    kernel = _Kernel(tmp_path)
    try:
        kernel.say(kernel.load_mkl(), {"op": "hello", "runs": {"r": forged}})
        msg_id = kernel.client.execute("import mkl_notebook; mkl_notebook.get_run('r')")
        reply = kernel.client.get_shell_msg(timeout=60)
        while reply["parent_header"].get("msg_id") != msg_id:
            reply = kernel.client.get_shell_msg(timeout=60)
        assert reply["content"]["status"] == "error"
        assert (
            "metadata run 'r'" in reply["content"]["evalue"] and "digest does not match" in reply["content"]["evalue"]
        )
    finally:
        kernel.close()


def test_forget_removes_a_run_from_the_store_and_the_metadata_and_fresh_replaces_its_entry(
    waiting: Path, tmp_path: Path
) -> None:
    kernel = _linked_kernel(waiting, tmp_path / "work")
    try:
        ran = kernel.execute("%mkl run refund --id mine --script refund.script.yaml --set ticket=broken")
        assert [m["content"]["data"]["op"] for m in ran if _stored(m)] == ["put"]
        again = kernel.execute("%mkl run refund --id mine --script refund.script.yaml --set ticket=broken --fresh")
        assert [m["content"]["data"]["op"] for m in again if _stored(m)] == ["delete", "put"]
        forgot = kernel.execute("%mkl forget mine")
        assert [(m["content"]["data"]["op"], m["content"]["data"]["run"]) for m in forgot if _stored(m)] == [
            ("delete", "mine")
        ]
        listed = kernel.execute("%mkl runs")
        assert "mine" not in "".join(str(m["content"].get("data", {}).get("text/plain", "")) for m in listed)
        msg_id = kernel.client.execute("%mkl forget mine")
        reply = kernel.client.get_shell_msg(timeout=60)
        while reply["parent_header"].get("msg_id") != msg_id:
            reply = kernel.client.get_shell_msg(timeout=60)
        assert reply["content"]["status"] == "error" and "no run 'mine'" in reply["content"]["evalue"]
    finally:
        kernel.close()


# -- one copy, not two: with the extension, outputs refer to the metadata's copy ---------------------------


def _as_the_extension_saves_it(path: Path) -> None:
    """The waiting notebook as JupyterLab with the extension saves it: the checkpoint in the metadata, the
    output referring to it."""
    data = json.loads(path.read_text(encoding="utf-8"))
    [output] = [o for o in data["cells"][2]["outputs"] if envelope.MIME_TYPE in o.get("data", {})]
    checkpoint = output["data"].pop(envelope.MIME_TYPE)
    output["data"][envelope.REF_MIME_TYPE] = envelope.reference(checkpoint)
    data["metadata"]["mkl"] = {"runs": {"r": checkpoint}}
    path.write_text(json.dumps(data), encoding="utf-8")


def _carried_and_referred(path: Path) -> tuple[int, list[Any]]:
    outputs = [o for cell in nbformat.read(path, as_version=4).cells for o in cell.get("outputs", [])]
    carried = sum(1 for o in outputs if envelope.MIME_TYPE in o.get("data", {}))
    return carried, [o["data"][envelope.REF_MIME_TYPE] for o in outputs if envelope.REF_MIME_TYPE in o.get("data", {})]


def test_a_notebook_whose_outputs_refer_to_its_metadata_lists_and_finishes_its_runs_keeping_one_copy(
    waiting: Path, tmp_path: Path
) -> None:
    path = _copy(waiting, tmp_path / "work")
    _as_the_extension_saves_it(path)
    listed = _listed(path.parent, path.name)
    assert (listed["ask"], listed["cell"], listed["in_metadata"]) == (FIRST, 3, True)  # shown in cell 3
    _approve(path.parent, path.name, listed["question_id"], "--set", "refund_approval=approve")
    after = nbformat.read(path, as_version=4)
    nbformat.validate(after)
    header, records, _seal = envelope.verify_checkpoint(after.metadata["mkl"]["runs"]["r"])
    assert header["ask"] == SECOND
    # the output still refers (to the whole journal now) and says what the metadata says: no second copy
    assert _carried_and_referred(path) == (0, [{"run": "r", "records": len(records)}])
    assert "(resumes at release)" in "".join(after.cells[2].outputs[-2]["data"]["text/plain"])  # the view too


def test_a_reference_the_metadata_cannot_answer_is_reported_in_one_line(waiting: Path, tmp_path: Path) -> None:
    path = _copy(waiting, tmp_path / "work")
    _as_the_extension_saves_it(path)
    data = json.loads(path.read_text(encoding="utf-8"))
    del data["metadata"]["mkl"]  # a tool that drops notebook metadata, or a hand edit
    path.write_text(json.dumps(data), encoding="utf-8")
    code, _listing, out, _ = mkl_cli(path.parent, "runs", path.name)
    assert code == 1 and "cell 3: shows run 'r', whose checkpoint was kept in the notebook's metadata" in out
    before = path.read_bytes()
    code, _, _, err = mkl_cli(path.parent, "resume", path.name, "--run", "r", "--reply", "approve")
    assert code == 2 and err.count("\n") == 1 and "the metadata no longer holds it" in err
    assert path.read_bytes() == before

    data["cells"][2]["outputs"][-2]["data"][envelope.REF_MIME_TYPE] = {"run": "r", "records": "all"}
    path.write_text(json.dumps(data), encoding="utf-8")
    code, _listing, out, _ = mkl_cli(path.parent, "runs", path.name)
    assert code == 1 and "cell 3: the reference to a run in the notebook's metadata is misshapen" in out


def _linked_kernel(waiting: Path, folder: Path) -> _Kernel:
    """A real kernel in a copy of the waiting notebook's folder, linked to the extension (it said hello with
    no runs) and with the refund machine defined."""
    kernel = _Kernel(_copy(waiting, folder).parent)
    kernel.say(kernel.load_mkl(), {"op": "hello", "runs": {}})
    kernel.execute("%%mkl\n" + (DATA / "refund.mkl").read_text(encoding="utf-8"))
    return kernel


def _display_bundles(messages: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """What JupyterLab's output areas show at the end: the last data sent for each display id."""
    shown: dict[str, dict[str, Any]] = {}
    for message in messages:
        if message["msg_type"] in ("display_data", "update_display_data"):
            display_id = message["content"].get("transient", {}).get("display_id")
            if display_id:
                shown[display_id] = message["content"]["data"]
    return shown


def _run_views(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        data
        for data in _display_bundles(messages).values()
        if envelope.MIME_TYPE in data or envelope.REF_MIME_TYPE in data
    ]


RUN = "%mkl run refund --id mine --script refund.script.yaml --set ticket=broken --no-hitl"


def test_with_the_extension_a_run_output_refers_to_the_metadata_and_an_unchanged_cell_shows_the_same(
    waiting: Path, tmp_path: Path
) -> None:
    kernel = _linked_kernel(waiting, tmp_path / "work")
    try:
        first = kernel.execute(RUN)
        [view] = _run_views(first)
        assert envelope.MIME_TYPE not in view  # one copy ...
        [put] = [m["content"]["data"] for m in first if m["msg_type"] == "comm_msg"]
        checkpoint = envelope.verify_checkpoint(put["envelope"])  # ... in the metadata
        assert view[envelope.REF_MIME_TYPE] == {"run": "mine", "records": len(checkpoint.records)}
        assert checkpoint.header["status"] == "done"

        again = kernel.execute(RUN)  # the same cell, unchanged: replayed
        assert _run_views(again) == [view]
        # the checkpoint is the same byte for byte, so the metadata, which holds it already, is not sent it again
        assert [m["content"]["data"] for m in again if m["msg_type"] == "comm_msg"] == []
    finally:
        kernel.close()


def test_outputs_drawn_before_the_extension_answered_are_redrawn_without_their_checkpoint(
    waiting: Path, tmp_path: Path
) -> None:
    """Run All queues every cell ahead of the extension's answer: the first outputs carry the checkpoint, and
    lose it once the extension has answered, so the saved file holds one copy."""
    folder = _copy(waiting, tmp_path / "work").parent
    kernel = _Kernel(folder)
    try:
        comm_id = kernel.load_mkl()
        kernel.execute("%%mkl\n" + (DATA / "refund.mkl").read_text(encoding="utf-8"))
        ran = kernel.execute(RUN)
        [view] = _run_views(ran)
        assert envelope.MIME_TYPE in view  # nobody has answered yet: the output carries the checkpoint
        [display_id] = [d for d, data in _display_bundles(ran).items() if data is view]

        kernel.say(comm_id, {"op": "hello", "runs": {}})
        deadline = time.monotonic() + 60
        redrawn = None
        while redrawn is None:
            assert time.monotonic() < deadline, "the view was not redrawn"
            message = kernel.client.get_iopub_msg(timeout=60)
            content = message["content"]
            if message["msg_type"] == "update_display_data" and content["transient"]["display_id"] == display_id:
                redrawn = content["data"]
        assert envelope.MIME_TYPE not in redrawn
        assert redrawn[envelope.REF_MIME_TYPE]["run"] == "mine"
        assert {k: v for k, v in redrawn.items() if k != envelope.REF_MIME_TYPE} == {
            k: v for k, v in view.items() if k != envelope.MIME_TYPE
        }
    finally:
        kernel.close()


def test_a_run_made_from_python_is_kept_in_the_metadata_like_one_a_magic_shows(waiting: Path, tmp_path: Path) -> None:
    """``mkl_notebook.run()`` and ``submit`` display nothing, yet the notebook's metadata keeps the run as it
    stands after each (issue 37): a new kernel with the file takes it up as a `%mkl run` one."""
    kernel = _linked_kernel(waiting, tmp_path / "work")
    try:
        started = kernel.execute(
            "import mkl_notebook\n"
            "api = mkl_notebook.run('refund', id='api', input={'ticket': 'broken'}, script='refund.script.yaml')"
        )
        puts = [m["content"]["data"] for m in started if _stored(m)]
        assert [(data["op"], data["run"]) for data in puts][-1:] == [("put", "api")]
        header, _, _ = envelope.verify_checkpoint(puts[-1]["envelope"])
        assert (header["status"], header["at"]) == ("suspended", "confirm")
        answered = kernel.execute("api.submit('approve')\nprint(api.status)")  # nothing displays the run
        puts = [m["content"]["data"] for m in answered if _stored(m)]
        assert puts and {(data["op"], data["run"]) for data in puts} == {("put", "api")}
        header, _, _ = envelope.verify_checkpoint(puts[-1]["envelope"])
        assert (header["status"], header["at"]) == ("suspended", "release")  # the second question, as it stands
    finally:
        kernel.close()
