"""Runs a TaskGraph on a Dask cluster, one worker per device.

Each worker keeps the model's state for its device in process memory (a `DeviceStore` in
`_MODELS`, installed once with `Client.run`): weights and optimizer state never leave it between
iterations. Per iteration the client submits one task per fused group (`executor.fuse`), pinned
to the device's worker, with the groups it depends on as arguments, so Dask moves exactly the
data one device sends another. Input batches are scattered to the workers that load from them.
Keys read `<first layer>-<phase>-d<device>e<epoch>-<iteration>`.
Metric records (loss sums, checked updates, timed kernels) stay in the worker's store while the
iteration runs, and the client takes them all with one call to the workers once it is done: a
Dask task to pick each group's records out of its output would cost a scheduler round trip
apiece (about as much as a fused task), for a few numbers.

A worker that leaves the cluster mid-run would leave the tasks pinned to it waiting forever, so
the client waits in short slices and checks between them that its workers are still there; a lost
worker raises `cluster.WorkerLost` (FFModel recovers from it, flexflow/recovery.py).
"""

from __future__ import annotations

import itertools
import uuid
from typing import Any

from .actions import Context, Load
from .allocator import keep_freed_memory
from .cluster import alive, array_module, check_alive, watched_wait
from .executor import Executor, Group, run_group, start_iteration
from .store import DeviceStore
from .taskgraph import TaskGraph

INLINE_BYTES = 1 << 20  # batches smaller than this travel inside the task that loads them
_MODELS: dict[tuple[str, int], tuple[Context, DeviceStore]] = {}  # lives on each worker


def _install(model_id: str, device: int, ctx: Context, cpu_only: bool) -> str:
    keep_freed_memory()  # each iteration reuses the memory the last one freed
    xp = array_module(cpu_only)
    _MODELS[(model_id, device)] = (ctx, DeviceStore(device, xp))
    return xp.__name__


def _uninstall(model_id: str) -> None:
    for key in [k for k in _MODELS if k[0] == model_id]:
        del _MODELS[key]


def _run_remote(model_id: str, device: int, group: Group, position: int, state: tuple,
                first: bool, feeds: dict, *incoming) -> dict:
    """Run `group` (the `position`-th of its iteration) on this worker's store; its metric
    records are kept there, under its position, for `_take_metrics`."""
    ctx, store = _MODELS[(model_id, device)]
    clear_iteration, zero_gradients, ctx.training, ctx.step, ctx.updates, ctx.optimizer = state
    ctx.feeds = feeds
    if first:
        store.metrics.clear()  # what a failed run may have left
        start_iteration(store, clear_iteration, zero_gradients)
    out = run_group(ctx, store, group, *incoming)
    records = out.pop("metrics", None)
    if records:
        store.metrics.append((position, records))
    return out


def _take_metrics(model_id: str) -> list:
    """The metric records this worker's devices of the model keep, removed from them."""
    taken = []
    for key in [k for k in _MODELS if k[0] == model_id]:
        store = _MODELS[key][1]
        taken += store.metrics
        store.metrics = []
    return taken


def _on_store(model_id: str, device: int, fn, args: tuple):
    return fn(_MODELS[(model_id, device)][1], *args)


class DaskExecutor(Executor):
    """Device d is the worker at `workers[d]`."""

    def __init__(self, taskgraph: TaskGraph, ctx: Context, client, workers: list[str],
                 cpu_only: bool = False):
        super().__init__(taskgraph, len(workers))
        self.ctx = ctx
        self.client = client
        self.workers = workers
        self.model_id = uuid.uuid4().hex[:8]
        self._iterations = itertools.count()
        remote_ctx = Context(ctx.graph, ctx.loss, ctx.optimizer)
        self.array_modules = [self._on_worker(d, "starting the model", _install, self.model_id, d,
                                              remote_ctx, cpu_only) for d in range(len(workers))]

    def run(self, *phases: str, zero_gradients: bool = False) -> list[dict[str, float]]:
        groups = self.groups(phases)
        iteration = next(self._iterations)
        state = ("forward" in phases, zero_gradients, self.ctx.training, self.ctx.step,
                 self.ctx.updates, self.ctx.optimizer)
        try:
            feeds = self._ship_feeds(groups)
        except (OSError, KeyError, ValueError):  # a reader of the batch may have left
            self._check_workers(f"iteration {iteration}: sending the batch")
            raise
        futures: dict[str, Any] = {}
        started: set[int] = set()
        for position, group in enumerate(groups):
            loads = {t.action.tensor for t in group.tasks if isinstance(t.action, Load)}
            futures[group.name] = self.client.submit(
                _run_remote, self.model_id, group.device, group, position, state,
                group.device not in started, {t: feeds[t] for t in loads},
                *[futures[k] for k in group.receive_from + group.after],
                key=f"{group.name}-{self.model_id}-{iteration}",
                workers=[self.workers[group.device]], allow_other_workers=False, pure=False)
            started.add(group.device)
        everything = list(futures.values())
        self._wait(everything, f"iteration {iteration} ({', '.join(phases)})")
        for future in everything:
            if future.status == "error":
                self._check_workers("an iteration", everything)
                future.result()  # raises the task's exception here
        return self._take_metrics(started)

    def _take_metrics(self, devices: set[int]) -> list[dict[str, float]]:
        """The metric records the iteration's groups kept on `devices`, in group order (the
        order the in-process executor gives)."""
        kept = self._on_workers(sorted({self.workers[d] for d in devices}),
                                "collecting the metrics", _take_metrics, self.model_id)
        ordered = sorted((entry for entries in kept.values() for entry in entries),
                         key=lambda entry: entry[0])
        return [record for _, records in ordered for record in records]

    def _wait(self, futures: list, during: str) -> None:
        watched_wait(self.client, futures, self.workers, during)

    def _check_workers(self, during: str, futures: list = ()) -> None:
        check_alive(self.client, self.workers, during, futures)

    def _ship_feeds(self, groups: list[Group]) -> dict[int, Any]:
        """Each fed batch for the tasks that load it: passed with the task when small, scattered
        once to the workers that read it when large (Dask keeps large values out of graphs)."""
        readers: dict[int, set[str]] = {}
        for group in groups:
            for task in group.tasks:
                if isinstance(task.action, Load):
                    readers.setdefault(task.action.tensor, set()).add(self.workers[group.device])
        return {tensor: self.ctx.feeds[tensor] if self.ctx.feeds[tensor].nbytes < INLINE_BYTES
                else self.client.scatter(self.ctx.feeds[tensor], workers=sorted(workers),
                                         broadcast=len(workers) > 1, hash=False)
                for tensor, workers in readers.items()}

    def _call(self, device: int, fn, *args):
        return self._on_worker(device, f"a call to device {device}", _on_store, self.model_id,
                               device, fn, args)

    def _on_worker(self, device: int, during: str, fn, *args):
        """`fn(*args)` in the process of `device`'s worker."""
        worker = self.workers[device]
        return self._on_workers([worker], during, fn, *args)[worker]

    def _on_workers(self, workers: list[str], during: str, fn, *args) -> dict:
        """`fn(*args)` in the process of each of `workers`: {worker: result}."""
        try:
            return self.client.run(fn, *args, workers=workers)
        except (OSError, KeyError):  # cannot reach a worker: say so if it has left
            self._check_workers(during)
            raise

    def close(self) -> None:
        try:
            self.client.run(_uninstall, self.model_id,
                            workers=sorted(alive(self.client, self.workers)))
        except Exception:  # the cluster may already be gone at interpreter exit
            pass
