"""Nothing a file carries is ever overwritten: someone else's runs stay in the notebook's metadata byte for byte,
whatever a person who does not trust them runs, answers or saves; their own runs sit beside them.

A real kernel in Bob's folder (his own Jupyter data folder: Alice's key is unknown to him), driven as JupyterLab
with the mkl-notebook extension drives it: Run All queues the cells ahead of the extension's hello, which hands
over the runs Alice's notebook holds in its metadata; every checkpoint the kernel puts is what the extension
would write into the metadata.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import nbformat
from lab_client import run_all
from test_metadata_runs import _Kernel

from mkl_notebook.checkpoints import notebook_file as nbfile

from support import mkl_cli, refund_notebook


def _alices_notebook(folder: Path) -> dict[str, Any]:
    """Alice's notebook of two waiting runs, as her JupyterLab saves it (the runs in its metadata): its runs."""
    folder.mkdir()
    path = folder / "shared.ipynb"
    refund_notebook(path, {"run-a": "Parcel A-1 arrived broken", "run-b": "Parcel B-2 never came"})
    env = {"JUPYTER_DATA_DIR": str(folder / "alice-jupyter")}
    ran = run_all(path, env=env)
    runs = {run.run_id: run.raw for run in nbfile.embedded_runs(path)}
    ran.metadata["mkl"] = {"runs": runs}
    nbformat.write(ran, path)
    return runs


def _puts(messages: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """Each checkpoint the kernel sent the extension: the metadata key it goes under and the run it is of."""
    sent = [m["content"]["data"] for m in messages if m["msg_type"] == "comm_msg"]
    return [(data["run"], str(data["envelope"]["run_id"])) for data in sent if data.get("op") == "put"]


def test_a_run_all_by_someone_who_does_not_trust_the_files_runs_never_puts_over_them(tmp_path: Path) -> None:
    alices = _alices_notebook(tmp_path / "alice")
    bobs = tmp_path / "bob"
    bobs.mkdir()
    shutil.copy(tmp_path / "alice" / "shared.ipynb", bobs / "shared.ipynb")
    shutil.copy(tmp_path / "alice" / "refund.script.yaml", bobs / "refund.script.yaml")
    source = nbformat.read(bobs / "shared.ipynb", as_version=4)
    cells = [cell.source for cell in source.cells]
    kernel = _Kernel(bobs, "shared.ipynb", {"JUPYTER_DATA_DIR": str(bobs / "bob-jupyter")})
    try:
        comm = kernel.load_mkl()
        seen: list[dict[str, Any]] = []
        seen += kernel.execute(cells[1])  # the machine
        seen += kernel.execute(cells[2])  # run-a, before the extension said hello: Run All queued it ahead
        kernel.say(comm, {"op": "hello", "runs": alices})
        seen += kernel.execute(cells[3], every=True)  # run-b, after (and what the hello made the kernel send)
        mine = sorted({key for key, _ in _puts(seen)} - set(alices))
        seen += kernel.execute(  # Bob answers his own run-a (as a form's click would)
            f"import mkl_notebook.notebook.session as s\ns.current_session().runs[{mine[0]!r}].submit('approve')"
        )
        assert any(key == mine[0] for key, _ in _puts(seen[-20:])), "his answer was not kept"
    finally:
        kernel.close()
    put = _puts(seen)
    assert put, "the kernel kept none of Bob's own runs in the metadata"
    assert all(key == run for key, run in put), put  # each checkpoint under its own run's id
    assert not {key for key, _ in put} & set(alices), put  # none over Alice's, which stay as her file has them
    assert all(key.startswith(("run-a:", "run-b:")) for key, _ in put), put  # his own runs, beside hers
    on_disk = {run.run_id: run.raw for run in nbfile.embedded_runs(bobs / "shared.ipynb")}
    assert json.dumps(alices) == json.dumps(on_disk)  # (the kernel only read the file)


def test_asking_for_the_files_run_means_it_again_once_its_signer_is_trusted(tmp_path: Path) -> None:
    """While Bob does not trust Alice, asking his kernel for run-a means the run of his own made in its place; once
    he trusts her key (the kernel still running), it means her run again, taken up from the file: nothing decided
    is kept across a change of trust."""
    _alices_notebook(tmp_path / "alice")
    bobs = tmp_path / "bob"
    bobs.mkdir()
    shutil.copy(tmp_path / "alice" / "shared.ipynb", bobs / "shared.ipynb")
    shutil.copy(tmp_path / "alice" / "refund.script.yaml", bobs / "refund.script.yaml")
    cells = [cell.source for cell in nbformat.read(bobs / "shared.ipynb", as_version=4).cells]
    bob = {"JUPYTER_DATA_DIR": str(bobs / "bob-jupyter")}
    ask = "import mkl_notebook\nrun = mkl_notebook.get_run('run-a')\nprint(run.id, run.status)"
    kernel = _Kernel(bobs, "shared.ipynb", bob)
    try:
        kernel.load_mkl()
        for source in cells[1:3]:
            kernel.execute(source)
        before = _printed(kernel.execute(ask))
        assert before.startswith("run-a:") and before.endswith(" suspended"), before  # his own, in its place
        alice = mkl_cli(
            tmp_path / "alice", "trust", env={"JUPYTER_DATA_DIR": str(tmp_path / "alice" / "alice-jupyter")}
        )
        key = alice[2].split()[6]
        code, _, _, err = mkl_cli(bobs, "trust", key, "--name", "alice", env=bob)
        assert code == 0, err
        assert _printed(kernel.execute(ask)) == "run-a suspended"  # hers, now that he trusts her
    finally:
        kernel.close()


def _printed(messages: list[dict[str, Any]]) -> str:
    return "".join(m["content"].get("text", "") for m in messages if m["msg_type"] == "stream").strip()
