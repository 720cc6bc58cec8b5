"""Sphinx configuration of the mkl_notebook documentation (``sphinx-build -W -n -b html docs docs/_build/html``).

Sphinx with MyST (myst-parser, and myst-nb for the notebooks) is the Jupyter ecosystem's convention: Jupyter,
JupyterLab, ipywidgets and nbclient document themselves so, with pydata-sphinx-theme. Pages stay Markdown that
GitHub shows as well; the tutorials are notebooks/*.ipynb, rendered with the outputs they were committed with
(never executed here).
"""

from __future__ import annotations

import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parent
sys.path.insert(0, str(DOCS / "_ext"))
sys.path.insert(0, str(DOCS.parent))  # the package documented is this checkout's

project = "mkl_notebook"
author = "mkl_notebook developers"
copyright = "mkl_notebook developers"

extensions = ["myst_nb", "sphinx.ext.autodoc", "mkl_reference"]
source_suffix = {".md": "myst-nb", ".ipynb": "myst-nb"}
exclude_patterns = ["_build", "_ext", "Thumbs.db", ".DS_Store"]

myst_heading_anchors = 3
smartquotes = False  # a flag is `--script`, never an en dash; a quote stays the character one types
myst_enable_extensions = ["colon_fence", "deflist"]
nb_execution_mode = "off"  # the tutorials are committed with their outputs; building never runs a kernel
# A run's form is a live widget: without its kernel it would answer nothing, so a page shows the question and the
# commands that answer it (the output's HTML beside it) and loads no widget script (nor any from a CDN). The
# outputs' application/vnd.mkl.* markers are read only by the JupyterLab extension; myst-nb reports each as an
# unknown type, which is all that warning class can say about these notebooks.
nb_ipywidgets_js: dict[str, dict[str, str]] = {}
suppress_warnings = ["mystnb.unknown_mime_type"]

# autodoc shows the public API's signatures with their types; these are the engine's own types, which the API pages
# name but do not document (each is internal and may change), and two the standard library's docs would resolve.
nitpick_ignore = [
    ("py:class", name)
    for name in (
        "Machine",
        "mkl_notebook.lang.model.Machine",
        "mkl_notebook.durable.runs.Resolution",
        "mkl_notebook.durable.places.Place",
        "os.PathLike",
        "collections.abc.Callable",
        "collections.abc.Mapping",
        "collections.abc.Sequence",
        "mkl_notebook.providers.host.F",
        "mkl_notebook.app.handle.RunHost",
        "mkl_notebook.engine.oracle.Oracle",
        "mkl_notebook.engine.result.TraceStep",
        "mkl_notebook.app.batch.RowRun",
        "mkl_notebook.notebook.session.KernelNotebook",
        "mkl_notebook.durable.runs.Observer",
    )
]
autodoc_member_order = "bysource"

html_theme = "pydata_sphinx_theme"
html_static_path = ["_static"]
html_title = "mkl_notebook"
