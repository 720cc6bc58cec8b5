"""Which notebook a kernel runs, when no client says (nbclient, papermill, ``jupyter nbconvert --execute``).

Jupyter names the notebook to its kernel (``__session__``) and so does VS Code (``__vsc_ipynb_file__``); a
person can name it (``MKL_NOTEBOOK=PATH``, ``%mkl notebook PATH``). Otherwise the kernel looks in its folder
for the notebooks holding the cell it executes, and takes one only when what the files say (or what the
program that started the kernel was told) leaves a single one; where several stay, it does not guess.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import NamedTuple

from ..checkpoints.notebook_cells import code_cells, papermill_writing
from ..checkpoints.notebook_disk import NotebookFileError

MAX_NOTEBOOKS_LOOKED_AT = 100  # notebooks in a kernel's folder read to find the one it executes
NOTEBOOK_VARIABLE = "MKL_NOTEBOOK"  # the environment variable that names a kernel's notebook


class Found(NamedTuple):
    """The notebook a kernel runs (None: it cannot tell), how it knows, and, when it cannot tell, the
    notebooks in its folder that each hold the cell executing (each may be the one)."""

    path: Path | None
    how: str
    candidates: tuple[Path, ...] = ()

    @property
    def ambiguous(self) -> bool:
        return self.path is None and len(self.candidates) > 1

    def fix(self) -> str:
        """The sentence a person reads when the kernel cannot tell: which notebooks, and how to say which."""
        names = ", ".join(path.name for path in self.candidates)
        return (
            f"This kernel cannot tell which notebook it runs: {names} each hold the cell it executes. Say which "
            f"with `%mkl notebook PATH` in a cell above, or {NOTEBOOK_VARIABLE}=PATH in the environment of the "
            "program that starts the kernel; until then its runs are not written for a file, and no run a file "
            "carries is replaced by one made anew."
        )


def notebooks_holding(code: str, folder: Path) -> list[Path]:
    """The notebooks in ``folder`` (the first ``MAX_NOTEBOOKS_LOOKED_AT`` by name) with a code cell whose source
    is ``code``; unreadable files are passed over."""
    return [path for path in sorted(folder.glob("*.ipynb"))[:MAX_NOTEBOOKS_LOOKED_AT] if _holds(path, code)]


def _written_by_papermill(path: Path, code: str) -> bool:
    """Whether papermill is writing ``path`` as its output while it executes ``code`` (its metadata names the
    file as papermill's output, the run has not ended, and the cell running is this one)."""
    try:
        writing = papermill_writing(path)
    except (NotebookFileError, OSError):
        return False
    return writing is not None and Path(writing[0]).name == path.name and code in writing[1]


def notebook_running(code: str, folder: Path, named: Iterable[Path] = (), program: str = "") -> Found:
    """The notebook a kernel executing ``code`` in ``folder`` runs, as far as the files tell: of the notebooks
    holding a code cell of that source (those in ``folder``, and those the program that started the kernel,
    ``program``, was given by name, ``named``: resolved paths, in any folder),

    - the only one;
    - else the only one of them named on the program's command line (``jupyter nbconvert --execute X.ipynb``
      names X.ipynb): a file merely lying in the folder never wins over the one a person named;
    - else, of those named (papermill names its input and its output) or, when none is, of all, the one
      papermill is writing now (it names itself as papermill's ``output_path`` and marks this cell as running):
      that is where the run's outputs go and where a person will look for them;
    - else none: the kernel cannot tell, and :class:`Found` lists them.
    """
    wanted = {path.resolve() for path in named}
    holding = notebooks_holding(code, folder)
    seen = {path.resolve() for path in holding}
    holding += [path for path in sorted(wanted - seen) if _holds(path, code)]
    if not holding:
        return Found(None, f"no notebook in {folder} holds the cell executing now")
    if len(holding) == 1:
        return Found(holding[0], f"the one notebook in {folder} that holds the cells it executes")
    given = [path for path in holding if path.resolve() in wanted]
    if len(given) == 1:
        return Found(given[0], f"named to {program or 'the program'} that started this kernel")
    written = [path for path in (given or holding) if _written_by_papermill(path, code)]
    if len(written) == 1:
        return Found(written[0], "papermill is writing its output there (metadata.papermill.output_path)")
    return Found(None, "several notebooks in its folder hold the cells it executes", tuple(holding))


def _holds(path: Path, code: str) -> bool:
    """Whether the notebook at ``path`` has a code cell whose source is ``code`` (an unreadable file has none)."""
    try:
        return path.is_file() and any(source == code for _, source in code_cells(path))
    except (NotebookFileError, OSError):
        return False


def named_notebook(chosen: str | None, folder: Path) -> Found | None:
    """The notebook a person named (``%mkl notebook PATH``, else ``MKL_NOTEBOOK``), relative to ``folder``; None
    when none is named."""
    for name, how in ((chosen, "named by %mkl notebook"), (os.environ.get(NOTEBOOK_VARIABLE), NOTEBOOK_VARIABLE)):
        if name:
            path = folder / Path(name).expanduser()
            if path.is_file():
                return Found(path, how)
            return Found(None, f"{how} names {name}, which is not a file")
    return None
