"""Answering a question of the inbox from the Jupyter server's inbox panel, where no kernel runs its notebook.

The panel lists what :func:`.inbox.inbox` finds under the server's folder; a person answers a row with the same
decision, note and late-answer rule as a form. The reply is journaled by whoever the server runs as (the hub user
on JupyterHub, else the server's OS account: what this process can establish itself), and the run goes on where
it is kept: a notebook's run is continued as ``mkl resume NOTEBOOK --run ID`` continues it (in the store beside
the notebook, or ``$MKL_STORE``; its new checkpoint written back into the file), a store's run in that store.

Where a row says the run is kept comes back from a page: a file is answered only inside the server's folder, a
store only when it is the one configured or a store file inside that folder, never any other path a request names.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from ..checkpoints import notebook_file as nbfile
from ..durable.store_names import is_server_store, public_store
from ..durable.store_opening import store_there
from .continuing import drawn_on
from .errors import UsageProblem
from .requests import ContinueRequest
from .settings import STORE_ENV, Settings, store_location

VIA = "inbox"  # how an answer given in the inbox panel is journaled (``via``)
MAX_REPLY = 10_000  # characters of a reply or note typed into the panel
FILE_STORE = Path(".mkl") / "runs.sqlite"  # the store a kernel beside a notebook keeps (DEFAULT_STORE, there)


@dataclass(frozen=True)
class InboxAnswer:
    """A person's answer to one row of the inbox: the run and the question the row showed (``question``: its id),
    the reply (``approve``, ``reject``, or text), a note beside it, and where the row said the run is kept
    (``file``: a notebook's path inside the server's folder, as the row gave it; or ``store``)."""

    run: str
    question: str
    reply: str
    note: str | None = None
    file: str | None = None
    store: str | None = None


def read_answer(data: Any) -> InboxAnswer:
    """An answer as a page posts it (JSON), checked field by field; anything else is refused in one line."""
    if not isinstance(data, dict):
        raise UsageProblem("an inbox answer is a JSON object")
    unknown = sorted(set(data) - {"run", "question", "reply", "note", "file", "store"})
    if unknown:
        raise UsageProblem(f"an inbox answer has no field {unknown[0]!r}")
    texts: dict[str, str | None] = {}
    for name in ("run", "question", "reply", "note", "file", "store"):
        value = data.get(name)
        if value is not None and (not isinstance(value, str) or len(value) > MAX_REPLY):
            raise UsageProblem(f"an inbox answer's {name} must be text of at most {MAX_REPLY} characters")
        texts[name] = value
    run, question, reply = texts["run"], texts["question"], texts["reply"]
    if not run or not question or not reply or not reply.strip():
        raise UsageProblem("an inbox answer names its run, its question and a reply")
    if (texts["file"] is None) == (texts["store"] is None):
        raise UsageProblem("an inbox answer says where its run is kept: a notebook file or a store")
    return InboxAnswer(run, question, reply, texts["note"] or None, texts["file"], texts["store"])


def answer_in_folder(root: Path, answer: InboxAnswer) -> dict[str, Any]:
    """Journal ``answer`` and let its run go on where it is kept, under the server's folder ``root``: what the
    run does now (``status``, ``at``, ``ask``, and where it was written). A late answer (the question was answered
    or is no longer asked) is refused with what became of it, and nothing is journaled."""
    from .workspace import Workspace

    request = ContinueRequest(reply=answer.reply, question=answer.question, note=answer.note, via=VIA)
    if answer.file is not None:
        notebook = _inside(root, answer.file)
        ws = Workspace(Settings(store=_store_beside(notebook), hitl="none"), follow_files=True)
        try:
            found = nbfile.find_run(notebook, answer.run)
            trusted = ws.keyring.judge_history(found.records, found.seal).trusted
            drawn = _answered_with(root, notebook.parent, drawn_on(found.records, trusted=trusted))
            outcome = ws.resume_notebook(notebook, answer.run, replace(request, **drawn), via=VIA)
        finally:
            ws.close()
        written: str = answer.file
    else:
        store = _store_in_reach(root, str(answer.store))
        ws = Workspace(Settings(store=store, hitl="none"), follow_files=True)
        try:
            # (a store file's runs were made beside it, in the folder that holds its .mkl folder)
            beside = Path(store).parent.parent if isinstance(store, Path) else root
            drawn = _answered_with(
                root, beside, drawn_on(ws.store.read(answer.run)) if ws.store.exists(answer.run) else {}
            )
            outcome = ws.resume(answer.run, replace(request, **drawn))
        finally:
            ws.close()
        written = public_store(str(store)) if is_server_store(str(store)) else str(answer.store)
    result = outcome.result
    return {"run": answer.run, "status": result.status, "at": result.at, "ask": result.ask, "written": written}


def _answered_with(root: Path, folder: Path, drawn: dict[str, str]) -> dict[str, Any]:
    """How the run's next calls are answered, as the command that continues it says (its ``script`` of scripted
    answers, read relative to ``folder``, only inside the server's folder ``root``; its ``model``). Never its
    tools file, which is code: a run that needs one is answered and waits for a command that names it."""
    given: dict[str, Any] = {}
    if drawn.get("model"):
        given["model"] = drawn["model"]
    script = drawn.get("script")
    if script:
        path = (folder / script).resolve()
        if path.is_file() and path.is_relative_to(root.resolve()):
            given["script"] = str(path)
    return given


def _inside(root: Path, given: str) -> Path:
    """The notebook ``given`` names (as an inbox row shows it, relative to the server's folder), refused unless it
    is a notebook file inside ``root`` once every link is followed."""
    base = root.resolve()
    path = (base / given).resolve()
    if path.suffix != ".ipynb" or not path.is_file() or not path.is_relative_to(base):
        raise UsageProblem(f"{given!r} is not a notebook inside the server's folder")
    return path


def _store_beside(notebook: Path) -> Path | str:
    """The store a kernel running ``notebook`` keeps its runs in: ``$MKL_STORE``, else the one beside it."""
    configured = os.environ.get(STORE_ENV, "").strip()
    return store_location(configured) if configured else notebook.parent / FILE_STORE


def _store_in_reach(root: Path, given: str) -> Path | str:
    """The store ``given`` names, refused unless it is the configured one or a store file inside ``root``."""
    configured = os.environ.get(STORE_ENV, "").strip()
    if configured and given in (configured, public_store(configured) if is_server_store(configured) else None):
        return store_location(configured)
    base = root.resolve()
    path = (base / given).resolve()
    if is_server_store(given) or not path.is_relative_to(base) or not store_there(path):
        raise UsageProblem(f"{public_store(given) if is_server_store(given) else given!r} is not a store in reach")
    return path
