"""Execute a notebook the way JupyterLab does, with nbclient.

JupyterLab tells the kernel two things nbclient does not: which notebook file it runs
(``JPY_SESSION_NAME``, which ipykernel turns into ``__session__``) and which cell each
execute request comes from (``metadata.cellId``). mkl_notebook uses both to replay a
notebook cell by cell, so tests that stand for JupyterLab must say them too.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import nbformat
from nbclient import NotebookClient
from nbclient.util import run_sync


class LabClient(NotebookClient):  # type: ignore[misc]
    """An nbclient that names each cell in its execute request and the notebook's path to the kernel."""

    def __init__(self, nb: nbformat.NotebookNode, path: Path, **kw: Any) -> None:
        kw.setdefault("record_timing", False)  # as JupyterLab saves by default: no per-cell clock in the file
        super().__init__(nb, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}}, **kw)
        self.path = path
        self._cell_id = ""

    async def async_start_new_kernel_client(self) -> Any:
        client = await super().async_start_new_kernel_client()
        send = client.session.msg

        def execute(
            code: str,
            silent: bool = False,
            store_history: bool = True,
            user_expressions: dict[str, Any] | None = None,
            allow_stdin: bool | None = None,
            stop_on_error: bool = True,
        ) -> str:
            content = {
                "code": code,
                "silent": silent,
                "store_history": store_history,
                "user_expressions": user_expressions or {},
                "allow_stdin": client.allow_stdin if allow_stdin is None else allow_stdin,
                "stop_on_error": stop_on_error,
            }
            message = send("execute_request", content, metadata={"cellId": self._cell_id})
            client.shell_channel.send(message)
            return str(message["header"]["msg_id"])

        client.execute = execute
        return client

    async def async_execute_cell(self, cell: Any, cell_index: int, *args: Any, **kw: Any) -> Any:
        self._cell_id = str(cell.get("id") or "")
        return await super().async_execute_cell(cell, cell_index, *args, **kw)

    # nbclient binds its synchronous twins to its own coroutines: bind them to these.
    start_new_kernel_client = run_sync(async_start_new_kernel_client)
    execute_cell = run_sync(async_execute_cell)


def run_all(
    path: Path, *, timeout: int = 120, allow_errors: bool = False, env: Mapping[str, str] | None = None
) -> nbformat.NotebookNode:
    """Restart & Run All of the notebook at ``path``, as JupyterLab would, and save it there; ``env`` adds to
    the kernel's environment (another person's ``JUPYTER_DATA_DIR``, say)."""
    nb = nbformat.read(path, as_version=4)
    env = {**os.environ, **(env or {}), "JPY_SESSION_NAME": str(path.resolve())}
    LabClient(nb, path, timeout=timeout, allow_errors=allow_errors).execute(env=env)
    nbformat.write(nb, path)
    return nb
