"""Moved to :mod:`mkl_notebook.checkpoints.shapes`; the old path names it for one release."""

import sys

from ..checkpoints import shapes

sys.modules[__name__] = shapes
