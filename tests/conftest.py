"""Fixtures for the tests that drive the magics in a real IPython shell."""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from browser_support import require_chromium
from IPython.core.interactiveshell import InteractiveShell

from mkl_notebook.notebook import session as session_module

from support import MODEL_ENV, ROOT, Cells, Recorder

# The tests' signing keys and trusted keys, never the person's own (subprocesses inherit it).
os.environ["JUPYTER_DATA_DIR"] = tempfile.mkdtemp(prefix="mkl-test-jupyter-data-")
# As in an activated venv: this installation's `mkl` is on PATH, so printed commands start with plain `mkl`
# whichever way pytest was started (tests/test_paste.py takes it off PATH to check the other spelling).
os.environ["PATH"] = os.pathsep.join([os.path.dirname(sys.executable), os.environ.get("PATH", "")])


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "browser: drives Chromium; skipped without it, failed without it under CI")


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """A test marked ``browser`` is skipped (under CI: failed) before any of its fixtures starts a server or
    executes a notebook, when there is no Chromium to drive."""
    if item.get_closest_marker("browser") is not None:
        require_chromium()


@pytest.fixture(scope="session")
def shell() -> InteractiveShell:
    return InteractiveShell.instance()


@pytest.fixture
def load_mkl(
    shell: InteractiveShell, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Callable[[Callable[..., Any]], Any]]:
    """``load_mkl(publish)`` loads the extension afresh in ``tmp_path`` with no model configured.

    Everything the shell displays goes to ``publish``; the return value is the magics object.
    """
    monkeypatch.chdir(tmp_path)
    for name in MODEL_ENV:
        monkeypatch.delenv(name, raising=False)
    session_module._SESSION = None

    def load(publish: Callable[..., Any]) -> Any:
        shell.extension_manager.loaded.discard("mkl_notebook")
        monkeypatch.setattr(shell.display_pub, "publish", publish)
        result = shell.run_cell("%load_ext mkl_notebook")
        assert result.success, result.error_in_exec
        return shell.magics_manager.registry["MklMagics"]

    yield load
    session_module._SESSION = None


@pytest.fixture
def ip(shell: InteractiveShell, load_mkl: Any, tmp_path: Path) -> Cells:
    recorder = Recorder()
    load_mkl(recorder.publish)
    return Cells(shell, recorder, tmp_path)


@pytest.fixture(scope="module")
def waiting(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A notebook run as JupyterLab runs it (no extension): its refund run waits at the first question, and
    the run lives in the run cell's output only (the metadata tests' and the page link tests')."""
    import shutil

    import nbformat
    from lab_client import run_all

    data = ROOT / "notebooks" / "data"
    folder = tmp_path_factory.mktemp("made")
    for name in ("refund.mkl", "refund.script.yaml"):
        shutil.copy(data / name, folder / name)
    cells = [
        nbformat.v4.new_code_cell("%load_ext mkl_notebook"),
        nbformat.v4.new_code_cell("%%mkl\n" + (data / "refund.mkl").read_text(encoding="utf-8")),
        nbformat.v4.new_code_cell("%mkl run refund --id r --script refund.script.yaml --set ticket=broken"),
    ]
    path = folder / "shared.ipynb"
    nbformat.write(nbformat.v4.new_notebook(cells=cells), path)
    run_all(path)
    shutil.rmtree(folder / ".mkl")  # the file alone carries the run
    return path


@pytest.fixture(scope="session")
def postgres() -> Iterator[Any]:
    """A PostgreSQL server the tests start (tests/postgres_server.py); skipped without one (failed under CI)."""
    from postgres_server import PostgresServer, ServerUnavailable, missing

    try:
        import psycopg  # noqa: F401
        import psycopg_pool  # noqa: F401
    except ImportError:
        missing("psycopg is not installed: pip install 'mkl-notebook[postgres]'")
    try:
        server = PostgresServer()
    except ServerUnavailable as why:
        missing(str(why))
    try:
        yield server
    finally:
        server.stop()


STORE_KINDS = ("memory", "sqlite", "postgres")


@pytest.fixture(params=STORE_KINDS)
def store_at(request: pytest.FixtureRequest, tmp_path: Path) -> Callable[..., Any]:
    """``store_at()``: a store of one kind (memory, SQLite, PostgreSQL), and each call another one on the same
    runs (the same file, the same database; for memory, the same store). ``store_at.location``: what opens it."""
    from mkl_notebook.durable.store_opening import open_store
    from mkl_notebook.durable.stores import MemoryStore

    if request.param == "memory":
        memory = MemoryStore()

        def opened(**_: Any) -> Any:
            return memory

        opened.location = None  # type: ignore[attr-defined]
        opened.kind = "memory"  # type: ignore[attr-defined]
        return opened
    if request.param == "sqlite":
        location = str(tmp_path / "runs.sqlite")
    else:
        location = request.getfixturevalue("postgres").database()
    made: list[Any] = []

    def opened_at(**options: Any) -> Any:
        store = open_store(location, **options)
        made.append(store)
        return store

    opened_at.location = location  # type: ignore[attr-defined]
    opened_at.kind = request.param  # type: ignore[attr-defined]
    request.addfinalizer(lambda: [store.close() for store in made])
    return opened_at
