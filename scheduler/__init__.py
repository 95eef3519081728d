"""Where and when to compute: strategies, task graphs, the Dask executor."""
