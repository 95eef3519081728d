"""dask_cuda's LocalCUDACluster as `scheduler/cluster.py` calls it, standing in on CPUs (a
LocalCluster of worker processes), for the tests of the GPU path's cluster; `install` makes
`-ll:gpu N` start it, as if the machine had `gpus` GPUs. A module beside the scripts, so that a
script run on its own imports it as the tests do."""

import logging
import sys
import types

from distributed import LocalCluster


class FakeLocalCUDACluster(LocalCluster):
    def __init__(self, n_workers, dashboard_address, security, scheduler_kwargs, preload):
        super().__init__(n_workers=n_workers, threads_per_worker=1, processes=True,
                         dashboard_address=dashboard_address, security=security,
                         scheduler_kwargs=scheduler_kwargs, preload=preload,
                         silence_logs=logging.ERROR)


def install(patch, cluster_module, gpus: int) -> None:
    """Through `patch` (a pytest MonkeyPatch, or anything with its setitem and setattr)."""
    patch.setitem(sys.modules, "dask_cuda",
                  types.SimpleNamespace(LocalCUDACluster=FakeLocalCUDACluster))
    patch.setattr(cluster_module, "gpu_count", lambda: gpus)
