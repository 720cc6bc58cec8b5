"""README's commands are the ones CI runs."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from browser_support import CHROMIUM_ENV, INSTALL_CHROMIUM

ROOT = Path(__file__).resolve().parent.parent


def test_ci_runs_exactly_the_readme_test_command() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    ci_lines = (ROOT / ".ci" / "run").read_text(encoding="utf-8").strip().splitlines()
    test_command = ci_lines[-1]
    assert "pytest" in test_command
    assert f"\n{test_command}\n" in readme


def test_the_install_enables_the_committed_jupyterlab_extension() -> None:
    """`pip install -e .` installed the committed build of labextension/ (mkl_notebook/labextension/) here."""

    listed = subprocess.run(
        [sys.executable, "-m", "jupyter", "labextension", "list"], capture_output=True, text=True, check=True
    )
    line = next((line for line in (listed.stdout + listed.stderr).splitlines() if "mkl-notebook" in line), "")
    assert "enabled" in line and "OK" in line and "(python, mkl-notebook)" in line, listed.stdout + listed.stderr
    built = Path(sys.prefix) / "share" / "jupyter" / "labextensions" / "mkl-notebook" / "package.json"
    assert built.is_file()


def test_installing_from_a_checkout_needs_no_node() -> None:
    """The extension is committed built: building the package needs hatchling only, no Node.js from PyPI, no
    jupyter-builder and no build hook that would run jlpm (tests/test_labextension_build.py keeps the build true)."""
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        import tomli as tomllib

    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert [name.split(">")[0] for name in pyproject["build-system"]["requires"]] == ["hatchling"]
    assert "hooks" not in pyproject["tool"]["hatch"]["build"]
    shared = pyproject["tool"]["hatch"]["build"]["targets"]["wheel"]["shared-data"]
    assert shared["mkl_notebook/labextension"] == "share/jupyter/labextensions/mkl-notebook"
    assert (ROOT / "mkl_notebook" / "labextension" / "package.json").is_file()


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


BROWSER_TESTS = ["tests/test_browser.py", "tests/test_voila.py", "tests/test_diagram_frontends.py"]
BROWSER_TESTS += ["tests/test_static_exports.py"]


def _browser_tests_without_chromium(ci: str | None) -> subprocess.CompletedProcess[str]:
    """The browser tests, run as the README runs the suite, on a machine whose Chromium is nowhere."""
    env = {key: value for key, value in os.environ.items() if key != "CI"}
    env[CHROMIUM_ENV] = str(ROOT / "no-such-folder" / "chromium")
    if ci is not None:
        env["CI"] = ci
    command = [sys.executable, "-m", "pytest", "-m", "browser", "-p", "no:cacheprovider", *BROWSER_TESTS]
    return subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, check=False, timeout=300)


def test_without_chromium_the_browser_tests_are_skipped_with_one_line_naming_the_install() -> None:
    ran = _browser_tests_without_chromium(None)
    assert ran.returncode == 0, ran.stdout[-3000:]
    skipped = int(re.search(r"(\d+) skipped", ran.stdout).group(1))  # type: ignore[union-attr]
    assert skipped >= 20 and " passed" not in ran.stdout and "failed" not in ran.stdout, ran.stdout[-3000:]
    named = [line for line in ran.stdout.splitlines() if INSTALL_CHROMIUM in line]
    assert len(named) == 1, ran.stdout[-3000:]
    assert named[0].startswith(f"SKIPPED [{skipped}] ") and "no-such-folder/chromium" in named[0]


def test_under_ci_a_missing_chromium_fails_every_browser_test() -> None:
    ran = _browser_tests_without_chromium("true")
    assert ran.returncode == 1, ran.stdout[-3000:]
    assert "skipped" not in ran.stdout and " passed" not in ran.stdout, ran.stdout[-3000:]
    failed = [line for line in ran.stdout.splitlines() if line.startswith("ERROR tests/")]
    assert len(failed) >= 20 and all(INSTALL_CHROMIUM in line and "CI is set" in line for line in failed)
