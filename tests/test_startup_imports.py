"""``mkl --help``, ``mkl SUB --help`` and a usage error build the parser and nothing else (issue 49): no crypto,
model client, widgets, kernel, Dask, YAML, HTTP, store, engine or renderer, and none of the stdlib's slower
modules the application uses; each command imports what it needs when it runs. What it costs is measured in
``benchmarks/startup.py``; these tests hold what it loads, read from ``python -X importtime`` as a person's
terminal would start it.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

# Every module of the package that building the parser and printing its help may load: the package, the command
# line's parser, the flag table, and the defaults and row caps its help states.
PARSER_MODULES = {
    "mkl_notebook",
    "mkl_notebook._version",
    "mkl_notebook.cli",
    "mkl_notebook.cli.__main__",
    "mkl_notebook.cli.parser",
    "mkl_notebook.app",
    "mkl_notebook.app.defaults",
    "mkl_notebook.app.flags",
    "mkl_notebook.durable",
    "mkl_notebook.durable.store_names",
    "mkl_notebook.render",
    "mkl_notebook.render.rows",
}
# What a usage error loads besides, to show its one line: the message without the secrets it may repeat, and
# without anything a terminal would act on.
ERROR_MODULES = {
    "mkl_notebook.render.plain",
    "mkl_notebook.errors",
    "mkl_notebook.app.errors",
    "mkl_notebook.providers",
    "mkl_notebook.providers.secrets",
}
# Packages that have no part in a parser (their first dotted component).
NOT_FOR_THE_PARSER = (
    "cryptography",
    "litellm",
    "ipywidgets",
    "ipykernel",
    "IPython",
    "traitlets",
    "jupyter_client",
    "dask",
    "distributed",
    "yaml",
    "http",
    "sqlite3",
    "json",
    "csv",
    "datetime",
    "threading",
    "pathlib",
    "dataclasses",
    "typing",
    "inspect",
    "opentelemetry",
    "google",  # (protobuf, which OpenTelemetry's exporter brings)
)


def imported_by(where: Path, *arguments: str) -> tuple[list[str], subprocess.CompletedProcess[str]]:
    """The modules ``python -X importtime -m mkl_notebook.cli ARGUMENTS`` imports (run in the folder ``where``),
    in order, and how it ended."""
    return _imported(where, "-m", "mkl_notebook.cli", *arguments)


def _imported(where: Path, *arguments: str) -> tuple[list[str], subprocess.CompletedProcess[str]]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run(
        [sys.executable, "-X", "importtime", *arguments],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=where,
        env=env,
        check=False,
    )
    lines = [line for line in done.stderr.splitlines() if line.startswith("import time:")]
    modules = [line.rsplit("|", 1)[1].strip() for line in lines[1:]]  # (the first line is the header)
    return modules, done


@pytest.fixture(scope="module")
def argparse_loads(tmp_path_factory: pytest.TempPathFactory) -> set[str]:
    """What argparse itself loads to print a help and a usage error, in this Python (a newer one may load more)."""
    program = "import argparse; argparse.ArgumentParser(prog='x').parse_args()"
    where = tmp_path_factory.mktemp("argparse")
    return {name for arguments in (["--help"], ["--bogus"]) for name in _imported(where, "-c", program, *arguments)[0]}


def unneeded(modules: list[str], allowed: set[str], argparse_loads: set[str]) -> list[str]:
    """The modules of ``modules`` a parser has no need of: the package's that are not ``allowed``, and the others
    of :data:`NOT_FOR_THE_PARSER` that argparse does not load itself."""
    ours = [name for name in modules if name.split(".")[0] == "mkl_notebook" and name not in allowed]
    others = [name for name in modules if name.split(".")[0] in NOT_FOR_THE_PARSER and name not in argparse_loads]
    return ours + others


@pytest.mark.parametrize("arguments", [("--help",), ("run", "--help"), ("map", "--help"), ("trust", "--help")])
def test_help_loads_only_the_parser(arguments: tuple[str, ...], tmp_path: Path, argparse_loads: set[str]) -> None:
    modules, done = imported_by(tmp_path, *arguments)
    assert done.returncode == 0 and "usage: mkl" in done.stdout, done.stderr[-2000:]
    assert {"mkl_notebook.cli", "mkl_notebook.app.flags"} <= set(modules)  # (the probe sees the package's imports)
    assert unneeded(modules, PARSER_MODULES, argparse_loads) == []


@pytest.mark.parametrize("arguments", [("runs", "--bogus"), ("run",), ("nope",)])
def test_a_usage_error_loads_only_the_parser_and_what_shows_it(
    arguments: tuple[str, ...], tmp_path: Path, argparse_loads: set[str]
) -> None:
    modules, done = imported_by(tmp_path, *arguments)
    assert done.returncode == 2 and "mkl: error:" in done.stderr, done.stderr[-2000:]
    assert unneeded(modules, PARSER_MODULES | ERROR_MODULES, argparse_loads) == []


def test_a_command_that_runs_loads_what_it_needs(tmp_path: Path) -> None:
    """The other side: a command that runs imports what it uses (here the store's listing), and the probe sees it.
    (``-X importtime`` names no module imported by :func:`importlib.import_module`, as each command's own is: the
    modules that one imports are named.)"""
    modules, done = imported_by(tmp_path, "runs", "no-such-store.sqlite")
    assert done.returncode == 2 and "no such run store" in done.stderr, done.stderr[-2000:]
    assert {"mkl_notebook.cli.common", "mkl_notebook.app.listing"} <= set(modules)


def test_a_run_without_export_loads_no_opentelemetry(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Traces are exported only when asked for: a run with no endpoint configured imports no OpenTelemetry (and the
    probe would see it: the same run exporting does import it, see tests/test_telemetry.py)."""
    for name in [key for key in os.environ if key.startswith("OTEL_")]:
        monkeypatch.delenv(name)
    script = ROOT / "examples" / "refund.script.yaml"
    arguments = ("run", str(ROOT / "examples" / "refund.mkl"), "--script", str(script), "--set", "ticket=broken")
    modules, done = imported_by(tmp_path, *arguments)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "mkl_notebook.durable.runs" in modules  # (it ran)
    assert [name for name in modules if name.split(".")[0] in ("opentelemetry", "google")] == []
