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


def test_the_malicious_litellm_uploads_can_never_be_installed_and_current_releases_can() -> None:
    """litellm 1.82.7 and 1.82.8 were compromised uploads: the pin names them, not just a range around them."""
    from packaging.requirements import Requirement

    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        import tomli as tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    requirements = {Requirement(text).name: Requirement(text) for text in project["dependencies"]}
    litellm = requirements["litellm"].specifier
    assert {"!=1.82.7", "!=1.82.8"} <= {str(spec) for spec in litellm}
    assert not litellm.contains("1.82.7") and not litellm.contains("1.82.8")
    assert litellm.contains("1.82.6") and litellm.contains("1.110.2")  # before them, and nine months of fixes
    from importlib.metadata import version

    assert litellm.contains(version("litellm"))  # what this environment installed
