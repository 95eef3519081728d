"""Where kernels and probes run: this process (LocalRunner) or a Dask cluster's workers
(DaskRunner). Both run a function on one device or on all at once, make an executor over
their devices, and time what only a real cluster has (raw task chains, submissions)."""

from __future__ import annotations

import time
from functools import partial
from typing import NamedTuple, Sequence

import numpy

from .. import actions as A
from .. import allocator
from ..cluster import array_module, run_on, watched_gather, watched_wait, workers_now
from ..executor import LocalExecutor
from ..taskgraph import Task, TaskGraph, TaskKey
from .timing import reference_work


class CollectiveTimes(NamedTuple):
    """What calibration times of a cluster's collectives (ms): a sum of each size with every
    member idle but for it, and a small one amid work (the latency an iteration's sums see)."""

    idle: dict[int, float]
    amid_work: float


def _noop(*args) -> None:
    return None


def _array_module_name(cpu_only: bool) -> str:
    return array_module(cpu_only).__name__


def device_memory(cpu_only: bool) -> int | None:
    """Bytes of this process's GPU (CuPy's current device), or None on a CPU: a CPU worker's
    memory is its memory limit, and this process's the host's (calibration/machines.py)."""
    xp = array_module(cpu_only)
    if xp.__name__ != "cupy":
        return None
    return int(xp.cuda.Device().mem_info[1])


def collectives_graph(devices: int) -> TaskGraph:
    """A graph that only names a sum over `devices` devices, for which an executor forms
    their process group; it is never run."""
    members = tuple(range(devices))
    return TaskGraph([Task(TaskKey("probe", "update", d, "allreduce"), d, "update",
                           A.AllReduce("probe", (), members)) for d in members])


class LocalRunner:
    """Devices are this process (the in-process executor)."""

    def __init__(self, num_devices: int, cpu_only: bool = False):
        self.num_devices = num_devices
        self.cpu_only = cpu_only
        allocator.keep_freed_memory()  # as the in-process executor has it, kernels timed so

    def run(self, device: int, fn, *args):
        return fn(*args)

    def executor(self, taskgraph: TaskGraph, ctx: A.Context | None = None):
        return LocalExecutor(taskgraph, ctx or A.Context(None), self.num_devices,
                             array_module(self.cpu_only))

    def hosts(self) -> list[str]:
        return ["local"] * self.num_devices

    def run_all(self, fn, *args) -> list:
        """`fn(*args)` on every device at once; here they run one after the other, as the
        in-process executor runs devices."""
        return [fn(*args) for _ in range(self.num_devices)]

    def memory(self) -> list[int | None]:
        return [device_memory(self.cpu_only)] * self.num_devices

    def on_gpus(self) -> bool:
        return _array_module_name(self.cpu_only) == "cupy"

    def raw_chain_ms(self, devices: Sequence[int], length: int) -> float:
        return 0.0

    def submit_ms(self, device: int, nbytes: int) -> float:
        return 0.0

    def collectives_ms(self, sizes: tuple[int, ...], runs: int) -> None:
        """In this process collectives are sums in memory (collectives.LocalHub): nothing to
        time."""
        return None


class DaskRunner:
    """Device d is the worker `workers[d]` of a Dask cluster."""

    def __init__(self, client, workers: list[str], cpu_only: bool = False,
                 memory: list[int | None] | None = None):
        self.client = client
        self.workers = workers
        self.num_devices = len(workers)
        self.cpu_only = cpu_only
        self._memory = memory  # read with the worker list (cluster.Cluster.memory)
        self._device_memory: list[int | None] | None = None
        # as the executor's workers
        run_on(client, workers, "calibration", allocator.keep_freed_memory)

    def run(self, device: int, fn, *args):
        worker = [self.workers[device]]
        future = self.client.submit(fn, *args, workers=worker, allow_other_workers=False,
                                    pure=False)
        watched_wait(self.client, [future], worker, "calibration")
        return watched_gather(self.client, [future], worker, "calibration")[0]

    def executor(self, taskgraph: TaskGraph, ctx: A.Context | None = None,
                 collectives: bool = False):
        from ..distributed import DaskExecutor
        return DaskExecutor(taskgraph, ctx or A.Context(None), self.client, self.workers,
                            self.cpu_only, collectives=collectives)

    def collectives_ms(self, sizes: tuple[int, ...], runs: int) -> CollectiveTimes | None:
        """The median ms of an all-reduce of each of `sizes` bytes over all the devices, on
        their torch.distributed process group, and of a small one amid the reference kernel's
        work; None where a worker has no torch.distributed."""
        from .. import process_groups
        if not all(run_on(self.client, self.workers, "calibration",
                          process_groups.available).values()):
            return None
        executor = self.executor(collectives_graph(self.num_devices), collectives=True)
        try:
            return CollectiveTimes(executor.time_collectives(sizes, runs),
                                   executor.time_amid_work(partial(reference_work, self.cpu_only),
                                                           runs))
        finally:
            executor.close()

    def hosts(self) -> list[str]:
        return [w.rsplit("://", 1)[-1].rsplit(":", 1)[0] for w in self.workers]

    def run_all(self, fn, *args) -> list:
        """`fn(*args)` on every device at once."""
        futures = [self.client.submit(fn, *args, workers=[w], allow_other_workers=False,
                                      pure=False) for w in self.workers]
        watched_wait(self.client, futures, self.workers, "calibration")
        return watched_gather(self.client, futures, self.workers, "calibration")

    def memory(self) -> list[int | None]:
        """Each device's memory: its GPU's, else its worker's memory limit (a dask-cuda
        worker's limit is its share of the host's memory, not its GPU's)."""
        if self._device_memory is None:
            limits = self._memory
            if limits is None:
                info = workers_now(self.client)
                limits = [info[w].get("memory_limit") or None if w in info else None
                          for w in self.workers]
            gpus = self.run_all(device_memory, self.cpu_only)
            self._device_memory = [gpu or limit for gpu, limit in zip(gpus, limits)]
        return self._device_memory

    def on_gpus(self) -> bool:
        """Whether the devices are GPUs (asked of the first worker)."""
        return self.run(0, _array_module_name, self.cpu_only) == "cupy"

    def raw_chain_ms(self, devices: Sequence[int], length: int) -> float:
        """A chain of `length` dependent tiny tasks visiting `devices` in turn."""
        start = time.perf_counter()
        future = None
        for i in range(length):
            worker = self.workers[devices[i % len(devices)]]
            future = self.client.submit(_noop, future, i, workers=[worker],
                                        allow_other_workers=False, pure=False)
        watched_wait(self.client, [future], self.workers, "calibration")
        return (time.perf_counter() - start) * 1e3

    def submit_ms(self, device: int, nbytes: int) -> float:
        """Submitting a task with an array of `nbytes` to the device, until it has run."""
        payload = numpy.zeros(nbytes, "uint8")
        start = time.perf_counter()
        future = self.client.submit(_noop, payload, workers=[self.workers[device]],
                                    allow_other_workers=False, pure=False)
        watched_wait(self.client, [future], self.workers, "calibration")
        return (time.perf_counter() - start) * 1e3
