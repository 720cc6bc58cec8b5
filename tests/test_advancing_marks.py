"""A run a notebook file holds is advanced by one store at a time, whichever road reaches it: a payment behind an
approval is made once when a kernel and ``mkl resume`` (or two kernels) answer the same question from one file.

The file says in which store a run is being advanced, with one mark read by one rule: ``mkl resume NOTEBOOK``
keeps it in the file itself, and a kernel, which never writes the notebook (its front end saves it), beside the
file until the file is saved with what it did. Every road honours the marks under the file's lock. Real
components: kernels driven by nbclient as JupyterLab drives them, the ``mkl`` command in subprocesses, SQLite
stores, a ledger file the payment tool writes.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import nbformat
from lab_client import LabClient, run_all

from mkl_notebook.checkpoints import notebook_file as nbfile
from mkl_notebook.checkpoints.marks import set_side_mark, side_marks
from mkl_notebook.checkpoints.notebook_disk import NotebookFileError, locked
from mkl_notebook.durable.reading import run_state

from support import env_without_models

PAY = """\
machine: pay
entry: quote
budget: 5
states:
  quote:
    structure: an amount
    prompt: "quote the amount"
    output: amount
    gates:
      - { when: otherwise, escalate: true, to: pay, ask: "Pay the quoted amount?", reply_to: approval }
  pay:
    tool: charge
    idempotent: false
    input: { amount: "{{amount}}" }
    output: receipt
    gates:
      - { when: otherwise, then: ok, to: END }
"""
# The payment tool: one ledger line per payment made. HOLD makes it wait, after paying, until that file
# exists; KILL makes it kill its own process right after paying (a resume stopped before its write-back).
TOOLS = """import os
import signal
import time

import mkl_notebook


@mkl_notebook.tool
def charge(amount):
    with open(os.environ["LEDGER"], "a", encoding="utf-8") as ledger:
        ledger.write(f"{amount}\\n")
    if os.environ.get("KILL"):
        os.kill(os.getpid(), signal.SIGKILL)
    while os.environ.get("HOLD") and not os.path.exists(os.environ["HOLD"]):
        time.sleep(0.05)
    return f"RCPT-{amount}"
"""
APPROVE = """import os
if os.environ.get("APPROVE"):
    r.submit("approve", question=r.question_id)
