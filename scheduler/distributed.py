"""Runs a TaskGraph on a Dask cluster, one worker per device.

Each worker keeps the model's state for its device in process memory (a `DeviceStore` in
`_MODELS`, installed once with `Client.run`): weights and optimizer state never leave it between
iterations. Per iteration the client submits one task per fused group (`executor.fuse`), pinned
to the device's worker, with the groups it depends on as arguments, so Dask moves exactly the
data one device sends another. Input batches are scattered to the workers that load from them.
Keys read `<first layer>-<phase>-d<device>e<epoch>-<iteration>`.
"""

from __future__ import annotations

import itertools
import uuid
from typing import Any

from distributed import wait

from .actions import Context, Load
from .executor import Executor, Group, run_group
from .store import DeviceStore
from .taskgraph import TaskGraph

_MODELS: dict[tuple[str, int], tuple[Context, DeviceStore]] = {}  # lives on each worker


def array_module():
    """cupy on a worker that has a GPU, numpy elsewhere."""
    try:
        import cupy

        if cupy.cuda.is_available():
            return cupy
    except Exception:  # no cupy, or a cupy without a usable driver
        pass
    import numpy

    return numpy


def _install(model_id: str, device: int, ctx: Context) -> str:
    xp = array_module()
    _MODELS[(model_id, device)] = (ctx, DeviceStore(device, xp))
    return xp.__name__


def _uninstall(model_id: str) -> None:
    for key in [k for k in _MODELS if k[0] == model_id]:
        del _MODELS[key]


def _run_remote(model_id: str, device: int, group: Group, state: tuple, clear: bool,
                feeds: dict, *incoming) -> dict:
    ctx, store = _MODELS[(model_id, device)]
    ctx.training, ctx.step, ctx.updates, ctx.optimizer = state
    ctx.feeds = feeds
    if clear:
        store.clear_iteration()
    return run_group(ctx, store, group, *incoming)


def _metrics_of(out: dict) -> list:
    return out.get("metrics", [])


def _on_store(model_id: str, device: int, fn, args: tuple):
    return fn(_MODELS[(model_id, device)][1], *args)


class DaskExecutor(Executor):
    """Device d is the worker at `workers[d]`."""

    def __init__(self, taskgraph: TaskGraph, ctx: Context, client, workers: list[str]):
        super().__init__(taskgraph, len(workers))
        self.ctx = ctx
        self.client = client
        self.workers = workers
        self.model_id = uuid.uuid4().hex[:8]
        self._iterations = itertools.count()
        remote_ctx = Context(ctx.graph, ctx.loss, ctx.optimizer)
        self.array_modules = [
            client.run(_install, self.model_id, d, remote_ctx, workers=[w])[w]
            for d, w in enumerate(workers)]

    def run(self, *phases: str) -> list[dict[str, float]]:
        groups = self.groups(phases)
        iteration = next(self._iterations)
        state = (self.ctx.training, self.ctx.step, self.ctx.updates, self.ctx.optimizer)
        feeds = self._scatter_feeds(groups)
        futures: dict[str, Any] = {}
        cleared: set[int] = set()
        for group in groups:
            clear = "forward" in phases and group.device not in cleared
            cleared.add(group.device)
            loads = {t.action.tensor for t in group.tasks if isinstance(t.action, Load)}
            futures[group.name] = self.client.submit(
                _run_remote, self.model_id, group.device, group, state, clear,
                {t: feeds[t] for t in loads},
                *[futures[k] for k in group.receive_from + group.after],
                key=f"{group.name}-{self.model_id}-{iteration}",
                workers=[self.workers[group.device]], allow_other_workers=False, pure=False)
        with self.client.as_current():
            wait(list(futures.values()))
        for future in futures.values():
            if future.status == "error":
                future.result()  # raises the task's exception here
        metric_futures = [
            self.client.submit(_metrics_of, futures[g.name], key=f"metrics-{g.name}-"
                               f"{self.model_id}-{iteration}", workers=[self.workers[g.device]],
                               pure=False)
            for g in groups if any(t.phase == "loss" for t in g.tasks)]
        return [m for piece in self.client.gather(metric_futures) for m in piece]

    def _scatter_feeds(self, groups: list[Group]) -> dict[int, Any]:
        """Each fed tensor's batch, scattered once to the workers whose groups load it."""
        readers: dict[int, set[str]] = {}
        for group in groups:
            for task in group.tasks:
                if isinstance(task.action, Load):
                    readers.setdefault(task.action.tensor, set()).add(self.workers[group.device])
        return {tensor: self.client.scatter(self.ctx.feeds[tensor], workers=sorted(workers),
                                            broadcast=len(workers) > 1, hash=False)
                for tensor, workers in readers.items()}

    def _call(self, device: int, fn, *args):
        worker = self.workers[device]
        return self.client.run(_on_store, self.model_id, device, fn, args, workers=[worker])[worker]

    def close(self) -> None:
        try:
            self.client.run(_uninstall, self.model_id, workers=self.workers)
        except Exception:  # the cluster may already be gone at interpreter exit
            pass
