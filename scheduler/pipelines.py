"""Pipelines: consecutive stages of layers on their own groups of devices, the batch cut into
micro-batches that flow through the stages one after another.

In our strategy space a pipeline needs nothing new in `ParallelConfig`: it is a sample split
whose parts repeat devices. A layer of a stage on devices (4, 5) with 3 micro-batches has sample
degree 6 and devices (4, 5, 4, 5, 4, 5): parts 0-1 are micro-batch 0, data parallel over the
stage's devices, parts 2-3 micro-batch 1, and so on. Each device runs its parts of a layer as
micro-batches in lanes of their own (`taskgraph.Partition.lane`), which the executor fuses into
groups of their own (`fusion.place_of`): GPipe's schedule. The gradients of a device's
micro-batches are summed on the device before the update, as for any weight box several of a
layer's parts use, so the numbers are the single device's.

This module builds such strategies (the search's candidates, the benches' baselines) and reads
the micro-batch count back from a configuration (`strategy show`).
"""

from __future__ import annotations

from collections import Counter

from ..ops.graph import Graph
from .strategy import ParallelConfig

MICRO_BATCH_COUNTS = (2, 4, 8)  # what the search's pipeline candidates try
MOST_STAGES = 8  # the most stages they try (more makes one layer or two a stage)


def micro_batches(config: ParallelConfig) -> int:
    """How many parts of the layer its busiest device runs one after another (1: none)."""
    return max(Counter(config.devices).values())


def layer_work(graph: Graph) -> list[float]:
    """Each layer's share of an iteration's work, to balance stages by: its analytic flops,
    and at least one per output element (element-wise layers are bound by memory, not
    flops)."""
    work = []
    for layer in graph.layers:
        out = graph.tensors[layer.outputs[0]].spec
        work.append(float(max(layer.op.flops(graph.in_specs(layer)), out.size)))
    return work


def stage_of_layers(work: list[float], stages: int) -> list[int]:
    """Each layer's stage (graph order is a topological order, so contiguous runs of layers
    make stages that hand data forward only): a layer goes to the stage its work's midpoint
    falls in, when the total work is cut into `stages` equal spans."""
    total = sum(work) or 1.0
    done, out = 0.0, []
    for w in work:
        out.append(min(stages - 1, int((done + w / 2) / total * stages)))
        done += w
    return out


def pipeline_strategy(graph: Graph, num_devices: int, stages: int, micro: int,
                      recompute: bool = False) -> dict[str, ParallelConfig]:
    """`stages` contiguous stages balanced by `layer_work`, stage s on devices [s*k, (s+1)*k)
    (k = num_devices / stages), each layer data parallel over its stage's devices in `micro`
    micro-batches; a layer whose batch dim its operator cannot split runs whole on its stage's
    first device. ValueError where the stages do not divide the devices, or the micro-batches
    of a stage do not divide some splittable layer's batch."""
    if stages < 1 or num_devices % stages:
        raise ValueError(f"{stages} stages do not divide {num_devices} devices")
    per = num_devices // stages
    strategy = {}
    for layer, stage in zip(graph.layers, stage_of_layers(layer_work(graph), stages)):
        shape = graph.tensors[layer.outputs[0]].spec.shape
        devices = tuple(range(stage * per, (stage + 1) * per))
        rest = (1,) * (len(shape) - 1)
        if layer.op.dim_kinds(graph.in_specs(layer))[0] is None:
            strategy[layer.name] = ParallelConfig((1,) + rest, devices[:1], recompute)
            continue
        if shape[0] % (per * micro):
            raise ValueError(f"{micro} micro-batches over {per} devices do not divide the "
                             f"batch of {shape[0]} of layer '{layer.name}'")
        strategy[layer.name] = ParallelConfig((per * micro,) + rest, devices * micro, recompute)
    return strategy


def pipeline_candidates(graph: Graph, num_devices: int, recompute: bool
                        ) -> dict[str, dict[str, ParallelConfig]]:
    """The search's pipeline starting points, by name ("pipeline, 4 stages x 8
    micro-batches"): every stage count from 2 to `MOST_STAGES` that divides the devices and is
    at most the layer count, with every count of `MICRO_BATCH_COUNTS` the batch allows; each
    also recomputed where `recompute`."""
    found = {}
    for stages in range(2, min(num_devices, len(graph.layers), MOST_STAGES) + 1):
        if num_devices % stages:
            continue
        for micro in MICRO_BATCH_COUNTS:
            try:
                strategy = pipeline_strategy(graph, num_devices, stages, micro)
            except ValueError:
                continue
            name = f"pipeline, {stages} stages x {micro} micro-batches"
            found[name] = strategy
            if recompute:
                found[name + ", recomputed"] = pipeline_strategy(graph, num_devices, stages,
                                                                 micro, True)
    return found
