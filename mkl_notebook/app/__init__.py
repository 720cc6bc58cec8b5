"""The one application layer under the ``mkl`` command and the ``%mkl`` magics.

Every rule both front ends follow lives here once: which oracle answers a run (and
whether a model can be called at all), how ``--reply`` / ``--set`` / a form's value become
a reply, ``--resolve`` and budget flags, which mistakes are the user's, and what a run's
status line and display output carry. Nothing here imports Jupyter.
"""
