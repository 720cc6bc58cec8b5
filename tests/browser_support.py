"""Driving Jupyter servers from tests through Debian's Chromium: the page, the environment of one person's
server (their own config, data and settings folders), and a server of any Jupyter application (JupyterLab,
Notebook 7, Voila) serving a folder until the block ends.

A test that needs the browser is marked ``browser`` (``conftest.py`` then calls :func:`require_chromium`
before its fixtures start a server): on a machine without Chromium it is skipped, with one line naming
the install, unless the ``CI`` environment variable is set, where a missing browser fails it instead.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM_ENV = "MKL_TEST_CHROMIUM"  # the browser to drive, when not Debian's /usr/bin/chromium


def _chromium() -> Path:
    """The Chromium the browser tests drive: ``MKL_TEST_CHROMIUM`` when set, else Debian's package, else the
    first ``chromium`` on PATH (Debian's path is named even when nothing is there, so a message can say it)."""
    named = os.environ.get(CHROMIUM_ENV)
    if named:
        return Path(named)
    debian = Path("/usr/bin/chromium")
    found = shutil.which("chromium")
    return debian if debian.exists() or found is None else Path(found)


CHROMIUM = _chromium()
INSTALL_CHROMIUM = "sudo apt-get install chromium"
BROWSER_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
]


def _in_ci() -> bool:
    """Whether these tests run in CI (``CI`` set, as CI services set it), where every test must run."""
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def require_chromium() -> None:
    """Skip the calling test when there is no Chromium to drive, saying in one line how to install it; fail it
    instead under CI (``.ci/run`` installs the browser, so a missing one there is a broken machine)."""
    if CHROMIUM.is_file() and os.access(CHROMIUM, os.X_OK):
        return
    missing = f"no Chromium at {CHROMIUM}: install it with `{INSTALL_CHROMIUM}` (or name one in {CHROMIUM_ENV})"
    if _in_ci():
        pytest.fail(f"{missing}; CI is set, so the browser tests must run", pytrace=False)
    pytest.skip(f"browser test: {missing}")


@contextlib.contextmanager
def browser_page() -> Iterator[Any]:
    """A page of Debian's Chromium, headless, as every browser test drives it; the browser is closed after."""
    from playwright.sync_api import sync_playwright

    require_chromium()

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=BROWSER_ARGS, headless=True)
        try:
            yield browser.new_page(viewport={"width": 1400, "height": 1000})
        finally:
            browser.close()


@contextlib.contextmanager
def browser_pages(count: int) -> Iterator[list[Any]]:
    """``count`` pages of one headless Chromium, each in a context of its own (its own cookies and storage, as
    two people's browsers have): two people's JupyterLabs open side by side."""
    from playwright.sync_api import sync_playwright

    require_chromium()

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=BROWSER_ARGS, headless=True)
        try:
            yield [browser.new_context(viewport={"width": 1400, "height": 1000}).new_page() for _ in range(count)]
        finally:
            browser.close()


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def get_json(url: str) -> object:
    with urllib.request.urlopen(url, timeout=5) as response:
        return json.loads(response.read())


def kernel_idle(base: str) -> bool:
    """Whether the Jupyter server at ``base`` has a kernel that is idle with a page connected to it."""
    try:
        kernels = get_json(f"{base}/api/kernels")
    except OSError:  # the server may answer 500 while a kernel starts
        return False
    return any(k.get("execution_state") == "idle" and k.get("connections", 0) > 0 for k in kernels)  # type: ignore[union-attr]


