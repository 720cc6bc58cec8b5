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


def test_the_install_builds_and_enables_the_jupyterlab_extension() -> None:
    """`pip install -e .` built labextension/ (TypeScript, Jupyter's toolchain) into this environment."""
    import subprocess
    import sys

    listed = subprocess.run(
        [sys.executable, "-m", "jupyter", "labextension", "list"], capture_output=True, text=True, check=True
    )
    line = next((line for line in (listed.stdout + listed.stderr).splitlines() if "mkl-notebook" in line), "")
    assert "enabled" in line and "OK" in line and "(python, mkl-notebook)" in line, listed.stdout + listed.stderr
    built = Path(sys.prefix) / "share" / "jupyter" / "labextensions" / "mkl-notebook" / "package.json"
    assert built.is_file()
