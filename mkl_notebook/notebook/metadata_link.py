"""The kernel's half of the link to the notebook's metadata (the ``mkl-notebook`` JupyterLab extension).

A kernel cannot write its notebook's metadata; the extension can. When the extension is loaded, the
kernel opens a comm to it (target ``mkl.metadata``) and from then on:

- the extension answers ``{"op": "hello", "runs": {...}, "user": NAME}`` with the runs the notebook's metadata
  holds (``metadata.mkl.runs``), so the kernel can take them up without reading the file: an unsaved or
  renamed notebook, or one whose outputs were cleared; and with the Jupyter server's authenticated user as
  the page got it from the server's identity API (``/api/me``). Each page that answers is known by its
  messages' session: a click from that page is recorded as that user's, claimed (:func:`clicking_user`: any
  client of the kernel could send such a hello);
- the kernel sends ``{"op": "put", "run": ID, "envelope": {...}}`` whenever it shows a run as it
  stands, and the extension writes that checkpoint into ``metadata.mkl.runs[ID]`` (never another run's entry).
- the kernel sends ``{"op": "draw", "place": PLACE, "data": {...}}`` when it redraws an output of a run's view to
  each page that did not draw that output itself (a page reloaded or opened since: it knows no display id to
  follow), and the extension redraws the output whose ``metadata.mkl.place`` is PLACE. A page that comes is sent
  the outputs of each place as they stand.

A page that comes after the kernel opened its comm (reloaded, or a second page of the notebook) opens a comm of
its own, its hello as the open message; a page whose notebook is reverted from disk or saved says hello again.
After each hello the kernel brings the page's copies of its runs up to date (:attr:`MetadataLink.on_hello`):
a page's metadata is one more copy of each run, which may be older than the kernel's.

Once the extension has answered, the metadata holds the one copy of each run: a run's output carries its
views and a reference to the run (``application/vnd.mkl.run-ref+json``) instead of the checkpoint, and the
outputs drawn before the answer came (Run All queues every cell ahead of it) are redrawn that way.
Without the extension (VS Code, nbclient, a plain shell) nobody answers: outputs carry the checkpoints as
before. What the extension hands over is untrusted input, checked like any checkpoint from a file before
it is used.
"""

from __future__ import annotations

import re
import threading
from collections import OrderedDict, deque
from collections.abc import Callable
from typing import Any, Literal, TypedDict

from ..app.checkpoints import CHECKPOINT_MIME, referring


class Hello(TypedDict):
    """The extension's first message: the runs the notebook's metadata holds (unverified checkpoints)."""

    op: Literal["hello"]
    runs: dict[str, Any]


class Put(TypedDict):
    """The kernel's: write ``envelope`` as run ``run``'s checkpoint into the notebook's metadata."""

    op: Literal["put"]
    run: str
    envelope: dict[str, Any]


class Draw(TypedDict):
    """The kernel's: the output standing in ``place`` (its ``metadata.mkl.place``) shows ``data`` now."""

    op: Literal["draw"]
    place: str
    data: dict[str, Any]
    metadata: dict[str, Any]


class Delete(TypedDict):
    """The kernel's: the run is gone (started afresh, forgotten); its entry leaves the metadata."""

    op: Literal["delete"]
    run: str


TARGET = "mkl.metadata"
PROTOCOL = 1
MAX_RUNS = 1000  # runs taken from one hello; a notebook with more is not one a person reads
MAX_NAME = 200  # characters of a user name a page reports; a longer one is not taken
MAX_REDRAWS = 256  # outputs kept to redraw until the extension answers (Run All of a long notebook)
MAX_PLACES = 64  # the latest outputs of views kept to draw in a page that comes later (a page reloaded)


def read_hello(data: Any) -> Hello | None:
    """The extension's hello, as far as it has the shape of one (at most ``MAX_RUNS`` runs, each an object under
    its id); None when ``data`` is not a hello. What it carries is checked like any file's before it is used."""
    if not isinstance(data, dict) or data.get("op") != "hello":
        return None
    runs = data.get("runs")
    held = {
        run_id: envelope
        for run_id, envelope in (list(runs.items())[:MAX_RUNS] if isinstance(runs, dict) else [])
        if isinstance(run_id, str) and isinstance(envelope, dict)
    }
    return Hello(op="hello", runs=held)


_page_users: dict[str, str] = {}  # a page's messages' session -> the server's user that page reports


