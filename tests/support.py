"""What several test modules share: the worked refund example, MIME types and a clean model environment."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml
from IPython.core.error import UsageError
from IPython.core.interactiveshell import InteractiveShell

import mkl_notebook
from mkl_notebook.app.handle import Run
from mkl_notebook.notebook.display import RunView
from mkl_notebook.providers.config import ENVIRONMENT

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
REFUND = (EXAMPLES / "refund.mkl").read_text(encoding="utf-8")
REFUND_SCRIPT = EXAMPLES / "refund.script.yaml"
REFUND_TESTS = EXAMPLES / "refund.test.yaml"
REFUND_RESULT = "Hello! Your order A-1001 qualifies: we will refund it today. (approved)"
REFUND_ASK = "The draft promises a refund. Approve sending it?"
# A tool's observation, then a model call that uses it.
LOOKUP = """
machine: lookup_then_write
entry: a
budget: 5
states:
  a:
    tool: lookup
    input: { q: "x" }
    output: found
    gates:
      - { when: otherwise, then: ok, to: b }
  b:
    structure: s
    prompt: "use {{found}}"
    output: used
    gates:
      - { when: otherwise, then: ok, to: END }
"""

RUN_MIME = "application/vnd.mkl.run+json"
WIDGET_MIME = "application/vnd.jupyter.widget-view+json"
MODEL_ENV = tuple(ENVIRONMENT)  # the variables that would point a run at a real model


def chain_source(states: int) -> str:
    """The text of a machine of ``states`` generative states one after another, s0 to s{states - 1}, then END."""
    lines = [f'machine: chain\nmklang: "0.4"\nentry: s0\nbudget: {states + 5}\nstates:']
    for index in range(states):
        to = f"s{index + 1}" if index + 1 < states else "END"
        gate = f"{{when: otherwise, then: ok, to: {to}}}"
        lines.append(f"  s{index}: {{structure: s, prompt: p{index}, output: o, gates: [{gate}]}}")
    return "\n".join(lines) + "\n"


def fetch_page_interrupted_once() -> list[str]:
    """Register the read tool ``fetch_page``, which a person interrupts during its first call (as Interrupt
    in a notebook does) and which answers "the page" after; its calls, in order."""
    calls: list[str] = []

    @mkl_notebook.tool(effect="read")
    def fetch_page() -> str:
        calls.append("fetch")
        if len(calls) == 1:
            raise KeyboardInterrupt
        return "the page"

    return calls


def env_without_models() -> dict[str, str]:
    """This process's environment minus every model setting: a subprocess that must stay offline."""
    return {key: value for key, value in os.environ.items() if key not in MODEL_ENV}


def record_presented(magics: Any, monkeypatch: pytest.MonkeyPatch) -> list[RunView]:
    """The views the magics draw runs in, in order."""
    presented: list[RunView] = []
    present = magics.present

    def recording_present(run: Run, view: RunView) -> None:
        presented.append(view)
        present(run, view)

    monkeypatch.setattr(magics, "present", recording_present)
    return presented


