"""A GPU's memory is what the plan may use on it, not its worker's share of the host's memory
(scheduler/calibration/runners.py), with a stand-in for CuPy."""

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
