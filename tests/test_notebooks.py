"""The tutorial notebooks execute from a clean folder and their checked outputs still hold (nbval, lax mode)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "notebooks").glob("0*.ipynb"))


def test_the_seven_tutorials_are_there() -> None:
    names = [path.stem for path in NOTEBOOKS]
    assert names == [
        "01-quickstart",
        "02-human-approval",
        "03-share-and-resume",
        "04-diagnostics",
        "05-testing-machines",
        "06-real-models",
        "07-batches",
    ]


def test_notebooks_pass_nbval(tmp_path: Path) -> None:
    """Run in a copy, so no journal from an earlier run makes a re-run replay instead of calling."""
    folder = tmp_path / "notebooks"
    shutil.copytree(ROOT / "notebooks", folder, ignore=shutil.ignore_patterns(".mkl", ".ipynb_checkpoints"))
    env = {key: value for key, value in os.environ.items() if not key.startswith("MKL_")}
    # As the README starts JupyterLab (`.venv/bin/jupyter lab`): the environment is not activated, so its
    # `mkl` is not on PATH. The tutorials must not depend on it.
    venv_bin = str(Path(sys.executable).parent)
    env["PATH"] = os.pathsep.join(part for part in env.get("PATH", "").split(os.pathsep) if part != venv_bin)
    env.pop("VIRTUAL_ENV", None)
    completed = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "--nbval-lax",
            "-p",
            "no:cacheprovider",
            "-q",
            *(str(folder / path.name) for path in NOTEBOOKS),
        ],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert completed.returncode == 0, completed.stdout[-6000:] + completed.stderr[-2000:]
    assert " passed" in completed.stdout


def test_the_batches_tutorial_runs_all_without_dask(tmp_path: Path) -> None:
    """Someone who installed as the README says has no Dask: Run All of tutorial 07 still ends, its Dask part
    saying in one line what to install (Dask is hidden from the kernel here, as if it were not installed)."""
    from lab_client import run_all

    folder = tmp_path / "notebooks"
    shutil.copytree(ROOT / "notebooks", folder, ignore=shutil.ignore_patterns(".mkl", ".ipynb_checkpoints"))
    hide = tmp_path / "no-dask"
    hide.mkdir()
    (hide / "sitecustomize.py").write_text(
        "import sys\n\n\nclass _NoDask:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0] in ('dask', 'distributed'):\n"
        "            raise ModuleNotFoundError(f'No module named {name!r}', name=name)\n"
        "        return None\n\n\n"
        "sys.meta_path.insert(0, _NoDask())\n",
        encoding="utf-8",
    )
    pythonpath = os.pathsep.join(filter(None, [str(hide), os.environ.get("PYTHONPATH")]))
    executed = run_all(folder / "07-batches.ipynb", env={"PYTHONPATH": pythonpath})
    errors = [out for cell in executed.cells for out in cell.get("outputs", []) if out.get("output_type") == "error"]
    assert not errors, errors
    printed = "".join(out.get("text", "") for cell in executed.cells for out in cell.get("outputs", []))
    assert "This part needs Dask: pip install 'mkl-notebook[dask]'" in printed


def test_every_tutorial_reads_the_same_after_restart_and_run_all_twice(tmp_path: Path) -> None:
    """Restart & Run All, then again (as someone does who reopens a tutorial): the notebook saved reads the same
    byte for byte (the second run replays what the first journaled, and no output carries a time or a path
    that changes)."""
    import nbformat
    from lab_client import run_all
    from test_headless_clients import _joined_streams

    folder = tmp_path / "notebooks"
    shutil.copytree(ROOT / "notebooks", folder, ignore=shutil.ignore_patterns(".mkl", ".ipynb_checkpoints"))

    def saved(notebook: nbformat.NotebookNode) -> str:
        # As JupyterLab saves it: without the widgets' state (its "Save Widget State Automatically" is off unless
        # a person turns it on; nbclient stores it, with the ids tqdm's progress bars draw at random), and what a
        # cell printed as printed, however the kernel cut it into stream messages (that depends on its timing).
        notebook.metadata.pop("widgets", None)
        for cell in notebook.cells:
            if cell.cell_type == "code":
                cell.outputs = [nbformat.from_dict(output) for output in _joined_streams(cell.outputs)]
        return nbformat.writes(notebook)

    changed = []
    for path in NOTEBOOKS:
        copy = folder / path.name
        first = saved(run_all(copy))
        second = saved(run_all(copy))
        if first != second:
            changed.append(path.name)
    assert not changed, changed