# What Jupyter Server's default identity provider makes up for a request authenticated only by the shared
# token: a random user id and "Anonymous <moon>" (``IdentityProvider.generate_anonymous_user``). It names no
# person, so a click from such a page is not answered as it.
_ANONYMOUS_ID = re.compile(r"[0-9a-f]{32}")


def read_user(data: Any) -> str | None:
    """The server's user a hello reports: a name of at most :data:`MAX_NAME` printable characters, else None
    (also for the anonymous user a server makes up when a shared token is all it knows)."""
    user = data.get("user") if isinstance(data, dict) else None
    if not (isinstance(user, str) and 0 < len(user) <= MAX_NAME and user.isprintable() and user.strip() == user):
        return None
    shown = data.get("user_shown")
    if _ANONYMOUS_ID.fullmatch(user) and (not isinstance(shown, str) or shown.startswith("Anonymous ")):
        return None
    return user


def clicking_user() -> str | None:
    """The Jupyter server's user as the page whose message the kernel handles now (a click's) reported it in
    its hello; None when that page said none (no extension, another front end, no kernel)."""
    from IPython import get_ipython

    kernel = getattr(get_ipython(), "kernel", None)
    parent = kernel.get_parent() if kernel is not None and hasattr(kernel, "get_parent") else None
    session = ((parent or {}).get("header") or {}).get("session") if isinstance(parent, dict) else None
    return _page_users.get(session) if isinstance(session, str) else None


