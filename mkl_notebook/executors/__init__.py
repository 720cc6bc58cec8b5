"""Where a run's calls are made when not here: a Dask distributed cluster (calls ship; each run and its
journal stay with the process that owns them).

Importing this package is free: Dask (and the asyncio it needs) loads only with :mod:`.dask`, once chosen.
"""

LOCAL = "dask"  # at the command line: a LocalCluster for the command; in a notebook: its current Client