print(r.status)
r"""  # the run as it stands, shown (and carried) in this cell's output


def _folder(tmp_path: Path) -> Path:
    """A notebook whose run P waits for approval before its payment, saved by a first Run All (store A)."""
    (tmp_path / "pay.script.yaml").write_text("llm:\n  produce: {quote: '42'}\n", encoding="utf-8")
    (tmp_path / "tools.py").write_text(TOOLS, encoding="utf-8")
    cells = [
        nbformat.v4.new_code_cell("%load_ext mkl_notebook\nimport os\nSTORE = os.environ['STORE']"),
        nbformat.v4.new_code_cell("%mkl config store=$STORE"),
        nbformat.v4.new_code_cell(TOOLS),
        nbformat.v4.new_code_cell("%%mkl\n" + PAY),
        nbformat.v4.new_code_cell("r = %mkl run pay --id P --script pay.script.yaml"),
        nbformat.v4.new_code_cell(APPROVE),
    ]
    nbformat.write(nbformat.v4.new_notebook(cells=cells), tmp_path / "pay.ipynb")
    _kernel(tmp_path, "a")
    return tmp_path


def _env(folder: Path, store: str, **more: str) -> dict[str, str]:
    return {"STORE": str(folder / store / "runs.sqlite"), "LEDGER": str(folder / "ledger.txt"), **more}


class Kernel:
    """Restart & Run All in a kernel whose store is ``folder/store``: ``shown`` is the last cell's text (the run's
    status, or the error its answer met). ``save`` False leaves the notebook unsaved, as a front end not saved
    yet does; :meth:`save` saves it later."""

    def __init__(self, folder: Path, store: str, *, save: bool = True, **more: str) -> None:
        self.path = folder / "pay.ipynb"
        if save:
            self.nb = run_all(self.path, allow_errors=True, env=_env(folder, store, **more))
        else:
            self.nb = nbformat.read(self.path, as_version=4)
            env = {**os.environ, **_env(folder, store, **more), "JPY_SESSION_NAME": str(self.path.resolve())}
            LabClient(self.nb, self.path, timeout=120, allow_errors=True).execute(env=env)
        self.shown = _text(self.nb.cells[-1])

    def save(self) -> None:
        nbformat.write(self.nb, self.path)


def _kernel(folder: Path, store: str, *, save: bool = True, **more: str) -> str:
    return Kernel(folder, store, save=save, **more).shown


def _text(cell: Any) -> str:
    return "\n".join(
        output.get("text", "") + output.get("evalue", "") + str(output.get("data", {}).get("text/plain", ""))
        for output in cell.get("outputs", [])
    )


def _cli(folder: Path, store: str, question: str, **more: str) -> subprocess.Popen[str]:
    argv = [
        sys.executable, "-m", "mkl_notebook.cli", "resume", "pay.ipynb", "--run", "P", "--question", question,
        "--set", "approval=approve", "--script", "pay.script.yaml", "--tools", "tools.py",
        "--store", str(folder / store / "runs.sqlite"), "--quiet",
    ]  # fmt: skip
    env = {**env_without_models(), **_env(folder, store, **more)}
    return subprocess.Popen(argv, cwd=folder, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _question(folder: Path) -> str:
    run = nbfile.find_run(folder / "pay.ipynb", "P")
    question = run_state(run.records).question_id("P")
    assert question is not None
    return question


def _paid(folder: Path) -> list[str]:
    ledger = folder / "ledger.txt"
    return ledger.read_text(encoding="utf-8").split() if ledger.exists() else []


def _poll(condition: Any, what: str, limit: float = 120.0) -> None:
    deadline = time.monotonic() + limit
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def test_a_resume_stopped_before_its_write_back_keeps_a_kernel_from_paying_again(tmp_path: Path) -> None:
    folder = _folder(tmp_path)
    bob = _cli(folder, "b", _question(folder), KILL="1")
    _, err = bob.communicate(timeout=120)
    assert bob.returncode == -signal.SIGKILL, err
    assert _paid(folder) == ["42"]

    shown = _kernel(folder, "a", APPROVE="1")  # Alice answers the question her file still shows
    assert "was being advanced in the store" in shown and str(folder / "b" / "runs.sqlite") in shown, shown
    assert _paid(folder) == ["42"]


def test_a_kernels_answer_not_yet_saved_keeps_mkl_resume_of_the_file_from_paying_again(tmp_path: Path) -> None:
    folder = _folder(tmp_path)
    question = _question(folder)
    alice = Kernel(folder, "a", save=False, APPROVE="1")
    assert "done" in alice.shown  # paid; the file on disk still shows the question
    assert _paid(folder) == ["42"]

    bob = _cli(folder, "b", question)
    _, err = bob.communicate(timeout=120)
    assert bob.returncode == 2 and err.count("\n") == 1, err
    assert "by a notebook kernel in the store" in err and "has not been saved since" in err
    assert ".pay.ipynb.mkl-advancing.json beside the notebook" in err  # where the kernel says it
    assert _paid(folder) == ["42"]
    # One mark, whichever road left it: the listing of the file says where the run is being advanced, as it
    # says it of a resume stopped before its write-back
    listed = subprocess.run(
        [sys.executable, "-m", "mkl_notebook.cli", "runs", "pay.ipynb"],
        cwd=folder, env={**env_without_models(), **_env(folder, "b")}, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert f"was being advanced in the store {folder / 'a' / 'runs.sqlite'}" in listed.stdout, listed

    alice.save()  # Alice's front end saves what her kernel did: the mark is spent
    bob = _cli(folder, "b", question)
    _, err = bob.communicate(timeout=120)
    assert bob.returncode == 2 and "is not waiting for a reply (it is done)" in err, err  # nothing left to pay
    assert _paid(folder) == ["42"]
    # and nothing stays beside the notebook: neither the spent mark nor a lock
    assert sorted(path.name for path in folder.iterdir() if path.name.startswith(".pay.ipynb")) == []


def test_two_kernels_answering_one_file_pay_once(tmp_path: Path) -> None:
    folder = _folder(tmp_path)
    assert "done" in _kernel(folder, "a", save=False, APPROVE="1")
    shown = _kernel(folder, "c", save=False, APPROVE="1")  # another kernel, another store, the same file
    assert "by a notebook kernel in the store" in shown, shown
    assert _paid(folder) == ["42"]


def test_a_kernel_answering_while_mkl_resume_is_paying_is_refused_then_takes_up_what_it_did(tmp_path: Path) -> None:
    folder = _folder(tmp_path)
    release = folder / "release"
    bob = _cli(folder, "b", _question(folder), HOLD=str(release))
    _poll(lambda: _paid(folder) == ["42"], "the command's payment")  # it pays, and holds before its write-back

    shown = _kernel(folder, "a", save=False, APPROVE="1")
    assert "was being advanced in the store" in shown, shown
    release.touch()
    _, err = bob.communicate(timeout=120)
    assert bob.returncode == 0, err
    assert "done" in _kernel(folder, "a")  # the file holds what the command did: the kernel's run is done too
    assert _paid(folder) == ["42"]


def test_a_mark_beside_the_file_that_is_not_ours_to_read_counts_as_none(tmp_path: Path) -> None:
    """The mark beside a notebook came with the folder, so it is read like any file from others: bounded."""
    notebook = tmp_path / "pay.ipynb"
    nbformat.write(nbformat.v4.new_notebook(), notebook)
    beside = tmp_path / ".pay.ipynb.mkl-advancing.json"
    for text in ("[" * 100_000, '{"P": {"store": 5}}', "not json"):
        beside.write_text(text, encoding="utf-8")
        assert side_marks(notebook) == {}


def test_a_mark_is_never_written_through_a_link_or_over_a_folder_beside_the_notebook(tmp_path: Path) -> None:
    """What stands where a kernel keeps its marks came with the folder: a link is not followed (nothing is made
    where it points), a folder is not written over; either stops the advance with one line naming it."""
    import pytest

    notebook = tmp_path / "pay.ipynb"
    nbformat.write(nbformat.v4.new_notebook(), notebook)
    beside = tmp_path / ".pay.ipynb.mkl-advancing.json"
    target = tmp_path / "elsewhere" / "planted.json"
    target.parent.mkdir()
    beside.symlink_to(target)  # dangling: writing through it would make the file it names
    with pytest.raises(NotebookFileError, match=r"\.pay\.ipynb\.mkl-advancing\.json: is not a regular file"):
        set_side_mark(notebook, "P", "/a/store", 3)
    assert not target.exists() and beside.is_symlink()
    beside.unlink()
    beside.mkdir()
    with pytest.raises(NotebookFileError, match="move it away"):
        set_side_mark(notebook, "P", "/a/store", 3)
    beside.rmdir()
    set_side_mark(notebook, "P", "/a/store", 3)  # nothing there: the mark is made, a file of its own
    assert oct(beside.stat().st_mode & 0o777) == "0o644" and side_marks(notebook)["P"].held == 3


def test_the_notebooks_lock_is_never_taken_through_a_link_beside_it(tmp_path: Path) -> None:
    import pytest

    notebook = tmp_path / "pay.ipynb"
    nbformat.write(nbformat.v4.new_notebook(), notebook)
    target = tmp_path / "elsewhere" / "planted"
    target.parent.mkdir()
    (tmp_path / ".pay.ipynb.mkl-lock").symlink_to(target)
    refused = pytest.raises(NotebookFileError, match=r"pay\.ipynb: cannot be locked for writing \(\.pay\.ipynb")
    with refused, locked(notebook):
        pass
    assert not target.exists()


def test_a_kernel_whose_copy_went_stale_while_its_form_waited_never_pays_again(tmp_path: Path) -> None:
    """Alice's kernel takes the run up from the notebook and draws its form; Bob answers the same question with
    `mkl resume` from his own store, which pays and writes the file back; then Alice clicks Approve on her form
    (her kernel's copy is older than the file's now). The reply goes to the newest history in reach: her kernel
    takes up Bob's answer and pays nothing; the same through ``get_run(…, notebook=FILE)`` in a kernel that does
    not know its notebook."""
    from lab_client import KeptKernel

    folder = _folder(tmp_path)
    question = _question(folder)
    with KeptKernel(folder / "pay.ipynb", _env(folder, "c")) as alice:  # a store that never saw the run
        assert "suspended" in _text(alice.run_all().cells[-1])  # her form, drawn from the file's copy
        with KeptKernel(folder / "elsewhere.ipynb", _env(folder, "d")) as other:
            held = other.execute(
                "import mkl_notebook\nh = mkl_notebook.get_run('P', notebook='pay.ipynb')\nprint(h.status)"
            )
            assert "suspended" in held, held
            bob = _cli(folder, "b", question)
            _, err = bob.communicate(timeout=120)
            assert bob.returncode == 0, err
            assert _paid(folder) == ["42"]

            clicked = alice.execute("r.submit('approve', question=r.question_id)\nprint(r.status)")
            assert _paid(folder) == ["42"], clicked  # no second payment
            assert "done" in clicked, clicked  # her kernel took up what Bob's answer did
            again = other.execute("h.submit('approve', question=h.question_id)\nprint(h.status)")
            assert _paid(folder) == ["42"], again


def test_a_mark_beside_the_notebook_that_no_kernel_left_is_set_aside_in_one_line(tmp_path: Path) -> None:
    """A mark beside the notebook naming a store that holds no such advance of the run (someone wrote it, or the
    store is gone) would block every answer for good: `mkl resume` sets it aside, says so in one line naming
    the file, and answers (one payment)."""
    folder = _folder(tmp_path)
    notebook = folder / "pay.ipynb"
    held = len(nbfile.find_run(notebook, "P").records)
    with locked(notebook):
        set_side_mark(notebook, "P", str(folder / "nowhere" / "runs.sqlite"), held)
    bob = _cli(folder, "b", _question(folder))
    _, err = bob.communicate(timeout=120)
    assert bob.returncode == 0, err
    [line] = err.splitlines()
    assert ".pay.ipynb.mkl-advancing.json: says run 'P' is being advanced in the store" in line, err
    assert line.endswith("set aside")
    assert _paid(folder) == ["42"]
