"""Probe task graphs for the executor's overheads, and timing them alike.

Probe tasks are fused groups whose actions do next to nothing but send small arrays on, as
real fused tasks send activations: chains across two devices (the cost per dependent level),
rings that keep every device busy at every level, gathers to one device and spreads back (a
data-parallel update's shape), and one group of many real actions (the cost per action).
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass
from typing import Sequence

import numpy

from ...ops.box import Box
from ...ops.elementwise import ElementUnary
from ...ops.graph import Graph
from ...ops.spec import TensorSpec
from .. import actions as A
from ..messages import Partial
from ..taskgraph import Task, TaskGraph, TaskKey

PAYLOAD_BYTES = 16 << 10  # what each scheduler probe task sends on, as every real fused task does
PAYLOAD_ITEMS = 8  # ... in as many arrays (a layer's activations, or the gradients of its weights)


@dataclass(frozen=True)
class Probe(A.Action):
    """A calibration action: emits `nbytes` for device `dst`, and metric sums if asked."""

    nbytes: int = 0
    dst: int = -1
    metrics: bool = False

    def run(self, store, ctx, out):
        if self.nbytes:
            size = self.nbytes // PAYLOAD_ITEMS
            out.setdefault(self.dst, []).extend(
                Partial(("probe", i), numpy.zeros(size, "uint8"))
                for i in range(PAYLOAD_ITEMS))
        if self.metrics:
            out.setdefault("metrics", []).append({})


def _sending(device: int, dst: int, metrics: bool = False, nbytes: int = 0) -> Probe:
    """A probe task's first action: a small array (and `nbytes` more) for `dst`, as real fused
    tasks send activations on; the metric sums if asked."""
    return Probe(PAYLOAD_BYTES + nbytes if dst != device else 0, dst, metrics)


def probe_graph(devices: Sequence[int], length: int, actions: int = 1, nbytes: int = 0,
                metrics: bool = True) -> TaskGraph:
    """A chain of `length` fused tasks visiting `devices` in turn, each of `actions` actions:
    the first sends a small array on, the rest do nothing; the first task may also send
    `nbytes` more, and metric sums."""
    tasks, previous = [], ()
    for i in range(length):
        device = devices[i % len(devices)]
        keys = []
        for k in range(actions):
            action, phase = A.Receive(), "forward"
            if k == 0:
                first = i == 0 and metrics
                action = _sending(device, devices[(i + 1) % len(devices)], first,
                                  nbytes if i == 0 else 0)
                phase = "loss" if first else "forward"
            key = TaskKey(f"probe{i}", phase, k, "forward")
            tasks.append(Task(key, device, phase, action, previous))
            keys.append(key)
        previous = tuple(keys)
    return TaskGraph(tasks)


def action_graph(length: int) -> tuple[Graph, TaskGraph]:
    """One fused group on device 0: a constant of one element, then the forward of a chain of
    `length` ReLUs of it. Their kernels take next to nothing; what a real action costs beyond
    its kernel (reading its inputs from the store, describing its partition, storing its
    outputs) remains."""
    graph = Graph()
    tensor = graph.add_constant(TensorSpec((1,)), 1.0).id
    box = Box.full((1,))
    tasks = [Task(TaskKey("constant", "forward", 0, "forward"), 0, "forward",
                  A.Fill(tensor, box, 1.0))]
    for i in range(length):
        tensor = graph.add_layer(ElementUnary("relu"), [tensor]).outputs[0]
        tasks.append(Task(TaskKey(f"relu{i}", "forward", 0, "forward"), 0, "forward",
                          A.Forward(i, 0, (box,), (box,), ()), (tasks[-1].key,)))
    return graph, TaskGraph(tasks)


def ring_graph(devices: int, length: int, fan_in: int = 1) -> TaskGraph:
    """`length` levels of one fused task per device (sending a small array on), each waiting
    for the previous level's tasks on the `fan_in` devices before it: every device busy at every
    level, fetching `fan_in` inputs (fan_in = devices - 1: all to all, as a reduction or a
    reshard)."""
    tasks = []
    for level in range(length):
        for d in range(devices):
            first = level == 0 and d == 0
            phase = "loss" if first else "forward"
            deps = tuple(tasks[(level - 1) * devices + (d - j) % devices].key
                         for j in range(1, fan_in + 1)) if level else ()
            tasks.append(Task(TaskKey(f"ring{level}", phase, d, "forward"), d, phase,
                              _sending(d, (d + 1) % devices, first), deps))
    return TaskGraph(tasks)


def star_graph(devices: int, rounds: int) -> TaskGraph:
    """`rounds` x (a task on every device -> one on device 0 that needs them all -> ...), then
    a last level on every device: the shape of a data-parallel update (gather, then spread)."""
    tasks, previous = [], ()
    for level in range(2 * rounds + 1):
        spread = level % 2 == 0
        for d in (range(devices) if spread else (0,)):
            first = level == 0 and d == 0
            phase = "loss" if first else "forward"
            tasks.append(Task(TaskKey(f"star{level}", phase, d, "forward"), d, phase,
                              _sending(d, 0 if d else 1 % devices, first), previous))
        previous = tuple(t.key for t in tasks if t.key.layer == f"star{level}")
    return TaskGraph(tasks)


def interleaved_ms(probes: dict, rounds: int) -> dict:
    """Median ms of each probe (a callable), run round-robin `rounds` times after a warm-up
    each, so that a slow spell of a shared machine falls on all of them alike."""
    for probe in probes.values():
        probe()
    samples: dict = {name: [] for name in probes}
    for _ in range(rounds):
        for name, probe in probes.items():
            start = time.perf_counter()
            probe()
            samples[name].append((time.perf_counter() - start) * 1e3)
    return {name: statistics.median(values) for name, values in samples.items()}
