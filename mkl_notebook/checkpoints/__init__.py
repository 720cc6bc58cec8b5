"""Runs that travel in files: the checkpoint envelope (a run's journal, verified and sealed), the seals that
say who made it, the shapes every field of it must have, and the notebook file that carries it."""
