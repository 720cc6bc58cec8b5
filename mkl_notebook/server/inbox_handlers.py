"""The inbox panel's routes: the waiting questions as JSON, and a person's answer to one of them."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from jupyter_server.base.handlers import APIHandler
from jupyter_server.utils import url_path_join
from tornado import web

from ..app.errors import USER_ERRORS
from ..app.inbox import inbox
from ..app.inbox_answers import answer_in_folder, read_answer
from ..app.requests import InboxRequest
from ..app.settings import default_store

MAX_BODY = 64 * 1024  # bytes of an answer's JSON


class InboxHandler(APIHandler):
    """``GET /mkl/inbox``: every question waiting under the server's folder and in the configured store, as the
    ``mkl inbox --json`` rows, with the lines of files that could not be read. Reading only."""

    def initialize(self, root: str) -> None:
        self.root = root

    @web.authenticated
    async def get(self) -> None:
        request = InboxRequest(folders=(self.root,), configured=str(default_store()), via="inbox")
        try:
            found = await asyncio.to_thread(inbox, request)
        except USER_ERRORS as exc:
            raise web.HTTPError(400, str(exc)) from None
        rows = [_served(self.root, row) for row in found.rows]
        self.finish(json.dumps({"rows": rows, "problems": found.problems}, default=str))


class AnswerHandler(APIHandler):
    """``POST /mkl/inbox/answer``: a person's answer to one row (run, question, reply, note, and the file or store
    the row named); the run goes on where it is kept. 409 when the question is no longer asked (answered
    elsewhere, or the run moved on), 400 for a malformed answer: each with one line saying why."""

    def initialize(self, root: str) -> None:
        self.root = root

    @web.authenticated
    async def post(self) -> None:
        if len(self.request.body) > MAX_BODY:
            raise web.HTTPError(413, "an inbox answer is at most 64 KB")
        try:
            answer = read_answer(json.loads(self.request.body or b"null"))
        except ValueError as exc:  # (a UsageProblem is a ValueError too)
            raise web.HTTPError(400, str(exc).splitlines()[0]) from None
        try:
            done = await asyncio.to_thread(answer_in_folder, Path(self.root), answer)
        except USER_ERRORS as exc:
            self.set_status(409)
            self.finish(json.dumps({"message": str(exc)}))
            return
        self.finish(json.dumps(done, default=str))


def _relative(root: str, shown: Any) -> Any:
    """A file's or store's path as a row shows it (relative to this process's folder, as ``mkl inbox`` prints
    it), made relative to the server's folder, with slashes: as the contents API names files, and as an answer
    names them back. A URL, or a path outside that folder, as it is."""
    if not isinstance(shown, str) or "://" in shown:
        return shown
    try:
        return Path(shown).resolve().relative_to(Path(root).resolve()).as_posix()
    except ValueError:
        return shown


def _served(root: str, row: dict[str, Any]) -> dict[str, Any]:
    """An inbox row with its files and stores named relative to the server's folder ``root``, and the notebook a
    page opens for it (``open``: its path and the cell that asked; a run kept by a store and a notebook alike is
    opened in the notebook)."""
    served = {
        **row,
        "file": _relative(root, row.get("file")),
        "store": _relative(root, row.get("store")),
        "where": _place(root, row.get("where")),
        "also_in": [_place(root, place) for place in row.get("also_in") or []],
    }
    served["open"] = next(
        (found for place in (served["where"], *served["also_in"]) if (found := _notebook_at(place)) is not None),
        None,
    )
    return served


def _notebook_at(place: Any) -> dict[str, Any] | None:
    """The notebook (``path``, ``cell``: 1 is the first) a row's place names, if it names one."""
    if not isinstance(place, str) or place.startswith("store "):
        return None
    path, _, rest = place.partition(", cell ")
    if not path.endswith(".ipynb"):
        return None
    return {"path": path, "cell": int(rest) if rest.isdigit() else None}


def _place(root: str, place: Any) -> Any:
    """A row's place (``PATH, cell N`` or ``store PATH``) with its path relative to ``root``."""
    if not isinstance(place, str):
        return place
    head, path = ("store ", place[6:]) if place.startswith("store ") else ("", place)
    path, comma, rest = path.partition(", ")
    return f"{head}{_relative(root, path)}{comma}{rest}"


def routes(base_url: str, root: str) -> list[tuple[str, type[APIHandler], dict[str, str]]]:
    """The inbox's routes under the server's ``base_url``, each serving the server's folder ``root``."""
    return [
        (url_path_join(base_url, "mkl", "inbox"), InboxHandler, {"root": root}),
        (url_path_join(base_url, "mkl", "inbox", "answer"), AnswerHandler, {"root": root}),
    ]
