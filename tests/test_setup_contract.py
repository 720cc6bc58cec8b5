"""README's commands are the ones CI runs."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_ci_runs_exactly_the_readme_test_command() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    ci_lines = (ROOT / ".ci" / "run").read_text(encoding="utf-8").strip().splitlines()
    test_command = ci_lines[-1]
    assert "pytest" in test_command
    assert f"\n{test_command}\n" in readme
