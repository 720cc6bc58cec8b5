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


class KeptKernel:
    """A person's kernel kept running across several Run Alls of their notebook (no restart), as JupyterLab
    keeps it while they wait for an approver: each :meth:`run_all` executes every cell in that same kernel, as
    JupyterLab would, and saves the notebook as its page would (outputs; no extension writes metadata here)."""

    def __init__(self, path: Path, env: Mapping[str, str] | None = None) -> None:
        from jupyter_client.manager import KernelManager

        self.path = path
        self.km = KernelManager(kernel_name="python3")
        self.km.start_kernel(cwd=str(path.parent), env={**os.environ, **(env or {}), "JPY_SESSION_NAME": str(path)})

    def run_all(self, *, timeout: int = 120, allow_errors: bool = False) -> nbformat.NotebookNode:
        """Run All (cells top to bottom in this kernel, as the file on disk has them), then save."""
        nb = nbformat.read(self.path, as_version=4)
        LabClient(nb, self.path, km=self.km, timeout=timeout, allow_errors=allow_errors).execute()
        nbformat.write(nb, self.path)
        return nb

    def execute(self, code: str, timeout: float = 60) -> str:
        """What ``code`` prints, executed in the kernel as no cell (a form's click runs so)."""
        client = self.km.client()
        client.start_channels()
        printed: list[str] = []

        def output(message: dict[str, Any]) -> None:
            content = message["content"]
            if message["msg_type"] == "stream":
                printed.append(content["text"])
            elif message["msg_type"] == "error":
                printed.append("\n".join(content["traceback"]))

        try:
            client.wait_for_ready(timeout=timeout)
            client.execute_interactive(code, output_hook=output, timeout=timeout)
        finally:
            client.stop_channels()
        return "".join(printed)

    def close(self) -> None:
        self.km.shutdown_kernel(now=True)

    def __enter__(self) -> KeptKernel:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
