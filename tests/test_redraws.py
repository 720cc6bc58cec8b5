"""A click's redraw in the kernel: the question at once, the rest of the view (trace, diagram, the form's printed
twin) a moment later on the event loop that handled the click, one rest per view however fast the clicks come;
a cell's execution draws everything before it ends. A batch of display updates flushes the output streams once."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import pytest

from mkl_notebook.notebook import redraws
from mkl_notebook.notebook.redraws import RestOfRedraw, streams_flushed_once


class Publisher:
    """ipykernel's display publisher as far as a batch sees it: every publish flushes the streams first."""

    def __init__(self) -> None:
        self.flushes: list[int] = []  # the thread of each flush

    def _flush_streams(self) -> None:
        self.flushes.append(threading.get_ident())

    def publish(self) -> None:
        self._flush_streams()


def kernel_handling(monkeypatch: pytest.MonkeyPatch, msg_type: str) -> Publisher:
    """The kernel handles a message of ``msg_type`` now (``comm_msg``: a widget's click)."""
    publisher = Publisher()
    kernel = SimpleNamespace(get_parent=lambda: {"header": {"msg_type": msg_type}})
    shell = SimpleNamespace(kernel=kernel, display_pub=publisher)
    monkeypatch.setattr(redraws, "get_ipython", lambda: shell)
    return publisher


async def until(done: Callable[[], bool]) -> None:
    for _ in range(2000):
        if done():
            return
        await asyncio.sleep(0.005)
    raise AssertionError("never happened")


def test_the_rest_of_a_clicks_redraw_is_drawn_after_the_click_once(monkeypatch: pytest.MonkeyPatch) -> None:
    publisher = kernel_handling(monkeypatch, "comm_msg")
    drawn: list[str] = []

    async def click() -> None:
        later = RestOfRedraw(threading.RLock())
        assert later.schedule(lambda: (drawn.append("rest"), publisher.publish(), publisher.publish()))
        after = asyncio.Event()  # due at the same moment, so run after the rest: anything it did is done then
        asyncio.get_running_loop().call_later(redraws.REST_DELAY, after.set)
        assert drawn == []  # the click's handler returns with the question drawn, and nothing more
        await until(after.is_set)
        assert drawn == ["rest"]

    asyncio.run(click())
    assert len(publisher.flushes) == 1  # the rest's redraws flushed the streams once, before them


def test_a_redraw_before_the_rest_voids_it_so_fast_clicks_draw_the_rest_once(monkeypatch: pytest.MonkeyPatch) -> None:
    kernel_handling(monkeypatch, "comm_msg")
    drawn: list[str] = []

    async def clicks() -> None:
        later = RestOfRedraw(threading.RLock())
        assert later.schedule(lambda: drawn.append("first"))
        later.void()  # the next click's redraw begins
        assert later.schedule(lambda: drawn.append("second"))
        await until(lambda: "second" in drawn)  # (the first was due before it)
        assert drawn == ["second"]

    asyncio.run(clicks())


def test_a_cells_execution_or_a_shell_without_an_event_loop_draws_everything_at_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    kernel_handling(monkeypatch, "execute_request")
    later = RestOfRedraw(threading.RLock())

    async def executing() -> bool:
        return later.schedule(lambda: None)

    assert asyncio.run(executing()) is False  # a headless client saves a cell's outputs when its execution ends
    kernel_handling(monkeypatch, "comm_msg")
    assert later.schedule(lambda: None) is False  # no event loop runs here (a plain IPython shell)


def test_a_batch_of_redraws_flushes_the_streams_once_and_only_for_its_own_thread(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    publisher = kernel_handling(monkeypatch, "comm_msg")
    me = threading.get_ident()
    other: list[Any] = []
    with streams_flushed_once():
        for _ in range(5):
            publisher.publish()
        elsewhere = threading.Thread(target=publisher.publish)  # a cell printing, then displaying, meanwhile
        elsewhere.start()
        elsewhere.join()
        other = [thread for thread in publisher.flushes if thread != me]
        with streams_flushed_once():  # a batch within a batch changes nothing
            publisher.publish()
    assert publisher.flushes.count(me) == 1 and len(other) == 1
    publisher.publish()  # after the batch, every display flushes again
    assert publisher.flushes.count(me) == 2 and "_flush_streams" not in vars(publisher)
