"""Moved to :mod:`mkl_notebook.checkpoints.envelope`; the old path names it for one release."""

import sys

from ..checkpoints import envelope

sys.modules[__name__] = envelope
