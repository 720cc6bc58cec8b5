"""What a Jupyter server serving a folder does on its own, every little while: decide the questions past their
deadline (as ``mkl tick`` does) and send the notifications and reminders due (as ``mkl notify`` does), under the
folder and in the configured store. Whichever decides or sends first journals it once; the others find nothing
due."""

from __future__ import annotations

from pathlib import Path

from ..durable.store_opening import store_there
from .deadlines import Ticked, tick
from .notifying import Report, send_from, store_in_reach, stores_under
from .settings import Settings, default_store
from .workspace import Workspace


def tick_served(folder: str | Path) -> Ticked:
    """:func:`tick` under ``folder`` and in the configured store (``$MKL_STORE``, else ``.mkl/runs.sqlite`` here)
    when it is there: what a Jupyter server serving ``folder`` decides on its own, every little while."""
    configured = default_store()
    return tick((folder,), (str(configured),) if store_there(configured) else ())


def notify_served(folder: str | Path) -> Report:
    """Send what is due (notices and reminders) from every run store under ``folder`` and the configured one, as
    ``mkl notify FOLDER`` does: what a Jupyter server serving ``folder`` sends on its own, every little while."""
    found, _refused = stores_under(Path(folder))
    report = Report()
    for location in dict.fromkeys([*found, default_store()]):
        if not store_in_reach(location):
            continue
        with Workspace(Settings(store=location)) as ws:
            done = send_from(ws)
        report.sent += done.sent
        report.failed += done.failed
        report.skipped += done.skipped
    return report
