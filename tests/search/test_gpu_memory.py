"""A GPU's memory is what the plan may use on it, not its worker's share of the host's memory
(scheduler/calibration/runners.py), and its allocated bytes are read from the allocator CuPy
allocates from (scheduler/memory_use.py); with stand-ins for CuPy and torch."""

import types

from flexflow.scheduler.calibration import runners

GPU = 141 << 30


def fake_cupy():
    device = types.SimpleNamespace(mem_info=(GPU // 2, GPU))
    return types.SimpleNamespace(__name__="cupy",
                                 cuda=types.SimpleNamespace(Device=lambda: device))


def test_in_process_devices_on_a_gpu_have_the_gpu_s_memory(monkeypatch):
    monkeypatch.setattr(runners, "array_module", lambda cpu_only: fake_cupy())
    assert runners.LocalRunner(2).memory() == [GPU, GPU]
    assert runners.device_memory(False) == GPU


def test_a_cpu_device_has_none_of_its_own(monkeypatch):
    assert runners.device_memory(True) is None
    assert runners.LocalRunner(1, cpu_only=True).memory() == [None]


def test_a_gpu_worker_s_memory_is_its_gpu_s_not_its_host_limit(monkeypatch):
    """(dask-cuda gives each worker a share of the host's memory as its limit)"""
    runner = object.__new__(runners.DaskRunner)
    runner.workers, runner.num_devices, runner.cpu_only = ["a", "b"], 2, False
    runner._memory, runner._device_memory = [8 << 30, 8 << 30], None
    monkeypatch.setattr(runner, "run_all", lambda fn, *args: [GPU, None], raising=False)
    assert runner.memory() == [GPU, 8 << 30]


def fake_gpu_array_module(own_pool: bool):
    """CuPy with 3 MB handed out by its own pool, allocating from it or (as ops/vendor.py
    shares torch's) from another allocator; the device 10 of 40 MB in use."""
    pool = types.SimpleNamespace(malloc=object(), used_bytes=lambda: 3 << 20)
    device = types.SimpleNamespace(mem_info=(30 << 20, 40 << 20))
    return types.SimpleNamespace(
        get_default_memory_pool=lambda: pool,
        cuda=types.SimpleNamespace(get_allocator=lambda: pool.malloc if own_pool else None,
                                   Device=lambda: device))


def fake_torch(allocated: int):
    cuda = types.SimpleNamespace(is_available=lambda: True, memory_allocated=lambda: allocated)
    return types.SimpleNamespace(cuda=cuda)


def test_a_gpu_s_allocated_bytes_come_from_the_allocator_cupy_uses(monkeypatch):
    import sys

    from flexflow.scheduler.memory_use import allocated_bytes
    monkeypatch.setitem(sys.modules, "torch", fake_torch(5 << 20))
    assert allocated_bytes(fake_gpu_array_module(own_pool=True)) == 3 << 20
    assert allocated_bytes(fake_gpu_array_module(own_pool=False)) == 5 << 20  # torch's pool
    monkeypatch.setitem(sys.modules, "torch", fake_torch(0))  # RMM's: torch does not count it
    assert allocated_bytes(fake_gpu_array_module(own_pool=False)) == 10 << 20
