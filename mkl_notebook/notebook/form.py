"""The approval form, now :mod:`mkl_notebook.notebook.forms`; this path is kept for one release."""

from __future__ import annotations

from ..app.errors import Superseded
from .forms import GateForm, QuestionForm, TakeUpChoice

__all__ = ["GateForm", "QuestionForm", "Superseded", "TakeUpChoice"]
