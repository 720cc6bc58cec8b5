"""The gates every change passes: mypy over the package, ruff's lints and its formatting.

They run inside the test suite so that the README's one test command (what CI runs) holds them.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", *args], cwd=ROOT, capture_output=True, text=True, check=False)


def test_mypy_finds_no_errors_in_the_package() -> None:
    completed = run("mypy")  # files and settings: [tool.mypy] in pyproject.toml
    assert completed.returncode == 0, completed.stdout[-4000:] + completed.stderr[-2000:]


def test_ruff_finds_nothing_to_lint() -> None:
    completed = run("ruff", "check", ".")
    assert completed.returncode == 0, completed.stdout[-4000:]


def test_the_code_is_ruff_formatted() -> None:
    completed = run("ruff", "format", "--check", ".")
    assert completed.returncode == 0, completed.stdout[-4000:]
