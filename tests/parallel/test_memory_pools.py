"""The GPU memory options a local dask-cuda cluster is started with (scheduler/cluster.py): the
`-ll:fsize` pool, one pool for CuPy and torch where dask-cuda and RMM can give it, and UCX
where distributed-ucxx is installed."""

import importlib.util

import pytest

from flexflow.scheduler import cluster


def new_cluster(n_workers=None, rmm_pool_size=None, rmm_async=False,
                rmm_allocator_external_lib_list=None):
    """A stand-in with the signature of dask-cuda's LocalCUDACluster (26.x)."""


def old_cluster(n_workers=None, rmm_pool_size=None):
    """A stand-in with the signature of a dask-cuda without external allocators."""


@pytest.fixture
def installed(monkeypatch):
    """Pretend exactly the named packages are installed."""
    def pretend(*names):
        monkeypatch.setattr(importlib.util, "find_spec",
                            lambda name, *args: object() if name in names else None)
    return pretend


def test_fsize_sets_the_pool_and_both_libraries_share_it(installed):
    installed("rmm", "torch")
    assert cluster._memory_pools(new_cluster, 3048) == {
        "rmm_pool_size": "3048MB", "rmm_async": False,
        "rmm_allocator_external_lib_list": ["cupy", "torch"]}


def test_without_fsize_both_libraries_share_cuda_s_own_pool(installed):
    installed("rmm", "torch")
    assert cluster._memory_pools(new_cluster, 0) == {
        "rmm_async": True, "rmm_allocator_external_lib_list": ["cupy", "torch"]}


def test_without_rmm_no_pool_is_asked_for(installed):
    """(dask-cuda raises "RMM pool requested but module 'rmm' is not available")"""
    installed("torch")
    assert cluster._memory_pools(new_cluster, 0) == {}
    assert cluster._memory_pools(new_cluster, 100) == {}


def test_an_older_dask_cuda_gets_the_pool_alone(installed):
    installed("rmm", "torch")
    assert cluster._memory_pools(old_cluster, 100) == {"rmm_pool_size": "100MB"}


def test_more_devices_than_gpus_is_refused_before_anything_starts(monkeypatch):
    started = []
    monkeypatch.setattr(cluster, "gpu_count", lambda: 2)
    monkeypatch.setattr(cluster, "_gpu_cluster", lambda *args: started.append(args))
    with pytest.raises(cluster.TooFewGPUs, match=r"-ll:gpu 4: this machine has 2 GPUs"):
        cluster.start_local(4)
    assert not started


def test_a_plain_gpu_cluster_talks_ucx_where_distributed_ucxx_is_installed(installed):
    """UCX's connections carry GPU memory (what the devices send each other stays on the
    GPUs, scheduler/parcels.py); UCX does not encrypt, so TLS stays TLS."""
    installed("distributed_ucxx")
    assert cluster._transport(tls=False) == {"protocol": "ucxx"}
    assert cluster._transport(tls=True) == {}
    installed()
    assert cluster._transport(tls=False) == {}
