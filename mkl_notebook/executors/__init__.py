"""Where a run's calls are made when not here: a Dask distributed cluster (calls ship; each run and its
journal stay with the process that owns them)."""