def lab_env(folder: Path) -> dict[str, str]:
    """The environment of one person's JupyterLab: Jupyter's config, data (their signing key), runtime and
    settings folders of their own under ``folder``, no model configured, autosave, news and real-time
    collaboration off."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("MKL_")}
    for name in (
        "JUPYTER_CONFIG_DIR",
        "JUPYTER_DATA_DIR",
        "JUPYTER_RUNTIME_DIR",
        "JUPYTERLAB_SETTINGS_DIR",
        "JUPYTERLAB_WORKSPACES_DIR",
        "IPYTHONDIR",
    ):
        env[name] = str(folder / name.lower())
        Path(env[name]).mkdir(parents=True)
    settings = folder / "jupyterlab_settings_dir" / "@jupyterlab" / "docmanager-extension"
    settings.mkdir(parents=True)
    (settings / "plugin.jupyterlab-settings").write_text(json.dumps({"autosave": False}))
    notices = folder / "jupyterlab_settings_dir" / "@jupyterlab" / "apputils-extension"
    notices.mkdir(parents=True)
    (notices / "notification.jupyterlab-settings").write_text(json.dumps({"fetchNews": "false"}))
    # jupyter-collaboration is installed (for the tests of real-time collaboration, which turn it on): a person's
    # own Lab is not shared in real time, and a shared one keeps its documents' updates in its own folder (not the
    # current folder, the checkout).
    server_config = {
        "YDocExtension": {"disable_rtc": True},
        "SQLiteYStore": {"db_path": str(folder / "jupyter_ystore.db")},
    }
    (Path(env["JUPYTER_CONFIG_DIR"]) / "jupyter_server_config.json").write_text(json.dumps(server_config))
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    return env


def checkout_extension(env: dict[str, str]) -> None:
    """Have the Lab of ``env`` load the ``mkl-notebook`` extension as built in this checkout (committed, or
    rebuilt by ``jlpm build:prod`` in labextension/), ahead of the copy installed in the environment: a folder on
    ``JUPYTER_PATH`` comes first on Jupyter's path (the user's data folder comes after the environment's); and
    its server side (the inbox's routes), enabled."""
    built = ROOT / "mkl_notebook" / "labextension"
    assert (built / "package.json").exists(), "no mkl_notebook/labextension/: git checkout it (docs/development/)"
    first = Path(env["JUPYTER_DATA_DIR"]).parent / "checkout_jupyter_path"
    (first / "labextensions").mkdir(parents=True)
    (first / "labextensions" / "mkl-notebook").symlink_to(built, target_is_directory=True)
    env["JUPYTER_PATH"] = os.pathsep.join(filter(None, [str(first), env.get("JUPYTER_PATH")]))
    # The server side of the inbox panel, enabled as the checkout's file says (pip puts it in the environment's
    # etc/jupyter/jupyter_server_config.d, which an older editable install may lack).
    config = Path(env["JUPYTER_DATA_DIR"]).parent / "checkout_jupyter_config" / "jupyter_server_config.d"
    config.mkdir(parents=True)
    (config / "mkl_notebook.json").symlink_to(ROOT / "jupyter-config" / "mkl_notebook.json")
    env["JUPYTER_CONFIG_PATH"] = os.pathsep.join(filter(None, [str(config.parent), env.get("JUPYTER_CONFIG_PATH")]))


@contextlib.contextmanager
def serve(
    root: Path,
    env: dict[str, str],
    log_path: Path,
    app: Sequence[str] = ("jupyter", "lab"),
    ready: str = "/api/status",
    options: Sequence[str] = (),
) -> Iterator[str]:
    """A Jupyter server application (``jupyter lab`` unless ``app`` says otherwise) serving ``root`` with ``env``
    (and the command line ``options`` added), until the block ends: its address, once ``ready`` answers."""
    port = free_port()
    log = open(log_path, "w")  # noqa: SIM115 - closed below
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            *app,
            "--no-browser",
            "--ip=127.0.0.1",
            f"--port={port}",
            "--port-retries=0",
            "--allow-root",
            "--IdentityProvider.token=",
            "--ServerApp.password=",
            f"--ServerApp.root_dir={root}",
            "--ServerApp.terminals_enabled=False",
            "--LabApp.news_url=None",
            "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
            "--LabApp.extension_manager=readonly",
            *options,
        ],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(f"{base}{ready}", timeout=5).close()
                break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(log_path.read_text()[-3000:]) from None
                time.sleep(0.3)
        yield base
    finally:
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            server.kill()
        log.close()