class MetadataLink:
    """The comms to the notebook's pages (the extension in each), and the runs the page's metadata holds as far
    as this kernel knows: what a page said in its last hello, and each checkpoint put or deleted since."""

    def __init__(self) -> None:
        self._comms: dict[str, Any] = {}  # comm id -> comm: the kernel's own, and each page's that opened one
        self._opened = False
        self._lock = threading.Lock()
        self.runs: dict[str, Any] = {}  # run id -> envelope, as the metadata holds it (unverified)
        self.linked = False  # a page answered: the notebook's metadata is written
        self.server_user: str | None = None  # the Jupyter server's user the first page that named one reported
        self._kept: set[str] = set()  # the runs this kernel put there (and has not deleted since)
        # Told after each hello, with the runs the kernel keeps in the metadata: the page's metadata is (again)
        # what the hello says, perhaps older than the runs (a page reloaded, a notebook reverted from disk).
        self.on_hello: Callable[[set[str]], None] | None = None
        # Outputs to redraw once the extension answers, held (a view whose run went on is otherwise let go)
        # until it answers or the frontend closes the comm for want of it.
        self._redraws: deque[Callable[[], None]] = deque(maxlen=MAX_REDRAWS)
        self._places: OrderedDict[str, Draw] = OrderedDict()  # the latest output drawn in each place, the newest last
        # Which pages did not draw a place themselves: a page whose comm opened after the place was first drawn (the
        # page that ran the cell follows its output by its display id). Comms are counted as they open.
        self._opens = 0
        self._opened_at: dict[str, int] = {}  # comm id -> how many comms opened before it
        self._first_drawn: dict[str, int] = {}  # place -> how many comms had opened when its output was first drawn

    def open(self) -> None:
        """Open the comm to the notebook's pages (once per kernel), and take the comm a page opens later (a page
        reloaded, a second page of the notebook) from then on; harmless where no frontend listens."""
        from comm import create_comm, get_comm_manager

        with self._lock:
            if self._opened:
                return
            self._opened = True
            kernels = create_comm(target_name=TARGET, data={"protocol": PROTOCOL})
            self._comms[kernels.comm_id] = kernels
            self._opened_at[kernels.comm_id], self._opens = self._opens, self._opens + 1
        kernels.on_msg(self._received)
        kernels.on_close(lambda message: self._closed(kernels.comm_id))
        get_comm_manager().register_target(TARGET, self._page_opened)

    def _page_opened(self, comm: Any, message: dict[str, Any]) -> None:
        """A page opened a comm (it came after the kernel's own was opened); its open message is its hello."""
        with self._lock:
            self._comms[comm.comm_id] = comm
            self._opened_at[comm.comm_id], self._opens = self._opens, self._opens + 1
        comm.on_msg(self._received)
        comm.on_close(lambda closing: self._closed(comm.comm_id))
        self._received(message)
        with self._lock:  # the page shows the outputs it was opened with: as they stand now, where they differ
            draws = list(self._places.values())
        for draw in draws:
            comm.send(draw)

    def _closed(self, comm_id: str) -> None:
        """A frontend closed a comm; once none is left unanswered, no output will be redrawn."""
        with self._lock:
            self._comms.pop(comm_id, None)
            self._opened_at.pop(comm_id, None)
            if not self._comms:
                self._redraws.clear()

    def _received(self, message: dict[str, Any]) -> None:
        data = (message.get("content") or {}).get("data")
        hello = read_hello(data)
        if hello is None:
            return
        session, user = (message.get("header") or {}).get("session"), read_user(data)
        with self._lock:
            if isinstance(session, str) and user is not None:
                _page_users[session] = user
            if self.server_user is None:
                self.server_user = user
            self.linked = True
            self.runs = dict(hello["runs"])  # what the page's metadata holds now
            kept = set(self._kept)
            redraws = list(self._redraws)
            self._redraws.clear()
        if self.on_hello is not None:
            self.on_hello(kept | set(hello["runs"]))
        for redraw in redraws:
            redraw()

    def carry(self, run_id: str, bundle: dict[str, Any], *, as_it_stands: bool) -> dict[str, Any]:
        """The output bundle of a run's view, as the notebook should keep it.

        A view of the run as it stands sends its checkpoint to the metadata. Once the extension has
        answered, the output refers to the metadata's copy instead of carrying a second one.
        """
        if as_it_stands:
            self.put(run_id, bundle[CHECKPOINT_MIME])
        return referring(bundle) if self.linked else bundle

    def when_linked(self, redraw: Callable[[], None]) -> None:
        """Call ``redraw`` when the extension answers, if it has not yet (for the latest outputs drawn)."""
        with self._lock:
            if not self.linked:
                self._redraws.append(redraw)

    def drawn(self, place: str, data: dict[str, Any], metadata: dict[str, Any]) -> None:
        """An output was first drawn in ``place`` (a cell ran): kept, to draw in a page that comes later."""
        with self._lock:
            self._first_drawn[place] = self._opens
            self._keep(Draw(op="draw", place=place, data=data, metadata=metadata))

    def draw(self, place: str, data: dict[str, Any], metadata: dict[str, Any]) -> None:
        """The output in ``place`` shows ``data`` now: each page that did not draw it itself (a page opened since,
        reloaded) redraws the output standing there; the page that ran the cell follows it by its display id."""
        said = Draw(op="draw", place=place, data=data, metadata=metadata)
        with self._lock:
            self._keep(said)
            since = self._first_drawn.get(place, 0)
            comms = [comm for comm_id, comm in self._comms.items() if self._opened_at.get(comm_id, 0) >= since]
        for comm in comms:
            comm.send(said)

    def _keep(self, said: Draw) -> None:
        """Keep the latest output of a place, and of the :data:`MAX_PLACES` latest places only (the lock is held)."""
        self._places[said["place"]] = said
        self._places.move_to_end(said["place"])
        while len(self._places) > MAX_PLACES:
            gone, _ = self._places.popitem(last=False)
            self._first_drawn.pop(gone, None)

    def put(self, run_id: str, envelope: dict[str, Any]) -> None:
        """The run's checkpoint now: the extension writes it into the notebook's metadata, under its run's id."""
        if envelope.get("run_id") != run_id:  # another run's entry is never written over
            raise ValueError(f"the checkpoint of run {envelope.get('run_id')!r} is not run {run_id!r}'s")
        with self._lock:
            comms = list(self._comms.values())
            known = self.runs.get(run_id) == envelope  # the metadata holds it so already: not sent twice
            self.runs[run_id] = envelope
            self._kept.add(run_id)
        if not known:
            for comm in comms:
                comm.send(Put(op="put", run=run_id, envelope=envelope))

    def delete(self, run_id: str) -> None:
        """The run is gone (started afresh, forgotten): its entry leaves the notebook's metadata."""
        with self._lock:
            comms = list(self._comms.values())
            self.runs.pop(run_id, None)
            self._kept.discard(run_id)
        for comm in comms:
            comm.send(Delete(op="delete", run=run_id))

    def held(self, run_id: str) -> dict[str, Any] | None:
        """The checkpoint of ``run_id`` the notebook's metadata held, as the extension handed it over."""
        with self._lock:
            return self.runs.get(run_id)
