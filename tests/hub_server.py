"""A real JupyterHub for the tests: the Hub, its proxy (configurable-http-proxy, from npm) and a single-user
JupyterLab per person it spawns as a local process in a home folder of their own, all on loopback ports.

Its configuration is the ``jupyterhub_config.py`` example of docs/howto/teams.md, read from the page and run as
written, then given what a test machine needs: loopback ports, the Hub's own database in the test's folder, a
shared password (``SharedPasswordAuthenticator``), and the test's PostgreSQL store in place of the example's.

Without the proxy (``npm install --prefix .ci/node configurable-http-proxy@4``, as ``.ci/run`` does) or without
JupyterHub the test is skipped in one line naming the install; under CI (``$CI`` set) it fails instead.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

from browser_support import checkout_extension, free_port, lab_env
from postgres_server import missing

ROOT = Path(__file__).resolve().parent.parent
PROXY_PREFIX = ROOT / ".ci" / "node"  # where .ci/run installs configurable-http-proxy
INSTALL_PROXY = "npm install --prefix .ci/node --no-audit --no-fund configurable-http-proxy@4"
PASSWORD = "hub-Shared-7c2e91"  # every test user's, at the Hub's login form
TEAMS_PAGE = ROOT / "docs" / "howto" / "teams.md"
# What each person's server is started with beyond the Hub's own: as browser_support.serve starts a Lab.
SERVER_ARGS = [
    "--ServerApp.terminals_enabled=False",
    "--LabApp.news_url=None",
    "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
    "--LabApp.extension_manager=readonly",
]
# The variables of a person's Lab environment (browser_support.lab_env) that their server is given.
PASSED = (
    "JUPYTER_CONFIG_DIR",
    "JUPYTER_DATA_DIR",
    "JUPYTER_RUNTIME_DIR",
    "JUPYTERLAB_SETTINGS_DIR",
    "JUPYTERLAB_WORKSPACES_DIR",
    "IPYTHONDIR",
    "JUPYTER_PATH",
    "PATH",
)


def proxy_command() -> str:
    """configurable-http-proxy as ``.ci/run`` installs it (else the first on PATH); the test is skipped (failed
    under CI) without it, in one line naming the install."""
    local = PROXY_PREFIX / "node_modules" / ".bin" / "configurable-http-proxy"
    found = str(local) if local.exists() else shutil.which("configurable-http-proxy")
    if found is None:
        missing(f"no configurable-http-proxy (JupyterHub's proxy): install it with `{INSTALL_PROXY}`")
    try:
        import jupyterhub  # noqa: F401
    except ImportError:
        missing("JupyterHub is not installed: pip install -e '.[test]'")
    return str(found)


def teams_example() -> str:
    """The ``jupyterhub_config.py`` example of docs/howto/teams.md, as the page gives it."""
    page = TEAMS_PAGE.read_text(encoding="utf-8")
    [example] = re.findall(r"```python\n(# jupyterhub_config\.py\n.*?)```", page, flags=re.S)
    return example


def _config(folder: Path, users: dict[str, dict[str, str]], store: str, password: str, ports: list[int]) -> str:
    """The Hub's ``jupyterhub_config.py``: the how-to's example, then what this machine needs."""
    hub, hub_api, proxy_api = ports
    environments = {name: {key: env[key] for key in PASSED if key in env} for name, env in users.items()}
    server_args = [*SERVER_ARGS, *(["--allow-root"] if os.geteuid() == 0 else [])]
    return f"""\
c = get_config()  # noqa: F821
{teams_example()}
# The test's store on its PostgreSQL server (its password in each server's environment, as the how-to says),
# in place of the example's server; the rest of the example stands as written.
c.Spawner.environment["MKL_STORE"] = {store!r}
c.Spawner.environment["PGPASSWORD"] = {password!r}
PEOPLE = {json.dumps(environments)}
for variable in {list(PASSED)!r}:
    c.Spawner.environment[variable] = lambda spawner, variable=variable: PEOPLE[spawner.user.name].get(variable, "")
c.Spawner.environment["PYTHONPATH"] = {os.environ.get("PYTHONPATH", "")!r}
c.Spawner.cmd = [{sys.executable!r}, "-m", "jupyterhub.singleuser"]
c.Spawner.args = {server_args!r}
c.Spawner.default_url = "/lab"
c.Spawner.start_timeout = 90
c.Spawner.http_timeout = 90
c.JupyterHub.spawner_class = "simple"
c.SimpleLocalProcessSpawner.home_dir_template = {str(folder / "home" / "{username}")!r}
c.JupyterHub.authenticator_class = "shared-password"
c.SharedPasswordAuthenticator.user_password = {PASSWORD!r}
c.Authenticator.allowed_users = {set(users)!r}
c.JupyterHub.ip = "127.0.0.1"
c.JupyterHub.port = {hub}
c.JupyterHub.hub_ip = "127.0.0.1"
c.JupyterHub.hub_port = {hub_api}
c.ConfigurableHTTPProxy.api_url = "http://127.0.0.1:{proxy_api}"
c.ConfigurableHTTPProxy.command = [{proxy_command()!r}]
c.JupyterHub.db_url = "sqlite:///{folder / "jupyterhub.sqlite"}"
c.JupyterHub.cookie_secret_file = {str(folder / "jupyterhub_cookie_secret")!r}
c.JupyterHub.pid_file = {str(folder / "jupyterhub.pid")!r}
c.JupyterHub.cleanup_servers = True
"""


def home(folder: Path, name: str) -> Path:
    """``name``'s home folder (their server's root) under the Hub's ``folder``."""
    return folder / "home" / name


@contextlib.contextmanager
def jupyterhub(folder: Path, names: list[str], store: str, password: str) -> Iterator[str]:
    """A JupyterHub for the people ``names`` (each with a home folder under ``folder``, made before: write their
    notebooks there), every server on the PostgreSQL ``store`` (a URL without its ``password``), until the
    block ends: the Hub's address, once it answers."""
    users = {}
    for name in names:
        env = lab_env(folder / "lab" / name)
        checkout_extension(env)
        users[name] = env
        home(folder, name).mkdir(parents=True, exist_ok=True)
    ports = [free_port() for _ in range(3)]
    config = folder / "jupyterhub_config.py"
    config.write_text(_config(folder, users, store, password, ports), encoding="utf-8")
    log_path = folder / "jupyterhub.log"
    log = open(log_path, "w")  # noqa: SIM115 - closed below
    env = {key: value for key, value in os.environ.items() if not key.startswith(("MKL_", "JUPYTERHUB_", "PG"))}
    hub = subprocess.Popen(
        [sys.executable, "-m", "jupyterhub", "-f", str(config)],
        cwd=folder,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,  # its proxy and the servers it spawned are stopped with it, below
    )
    base = f"http://127.0.0.1:{ports[0]}"
    try:
        deadline = time.monotonic() + 60
        while True:  # polled: the Hub answers once it and its proxy are up
            try:
                urllib.request.urlopen(f"{base}/hub/health", timeout=5).close()
                break
            except OSError:
                if hub.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"the Hub did not start:\n{log_path.read_text()[-3000:]}") from None
                time.sleep(0.2)
        yield base
    finally:
        hub.send_signal(signal.SIGTERM)  # the Hub stops the servers it spawned and its proxy (cleanup_servers)
        try:
            hub.wait(timeout=30)
        except subprocess.TimeoutExpired:
            hub.kill()
        with contextlib.suppress(ProcessLookupError):
            os.killpg(hub.pid, signal.SIGKILL)  # whatever of its session is left
        log.close()
