"""mkl_notebook: run mkl (mklang 0.4) LLM state machines in Jupyter, durably, with human approval forms.

Importing this package is cheap: nothing heavy (no litellm, no Jupyter) loads until used.
"""

from __future__ import annotations

__version__ = "0.1.0"

from .host import hook, tool

__all__ = ["__version__", "hook", "tool"]
