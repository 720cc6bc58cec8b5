"""When a view's places are drawn: the kernel's output streams flushed once for a batch of redraws, and, after a
click, the places nobody waits for (the run's trace, its diagram, the form's printed twin) a moment after the
question the person waits for, so that the page draws the question first.

ipykernel flushes stdout and stderr before every display message, so that printed text stays above what is
displayed after it; each flush waits for its I/O thread, and a click's redraws spent a third of the kernel's time
per click waiting there. Nothing prints while a view draws itself, so a batch flushes once, before it.

A click's redraw reaches the page as some thirty messages, which the server relays and the page handles one by one,
all on a machine that is drawing the click at the same time: the question's widgets went out first, but the trace
table, the diagram and the form's redrawn place competed with them for the processor. Drawn
:data:`REST_DELAY` seconds later (a person reads the question meanwhile), the question is drawn sooner; a click
within that time makes the newer redraw the only one (:class:`RestOfRedraw`).
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable, Iterator
from typing import Any

from IPython import get_ipython

REST_DELAY = 0.15  # seconds from a click's question to the rest of its view, as between live progress redraws


@contextlib.contextmanager
def streams_flushed_once() -> Iterator[None]:
    """Draw a batch of display updates with the kernel's output streams flushed once, before them, not before
    each. (``_flush_streams`` is ipykernel's; another shell, or a batch under way, is left as it is; only this
    thread's displays skip it.)"""
    publisher = getattr(get_ipython(), "display_pub", None)
    flush = getattr(publisher, "_flush_streams", None)
    if publisher is None or not callable(flush) or "_flush_streams" in vars(publisher):
        yield
        return
    flush()
    drawing = threading.get_ident()

    def flush_elsewhere() -> None:
        if threading.get_ident() != drawing:
            flush()

    publisher._flush_streams = flush_elsewhere
    try:
        yield
    finally:
        del publisher._flush_streams


def handling_a_click() -> bool:
    """Whether the kernel is handling a widget's message now (a form's click), not executing a cell: a cell's
    outputs must be whole when its execution ends (a headless client saves them then)."""
    kernel = getattr(get_ipython(), "kernel", None)
    get_parent = getattr(kernel, "get_parent", None)
    parent: Any = get_parent() if callable(get_parent) else None
    header = parent.get("header") if isinstance(parent, dict) else None
    return isinstance(header, dict) and header.get("msg_type") == "comm_msg"


class RestOfRedraw:
    """The rest of one view's latest redraw, drawn :data:`REST_DELAY` seconds after a click, on the event loop
    that handled it; a redraw that comes first (another click, a cell) voids it and draws the view itself."""

    def __init__(self, lock: threading.RLock) -> None:
        self._lock = lock  # the view's: a redraw and a rest never interleave
        self._due = 0

    def void(self) -> None:
        """A redraw is under way: the rest waiting, if any, is not drawn (the redraw draws what it would)."""
        with self._lock:
            self._due += 1

    def schedule(self, rest: Callable[[], None]) -> bool:
        """Draw ``rest`` a moment from now, if the kernel is handling a click on an event loop; False: draw it
        now (a cell's execution, a plain shell)."""
        if not handling_a_click():
            return False
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return False
        with self._lock:
            self._due += 1
            due = self._due

        def draw() -> None:
            with self._lock:
                if due != self._due:
                    return  # a newer redraw drew the view, or will
                with streams_flushed_once():
                    rest()

        loop.call_later(REST_DELAY, draw)
        return True
