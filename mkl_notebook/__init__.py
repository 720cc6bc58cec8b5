"""mkl_notebook: run mkl (mklang 0.4) LLM state machines in Jupyter, durably, with human approval forms.

Importing this package is cheap: Jupyter pieces load with ``%load_ext mkl_notebook``
and litellm only when a real model is first called.
"""

from __future__ import annotations

import os

from ._version import __version__

TYPE_CHECKING = False  # (typing.TYPE_CHECKING, without importing typing: `mkl --help` imports this package)
if TYPE_CHECKING:
    from typing import Any

    from .app.handle import Run
    from .lang.model import Machine
    from .notebook.batch import Batch
    from .providers.host import hook, tool

__all__ = [
    "__version__",
    "define",
    "get_run",
    "hook",
    "load",
    "load_ipython_extension",
    "map",
    "run",
    "tool",
    "unload_ipython_extension",
]


def define(source: str) -> Machine:
    """Define (or redefine) the machine written in ``source`` (YAML) for this session."""
    from .notebook.session import current_session

    return current_session().shelf.define(source)


def load(path: str | os.PathLike[str]) -> Machine:
    """Define (or redefine) the machine in the ``.mkl`` file at ``path`` for this session."""
    from .notebook.session import current_session

    return current_session().shelf.load(path)


def run(name: str, **options: Any) -> Run:
    """Run (or replay) machine ``name``; ``options`` are the fields of
    :class:`~mkl_notebook.app.requests.StartRequest`."""
    from .notebook.session import current_session

    return current_session().start(name, **options)


def map(name: str, over: Any, **options: Any) -> Batch:
    """Run machine ``name`` once per row of ``over`` (a list of dicts, a DataFrame, or a .jsonl, .json or .csv path);
    ``options`` are the fields of :class:`~mkl_notebook.app.requests.MapRequest`."""
    from .notebook.batch import run_batch
    from .notebook.session import current_session

    return run_batch(current_session(), name, over, **options)


def get_run(run_id: str, notebook: str | None = None, script: Any = None, *, trust_file: bool = False) -> Run:
    """A run of this session, its store, or a notebook's saved checkpoints (this one, or ``notebook``).

    ``script`` (a scripted-answers file or mapping) answers the model calls the run still has to make.
    A notebook's checkpoint is taken up only when it is sealed by you or a key you trust (``mkl trust``),
    or ``trust_file`` says to take it up anyway.
    """
    from .notebook.session import current_session

    return current_session().get_run(run_id, notebook, script, trust_file=trust_file)


def __getattr__(name: str) -> Any:
    """``tool`` and ``hook`` (the decorators a tools file uses), imported when first asked for: importing the
    package (as ``mkl --help`` does) loads nothing of the engine."""
    if name in ("tool", "hook"):
        from .providers import host

        return getattr(host, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def load_ipython_extension(ipython: Any) -> None:
    from .notebook.magics import load_magics

    load_magics(ipython)


def unload_ipython_extension(ipython: Any) -> None:
    magics = ipython.magics_manager.magics
    magics["line"].pop("mkl", None)
    magics["cell"].pop("mkl", None)