def mkl_cli(
    folder: Path, *args: str, env: dict[str, str] | None = None, timeout: int = 120
) -> tuple[int, dict[str, Any], str, str]:
    """``mkl ARGS`` run offline in ``folder`` (``env`` added to the environment): the exit code, the JSON
    status line (or {} when the last line is none), stdout and stderr."""
    done = subprocess.run(
        [sys.executable, "-m", "mkl_notebook.cli", *args],
        cwd=folder,
        env={**env_without_models(), **(env or {})},
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    lines = done.stdout.strip().splitlines()
    status = json.loads(lines[-1]) if lines and lines[-1].startswith("{") else {}
    return done.returncode, status, done.stdout, done.stderr


def mkl_on_a_terminal(args: list[str], cwd: Path, env: dict[str, str], timeout: int = 120) -> str:
    """``mkl ARGS`` with its stdout on a pseudo-terminal (as a person at a terminal sees it): everything it
    printed there. It must succeed."""
    import pty

    main, secondary = pty.openpty()
    process = subprocess.Popen(
        [sys.executable, "-m", "mkl_notebook.cli", *args], stdout=secondary, stderr=subprocess.PIPE, cwd=cwd, env=env
    )
    os.close(secondary)
    output = b""
    while True:
        try:
            chunk = os.read(main, 4096)
        except OSError:  # the terminal closed: the process has finished writing
            break
        if not chunk:
            break
        output += chunk
    os.close(main)
    assert process.wait(timeout=timeout) == 0, process.stderr.read() if process.stderr else ""
    return output.decode("utf-8").replace("\r\n", "\n")


def store_rows(path: Path) -> list[tuple[Any, ...]]:
    """Every journal row of a SQLite run store, in order ([] when there is no store)."""
    if not path.exists():
        return []
    with sqlite3.connect(path) as db:
        return db.execute("SELECT * FROM records ORDER BY run_id, seq").fetchall()


# -- a shell running cells, and what it publishes ----------------------------------------------------


@dataclass
class Published:
    data: dict[str, Any]
    display_id: str | None
    update: bool


@dataclass
class Recorder:
    published: list[Published] = field(default_factory=list)

    def publish(self, data: dict[str, Any], metadata: Any = None, *args: Any, **kwargs: Any) -> None:
        transient = kwargs.get("transient") or {}
        self.published.append(Published(dict(data), transient.get("display_id"), bool(kwargs.get("update"))))

    def clear(self) -> None:
        self.published.clear()

    def with_mime(self, mime: str) -> list[dict[str, Any]]:
        return [p.data for p in self.published if mime in p.data]

    def last(self, mime: str) -> dict[str, Any]:
        found = self.with_mime(mime)
        assert found, f"no output carried {mime}; published: {[list(p.data) for p in self.published]}"
        return found[-1]


@dataclass
class Cells:
    """A shell with mkl loaded, the bundles it published and helpers to run cells."""

    shell: InteractiveShell
    out: Recorder
    tmp: Path

    def run(self, source: str) -> Any:
        result = self.shell.run_cell(source)
        if result.error_in_exec is not None or result.error_before_exec is not None:
            raise AssertionError(f"cell failed: {source!r}: {result.error_in_exec or result.error_before_exec!r}")
        return result

    def fails(self, source: str) -> UsageError:
        result = self.shell.run_cell(source)
        error = result.error_in_exec
        assert error is not None, f"cell did not fail: {source!r}"
        assert type(error) is UsageError, f"{source!r} raised {type(error).__name__}, not UsageError: {error}"
        return error

    def define(self, source: str) -> Any:
        return self.run("%%mkl\n" + source)

    def script(self, name: str, data: dict[str, Any]) -> Path:
        path = self.tmp / name
        path.write_text(yaml.safe_dump(data), encoding="utf-8")
        return path


def refund_notebook(path: Path, runs: dict[str, str], *, first: tuple[str, ...] = ()) -> None:
    """A notebook at ``path`` with the tutorials' refund machine and one cell per entry of ``runs`` (run id ->
    ticket), each leaving its run waiting for a person (scripted answers, copied beside it: no model); the cells
    ``first`` come right after ``%load_ext``."""
    import shutil

    import nbformat

    data = ROOT / "notebooks" / "data"
    notebook = nbformat.v4.new_notebook()
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    notebook.cells = [
        nbformat.v4.new_code_cell("%load_ext mkl_notebook"),
        *(nbformat.v4.new_code_cell(source) for source in first),
        nbformat.v4.new_code_cell("%%mkl\n" + (data / "refund.mkl").read_text(encoding="utf-8")),
        *(
            nbformat.v4.new_code_cell(
                f'%mkl run refund --id {run_id} --set ticket="{ticket}" --script refund.script.yaml'
            )
            for run_id, ticket in runs.items()
        ),
    ]
    nbformat.write(notebook, path)
    if path.parent != data:
        shutil.copy(data / "refund.script.yaml", path.parent / "refund.script.yaml")
