"""The local cluster the measured benchmarks train on: single-threaded worker processes, one per
device, as `-ll:gpu N` starts without GPUs."""

from __future__ import annotations

import logging

import dask
from distributed import LocalCluster

from flexflow.scheduler import cluster as cluster_module


def local_cluster(workers: int, memory_limit: int | str = "auto") -> LocalCluster:
    """A LocalCluster of `workers` single-threaded worker processes, with the Dask config of
    the clusters `-ll:gpu N` starts (`cluster.CLUSTER_CONFIG`). The clients' periodic
    refresh of the scheduler's identity is turned off for the run: it asks for no worker
    details and can land over a fresh worker list being read (`Client.scheduler_info`), which
    made the check for lost workers during long iterations see every worker gone.

    A `memory_limit` in bytes is each worker's: on CPU workers the memory a device may use
    (the cap compile's memory check and the search use; `-ll:fsize` is a GPU's). Dask's own
    spilling, pausing and killing at fractions of it are then turned off, since they watch
    the process's resident memory (the interpreter and its libraries besides the arrays)."""
    dask.config.set({"distributed.client.scheduler-info-interval": "1h",
                     **cluster_module.CLUSTER_CONFIG})
    if memory_limit != "auto":
        dask.config.set({f"distributed.worker.memory.{fraction}": False
                         for fraction in ("target", "spill", "pause", "terminate")})
    return LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                        dashboard_address=":0", env=cluster_module.single_threaded_blas(),
                        silence_logs=logging.ERROR, memory_limit=memory_limit)
