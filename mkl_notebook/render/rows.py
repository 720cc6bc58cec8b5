"""How much of a long list a view shows: numbers ``mkl --help`` states, in a module that imports nothing.

A list in a view (a trace's steps, a step's branches or sub-runs, the live line's branches) of at most
WHOLE_ROWS entries is shown whole; a longer one shows its first FIRST_ROWS and last LAST_ROWS entries
and says how many it leaves out, so that a notebook's saved output stays small whatever the run.
"""

WHOLE_ROWS = 50
FIRST_ROWS = 20
LAST_ROWS = 20
