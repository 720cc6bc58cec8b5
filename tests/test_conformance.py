"""Every mklang conformance case passes through the public scenario runner."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from mkl_notebook.testing import load_cases, run_scenario

HERE = Path(__file__).parent
VENDORED = HERE / "conformance" / "cases"
SHARED = HERE.parent.parent / "shared" / "conformance" / "cases"


def _case_files() -> list[Path]:
    by_name: dict[str, Path] = {path.name: path for path in sorted(VENDORED.glob("*.yaml"))}
    if SHARED.is_dir():
        for path in sorted(SHARED.glob("*.yaml")):
            by_name.setdefault(path.name, path)
    return [by_name[name] for name in sorted(by_name)]


CASE_FILES = _case_files()


def test_the_whole_suite_is_here() -> None:
    assert len(CASE_FILES) >= 33


@pytest.mark.parametrize("path", CASE_FILES, ids=[path.stem for path in CASE_FILES])
def test_case(path: Path) -> None:
    (scenario,) = load_cases([path])
    outcome = run_scenario(scenario)
    assert outcome.passed, outcome.why


def test_cli_runs_the_suite_and_prints_one_line_per_case() -> None:
    completed = subprocess.run(
        [sys.executable, "-m", "mkl_notebook.cli", "test", "--case", *map(str, CASE_FILES)],
        capture_output=True,
        text=True,
        check=False,
    )
    lines = completed.stdout.strip().splitlines()
    assert completed.returncode == 0, completed.stdout + completed.stderr
    assert lines[-1] == f"{len(CASE_FILES)} passed, 0 failed"
    assert all(line.startswith("PASS ") for line in lines[:-1])
    assert len(lines) == len(CASE_FILES) + 1


def test_identical_shared_copy() -> None:
    """The vendored copy must not drift from the suite it was taken from."""
    if not SHARED.is_dir():
        return
    for path in sorted(VENDORED.glob("*.yaml")):
        shared = SHARED / path.name
        assert shared.exists(), f"{path.name} is no longer in the shared suite"
        assert shared.read_bytes() == path.read_bytes(), f"{path.name} differs from the shared suite"


PARITY_FILES = sorted((HERE / "parity").glob("*.yaml"))


@pytest.mark.parametrize("path", PARITY_FILES, ids=[path.stem for path in PARITY_FILES])
def test_parity_with_the_reference(path: Path) -> None:
    """Cases where the reference and this engine once differed; each expects the reference's outcome."""
    (scenario,) = load_cases([path])
    outcome = run_scenario(scenario)
    assert outcome.passed, outcome.why
