"""Moved to :mod:`mkl_notebook.checkpoints.notebook_file`; the old path names it for one release."""

import sys

from ..checkpoints import notebook_file

sys.modules[__name__] = notebook_file
