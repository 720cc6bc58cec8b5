"""Every page of a notebook keeps its runs: a page that comes after the kernel linked (reloaded, a second page)
opens a comm of its own, and a page whose notebook was reverted from disk says hello again, after which the
kernel puts back what the page's metadata holds older than its store (or lacks).

A real kernel, driven over its channels as the mkl-notebook extension of each page would drive it.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

from test_metadata_runs import RUN, _Kernel, _linked_kernel

from mkl_notebook.checkpoints import envelope


def _sent(messages: list[dict[str, Any]], comm_id: str | None = None) -> list[dict[str, Any]]:
    """What the kernel sent the extension (on comm ``comm_id``, else on any): puts and deletes, no widget's."""
    return [
        m["content"]["data"]
        for m in messages
        if m["msg_type"] == "comm_msg"
        and m["content"]["data"].get("op") in ("put", "delete")
        and (comm_id is None or m["content"]["comm_id"] == comm_id)
    ]


def _open_from_the_page(kernel: _Kernel, data: dict[str, Any]) -> str:
    """A page's own comm, its hello as the open message (as a reloaded page's extension opens it)."""
    comm_id = uuid.uuid4().hex
    content = {"comm_id": comm_id, "target_name": "mkl.metadata", "data": data}
    kernel.client.shell_channel.send(kernel.client.session.msg("comm_open", content))
    return comm_id


def test_a_page_reverted_to_an_older_file_is_sent_the_run_as_it_stands_again(waiting: Path, tmp_path: Path) -> None:
    kernel = _linked_kernel(waiting, tmp_path / "work")
    try:
        first = kernel.execute(RUN.replace("--no-hitl", "--hitl"))
        [put] = _sent(first)
        waiting_copy = put["envelope"]
        answered = kernel.execute("import mkl_notebook\nmkl_notebook.get_run('mine').submit('approve')")
        after = _sent(answered)[-1]
        assert len(envelope.verify_checkpoint(after["envelope"]).records) > len(
            envelope.verify_checkpoint(waiting_copy).records
        )
        comm = next(iter(_comms(kernel)))
        kernel.say(comm, {"op": "hello", "runs": {"mine": waiting_copy}})  # reverted: the older copy again
        said = kernel.execute("pass", every=True)
        assert [(data["op"], data["run"]) for data in _sent(said)] == [("put", "mine")]
        assert _sent(said)[0]["envelope"] == after["envelope"]  # the run as it stands, back in the metadata

        kernel.say(comm, {"op": "hello", "runs": {}})  # a file that never held it: it is put back too
        assert [data["run"] for data in _sent(kernel.execute("pass", every=True))] == ["mine"]
        kernel.say(comm, {"op": "hello", "runs": {"mine": after["envelope"]}})  # up to date: nothing to send
        assert _sent(kernel.execute("pass", every=True)) == []
    finally:
        kernel.close()


def test_a_reloaded_page_opens_its_own_comm_and_is_sent_every_checkpoint_from_then_on(
    waiting: Path, tmp_path: Path
) -> None:
    kernel = _linked_kernel(waiting, tmp_path / "work")
    try:
        [put] = _sent(kernel.execute(RUN.replace("--no-hitl", "--hitl")))
        page = _open_from_the_page(kernel, {"op": "hello", "runs": {"mine": put["envelope"]}})
        assert _sent(kernel.execute("pass", every=True)) == []  # it holds the run as it stands
        answered = kernel.execute("import mkl_notebook\nmkl_notebook.get_run('mine').submit('approve')")
        assert [data["run"] for data in _sent(answered, page) if data["op"] == "put"] == ["mine"]
    finally:
        kernel.close()


def _comms(kernel: _Kernel) -> set[str]:
    """The comms open to the kernel's mkl.metadata target."""
    msg_id = kernel.client.comm_info(target_name="mkl.metadata")
    while True:
        reply = kernel.client.get_shell_msg(timeout=60)
        if reply["parent_header"].get("msg_id") == msg_id:
            return set(reply["content"]["comms"])


def _draws(messages: list[dict[str, Any]], comm_id: str) -> dict[str, dict[str, Any]]:
    """The outputs the kernel asked the page on comm ``comm_id`` to redraw: the latest data of each place."""
    return {
        m["content"]["data"]["place"]: m["content"]["data"]["data"]
        for m in messages
        if m["msg_type"] == "comm_msg"
        and m["content"]["comm_id"] == comm_id
        and m["content"]["data"].get("op") == "draw"
    }


def _places(messages: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The outputs the kernel drew or redrew, by the place each stands in (``metadata.mkl.place``)."""
    return {
        m["content"]["metadata"]["mkl"]["place"]: m["content"]["data"]
        for m in messages
        if m["msg_type"] in ("display_data", "update_display_data") and "mkl" in m["content"].get("metadata", {})
    }


def test_a_page_that_did_not_draw_a_view_is_sent_its_outputs_as_they_stand_and_each_redraw_after(
    waiting: Path, tmp_path: Path
) -> None:
    """A reloaded page shows the outputs it was opened with and knows none of their display ids: its extension is
    sent the outputs of each place as the kernel drew them last when it comes, and each redraw from then on
    (the page that ran the cell follows its outputs by their display ids, and is sent none)."""
    kernel = _linked_kernel(waiting, tmp_path / "work")
    try:
        first = kernel.execute(RUN.replace("--no-hitl", "--hitl"))
        drawn = _places(first)
        view = next(place for place in drawn if place.endswith("/view"))
        [put] = _sent(first)
        page = _open_from_the_page(kernel, {"op": "hello", "runs": {"mine": put["envelope"]}})
        came = kernel.execute("pass", every=True)
        assert _draws(came, page) == drawn  # every place, as it stands
        answered = kernel.execute("import mkl_notebook\nmkl_notebook.get_run('mine').submit('approve')")
        redrawn = _places(answered)
        assert redrawn[view] != drawn[view]  # the view of the run moved on ...
        assert _draws(answered, page)[view] == redrawn[view]  # ... in the page that came later too
        [kernels] = _comms(kernel) - {page}
        assert _draws(came + answered, kernels) == {}  # the page that ran the cell redraws by display id
    finally:
        kernel.close()
