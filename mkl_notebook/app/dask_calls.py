"""Moved to :mod:`mkl_notebook.executors.dask_calls`; the old path names it for one release."""

import sys

from ..executors import dask_calls

sys.modules[__name__] = dask_calls
