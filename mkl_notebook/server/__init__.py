"""The Jupyter server's side of the inbox panel: the questions waiting under the server's folder, answering one,
and deciding those past their deadline.

Loaded by Jupyter Server as the extension ``mkl_notebook.server`` (enabled by the file ``pip`` installs into
``etc/jupyter/jupyter_server_config.d``). A front end like the command line and the notebook: it reads requests
and writes JSON, and every use case is the application layer's (:mod:`mkl_notebook.app.inbox`,
:mod:`mkl_notebook.app.inbox_answers`, :mod:`mkl_notebook.app.deadlines`).
"""

from __future__ import annotations

from typing import Any


def _jupyter_server_extension_points() -> list[dict[str, str]]:
    return [{"module": "mkl_notebook.server"}]


def _load_jupyter_server_extension(server_app: Any) -> None:
    """Add the inbox's two routes to the server (``GET /mkl/inbox``, ``POST /mkl/inbox/answer``), and look for
    questions past their deadline under its folder every little while (as ``mkl tick`` does from cron)."""
    from .deadline_ticks import start_ticking
    from .inbox_handlers import routes

    web_app = server_app.web_app
    web_app.add_handlers(".*$", routes(web_app.settings["base_url"], server_app.root_dir))
    start_ticking(server_app.root_dir, server_app.log)
