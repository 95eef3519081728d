"""CUDA-graph replay of the in-process executor's iteration on one GPU: the step's kernels are
captured once (torch.cuda.graph, with CuPy's work on torch's capturing stream and CuPy
allocating from torch's pool: ops/vendor.py) and each later step is one graph launch, where a
plain step launches each kernel from Python (a step at batch 64 is launch-bound on a GPU).

A graph replays its kernels on the memory they had when captured, with the numbers they were
launched with. So a step is captured only where nothing it reads changes between steps but the
batch: one device, vendor kernels, no random operator (dropout's seeds change each step), an
update rule whose arguments do not move with the step count (SGD; Adam's bias correction
does), the same phases, rule and gradient zeroing (each key has its graph). The batch is copied
into the graph's input buffers before each launch, and checked on the host first
(fed_checks.py), as a plain step's loads check it. A write of weights or optimizer state from
the host drops the graphs (`forget`). The metric records the capture made hold device values
that each launch rewrites, read as a plain step's are (device_values.py).

The first capture is checked against a plain step from the same state (weights and optimizer
state copied before, put back in place between the two): a graph that does not give the plain
step's numbers is dropped with a warning, and the plain step's result stands. Where capturing
fails the same happens; `--cuda-graphs off` never captures.
"""

from __future__ import annotations

import warnings
from typing import Any, Callable

import numpy as np

from ..ops import vendor
from ..ops.optimizers import SGD
from .device_values import on_host, to_host
from .feeds import host_batches

RTOL, ATOL = 1e-5, 1e-6  # replayed against plain: the same kernels, in the same order


class CudaGraphs:
    """The capture and launch of CUDA graphs, through torch (the stand-in for tests has the
    same two methods)."""

    def capture(self, step: Callable[[], list]) -> tuple[Any, list]:
        """(the graph of `step`'s kernels, the records `step` returned); nothing has run."""
        import cupy
        import torch
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            with cupy.cuda.ExternalStream(torch.cuda.current_stream().cuda_stream):
                records = step()
        return graph, records

    def launch(self, graph, records: list) -> list:
        """Run `graph` once; the records its capture made, their device values rewritten."""
        graph.replay()
        return records


def reason_not_to_replay(graph, num_devices: int, xp, optimizer) -> str | None:
    """Why this model's steps cannot be replayed, or None where they can."""
    if num_devices != 1:
        return "more than one device"
    if vendor.holds_host_arrays(xp) or vendor.aten(xp) is None:
        return "not the vendor kernels on a GPU"
    if any(layer.op.type_name == "Dropout" for layer in graph.layers):
        return "a random operator"
    if not rule_replays(optimizer):
        return f"{type(optimizer).__name__}'s arguments change with each step"
    return None


def rule_replays(rule) -> bool:
    """Whether a graph of an update by `rule` does the same update at every step."""
    return rule is None or isinstance(rule, SGD)


class Replayer:
    """The graphs of one in-process executor's steps, by key."""

    def __init__(self, backend=None):
        self.backend = backend or CudaGraphs()
        self.graphs: dict[tuple, tuple[Any, list, dict]] = {}  # key -> graph, records, inputs
        self.seen: set[tuple] = set()  # keys stepped once (plain: lazy state is made then)
        self.refused: str | None = None  # why replay is off for good (a failed check)

    def forget(self) -> None:
        """Drop the graphs (the host wrote weights or optimizer state they captured)."""
        self.graphs.clear()

    def run(self, key: tuple, feeds: dict, checks: dict, store, plain: Callable[[dict], list],
            xp) -> list:
        """The records (device values unread) of the step `plain(feeds)` would make: replayed
        where a graph of `key` is kept, captured and checked against a plain step where the
        key was stepped before, plain otherwise."""
        batches = host_batches(feeds)
        if self.refused is not None or key not in self.seen:
            self.seen.add(key)
            return plain(batches)
        for tensor, batch in batches.items():
            if tensor in checks:
                checks[tensor](batch)
        if key not in self.graphs:
            return self._capture(key, batches, store, plain, xp)
        graph, records, inputs = self.graphs[key]
        for tensor, batch in batches.items():
            _upload(inputs[tensor], batch)
        return self.backend.launch(graph, records)

    def _capture(self, key, batches, store, plain, xp) -> list:
        before = _copy_state(store)
        expected = plain(batches)
        after = _copy_state(store)
        _restore_state(store, before)
        inputs = {tensor: xp.asarray(np.ascontiguousarray(b)) for tensor, b in batches.items()}
        try:
            graph, records = self.backend.capture(lambda: plain(inputs))
            got = self.backend.launch(graph, records)
            failure = _difference(xp, expected, got, after, _copy_state(store))
        except Exception as error:  # capture refused (a host read, an allocation, ...)
            failure = f"capture failed ({type(error).__name__}: {error})"
        if failure is None:
            self.graphs[key] = (graph, records, inputs)
            return got
        self.refused = failure
        warnings.warn(f"CUDA-graph replay is off for this model: {failure}", RuntimeWarning,
                      stacklevel=4)
        _restore_state(store, after)
        return expected


def _upload(buffer, batch) -> None:
    """`batch` (host) into the device array `buffer` (CuPy's `set`: one copy, no temporary)."""
    batch = np.ascontiguousarray(batch)
    if hasattr(buffer, "set"):
        buffer.set(batch)
    else:
        buffer[...] = batch


def _copy_state(store) -> dict:
    """Copies of a store's weights and optimizer state (what a step changes and keeps)."""
    state = {("w", key): array.copy() for key, array in store.weights.items()}
    for key, slots in store.opt_state.items():
        state.update({("o", key, name): array.copy() for name, array in slots.items()})
    return state


def _restore_state(store, state: dict) -> None:
    """Put `state` back in place (the arrays a graph captured keep their memory)."""
    for name, array in state.items():
        target = (store.weights[name[1]] if name[0] == "w" else store.opt_state[name[1]][name[2]])
        target[...] = array


def _difference(xp, expected: list, got: list, after: dict, replayed: dict) -> str | None:
    """Where the replayed step's metrics or state differ from the plain step's (None: none)."""
    plain, replay = on_host(list(expected), xp), on_host(list(got), xp)
    if [r and sorted(r) for r in plain] != [r and sorted(r) for r in replay]:
        return "its metric records are not the plain step's"
    for a, b in zip(plain, replay):
        for name, value in (a or {}).items():
            same = (np.isclose(value, b[name], RTOL, ATOL) if isinstance(value, float)
                    else value == b[name])
            if not same:
                return f"its {name} is {b[name]!r}, the plain step's {value!r}"
    for name, array in after.items():
        if not _close(array, replayed[name]):
            what = "weight" if name[0] == "w" else "optimizer state"
            return f"its {what} {name[1:]} differs from the plain step's"
    return None


def _close(a, b) -> bool:
    return bool(np.allclose(to_host(a), to_host(b), RTOL, ATOL))
