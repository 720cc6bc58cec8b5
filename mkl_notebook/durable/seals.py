"""Moved to :mod:`mkl_notebook.checkpoints.seals`; the old path names it for one release."""

import sys

from ..checkpoints import seals

sys.modules[__name__] = seals
