"""bench/gpu_check.py's stage of two workers sharing the one GPU, on CPUs: dask_cuda's
LocalCUDACluster stands in as a LocalCluster of two worker processes, so that everything but the
GPU is checked here (the cluster, `--collectives off`, the losses against the one-device run's,
and a failure where they differ)."""

import logging
import sys
import types
from pathlib import Path

import numpy as np
import pytest
from distributed import LocalCluster

BENCH = Path(__file__).parents[2] / "bench"


class SharedGPUCluster(LocalCluster):
    """LocalCUDACluster as the stage starts it: two workers on device 0."""

    def __init__(self, n_workers, CUDA_VISIBLE_DEVICES, dashboard_address):
        assert CUDA_VISIBLE_DEVICES == "0,0"
        super().__init__(n_workers=n_workers, threads_per_worker=1, processes=True,
                         dashboard_address=dashboard_address, silence_logs=logging.ERROR)


@pytest.fixture
def gpu_check(monkeypatch):
    monkeypatch.syspath_prepend(str(BENCH))
    monkeypatch.setitem(sys.modules, "dask_cuda",
                        types.SimpleNamespace(LocalCUDACluster=SharedGPUCluster))
    import gpu_check
    return gpu_check


def test_two_workers_sharing_the_gpu_train_as_one_device(gpu_check):
    batch = 8
    xb = gpu_check.rand(batch, 3, 32, 32)
    yb = (np.arange(batch) % 10).astype(np.int32).reshape(-1, 1)
    _, one_device = gpu_check.train([], batch, 5, xb, yb)
    results = {}
    assert gpu_check.two_workers_on_one_gpu(batch, xb, yb, one_device, results) == 0
    shared = results["two workers on one GPU"]
    np.testing.assert_allclose(shared["losses"], one_device, rtol=1e-4)
    assert len(shared["workers' kernels"]) == 2
    other = [loss * 1.01 for loss in one_device]
    assert gpu_check.two_workers_on_one_gpu(batch, xb, yb, other, {}) == 1
