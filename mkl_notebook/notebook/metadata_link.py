"""The kernel's half of the link to the notebook's metadata (the ``mkl-notebook`` JupyterLab extension).

A kernel cannot write its notebook's metadata; the extension can. When the extension is loaded, the
kernel opens a comm to it (target ``mkl.metadata``) and from then on:

- the extension answers ``{"op": "hello", "runs": {...}}`` with the runs the notebook's metadata holds
  (``metadata.mkl.runs``), so the kernel can take them up without reading the file: an unsaved or
  renamed notebook, or one whose outputs were cleared;
- the kernel sends ``{"op": "put", "run": ID, "envelope": {...}}`` whenever it shows a run as it
  stands, and the extension writes that checkpoint into ``metadata.mkl.runs[ID]``.

Without the extension (VS Code, nbclient, a plain shell) nobody answers and nothing is sent anywhere:
outputs carry the checkpoints as before. What the extension hands over is untrusted input, checked
like any checkpoint from a file before it is used.
"""

from __future__ import annotations

import threading
from typing import Any

TARGET = "mkl.metadata"
PROTOCOL = 1
MAX_RUNS = 1000  # runs taken from one hello; a notebook with more is not one a person reads


class MetadataLink:
    """The comm to the notebook's extension, and the runs its metadata held when it said hello."""

    def __init__(self) -> None:
        self._comm: Any = None
        self._lock = threading.Lock()
        self.runs: dict[str, Any] = {}  # run id -> envelope, as the metadata held them (unverified)
        self.linked = False  # the extension answered: the notebook's metadata is written

    def open(self) -> None:
        """Open the comm (once per kernel); harmless where no frontend listens."""
        from comm import create_comm

        with self._lock:
            if self._comm is not None:
                return
            self._comm = create_comm(target_name=TARGET, data={"protocol": PROTOCOL})
            self._comm.on_msg(self._received)

    def _received(self, message: dict[str, Any]) -> None:
        data = (message.get("content") or {}).get("data")
        if not isinstance(data, dict) or data.get("op") != "hello":
            return
        runs = data.get("runs")
        with self._lock:
            self.linked = True
            if isinstance(runs, dict):
                self.runs = {
                    run_id: envelope
                    for run_id, envelope in list(runs.items())[:MAX_RUNS]
                    if isinstance(run_id, str) and isinstance(envelope, dict)
                }

    def put(self, run_id: str, envelope: dict[str, Any]) -> None:
        """The run's checkpoint now: the extension writes it into the notebook's metadata."""
        with self._lock:
            comm = self._comm
            self.runs[run_id] = envelope
        if comm is not None:
            comm.send({"op": "put", "run": run_id, "envelope": envelope})

    def delete(self, run_id: str) -> None:
        """The run is gone (started afresh, forgotten): its entry leaves the notebook's metadata."""
        with self._lock:
            comm = self._comm
            self.runs.pop(run_id, None)
        if comm is not None:
            comm.send({"op": "delete", "run": run_id})

    def held(self, run_id: str) -> dict[str, Any] | None:
        """The checkpoint of ``run_id`` the notebook's metadata held, as the extension handed it over."""
        with self._lock:
            return self.runs.get(run_id)
