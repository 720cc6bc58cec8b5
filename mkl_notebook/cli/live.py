"""A run's answers written to the terminal as the model writes them (``mkl run`` on a TTY).

Only what a person watching needs: each state's answer as it arrives, under the state's name.
Fan-out branches write at once, so their text is not streamed (the trace shows it at the end),
and nothing here is ever part of the JSON status line, which is printed after the run.
"""

from __future__ import annotations

import re
import threading
from typing import Any, TextIO

from ..render.common import printable

_BRANCH = re.compile(r"/branch:\d+/")


class TerminalStream:
    """An observer that writes each streamed answer to ``out`` as it grows; replayed answers write nothing."""

    def __init__(self, out: TextIO) -> None:
        self.out = out
        self._position: str | None = None  # the call whose text is being written
        self._written = 0  # characters of it written so far
        self._main = threading.main_thread()

    def observer(self, event: str, data: dict[str, Any]) -> None:
        if threading.current_thread() is not self._main:
            return  # a fan-out branch: branches write at once, and the trace shows them
        if event == "partial" and data.get("kind") == "produce" and not _BRANCH.search(str(data.get("position"))):
            self._partial(str(data.get("position")), str(data.get("state")), str(data.get("text") or ""))
        elif event in ("step", "finish"):
            self._end_answer()

    def _partial(self, position: str, state: str, text: str) -> None:
        if position != self._position:
            self._end_answer()
            self._position, self._written = position, 0
            self.out.write(f"── {printable(state)} ──\n")
        if len(text) < self._written:  # the call was made again (a retry): its text starts over
            self.out.write("\n[retrying]\n")
            self._written = 0
        self.out.write(printable(text[self._written :], lines=True))  # model output: shown, never obeyed
        self._written = len(text)
        self.out.flush()

    def _end_answer(self) -> None:
        if self._position is not None:
            self.out.write("\n\n")
            self.out.flush()
            self._position, self._written = None, 0
