"""Pipelines: consecutive stages of layers on their own groups of devices, the batch cut into
micro-batches that flow through the stages one after another.

In our strategy space a pipeline needs nothing new in `ParallelConfig`: it is a sample split
whose parts repeat devices. A layer of a stage on devices (4, 5) with 3 micro-batches has sample
degree 6 and devices (4, 5, 4, 5, 4, 5): parts 0-1 are micro-batch 0, data parallel over the
stage's devices, parts 2-3 micro-batch 1, and so on. Each device runs its parts of a layer as
micro-batches in lanes of their own (`taskgraph.Partition.lane`), which the executor fuses into
groups of their own (`fusion.place_of`), by default in GPipe's schedule: every forward, then
every backward, so that a stage holds all its micro-batches' activations at once. In 1F1B's
(`ParallelConfig.in_flight` = k) a device runs k forwards, then alternates a backward and a
forward, so that it holds k micro-batches' activations at most; k is the count of stages from
this one to the last, which keeps the last stage busy as GPipe does (`one_f_one_b_lanes`). The
gradients of a device's micro-batches are summed on the device before the update, as for any
weight box several of a layer's parts use, so the numbers are the single device's whatever the
schedule.

This module builds such strategies (the search's candidates, the benches' baselines) and reads
the micro-batch count back from a configuration (`strategy show`).
"""

from __future__ import annotations

from ..ops.graph import Graph
from ..ops.topological import stable_order
from .strategy import ParallelConfig, StrategyError

MICRO_BATCH_COUNTS = (2, 4, 8)  # what the search's pipeline candidates try
MOST_STAGES = 8  # the most stages they try (more makes one layer or two a stage)
SCHEDULES = ("GPipe", "1F1B")


def one_f_one_b_lanes(j: int, in_flight: int, micro: int) -> tuple[int, int]:
    """The lanes (positions in its device's order, `fusion.place_of`) of the forward and the
    backward of micro-batch j of `micro` under 1F1B with `in_flight` micro-batches: forwards
    0 .. k-1 first, then the backward of 0, the forward of k, the backward of 1, and so on,
    the last backwards at the end. With k = micro, GPipe's order."""
    k = in_flight
    forward = j if j < k else 2 * j - k + 1
    return forward, min(k + 2 * j, micro + j)


def held_share(strategy) -> float:
    """The largest share of its micro-batches a layer's device holds at once under the
    strategy's schedule (in_flight / micro-batches in 1F1B's, 1 in GPipe's): its first stage's,
    what 1F1B saves least on."""
    return max((config.in_flight or config.micro_batches) / config.micro_batches
               for config in strategy.values())


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
                      recompute: bool = False, schedule: str = "GPipe"
                      ) -> dict[str, ParallelConfig]:
    """`stages` contiguous stages balanced by `layer_work`, stage s on devices [s*k, (s+1)*k)
    (k = num_devices / stages), each layer data parallel over its stage's devices in `micro`
    micro-batches, in `schedule` (one of SCHEDULES); a layer whose batch dim its operator
    cannot split runs whole on its stage's first device. ValueError where the stages do not
    divide the devices, the micro-batches of a stage do not divide some splittable layer's
    batch, or 1F1B meets a layer run whole or one that sums over the batch (a batch norm):
    its forward needs every micro-batch, so the first backward would wait for the forwards
    1F1B puts after it."""
    if stages < 1 or num_devices % stages:
        raise ValueError(f"{stages} stages do not divide {num_devices} devices")
    if schedule not in SCHEDULES:
        raise ValueError(f"schedule {schedule!r} is none of {SCHEDULES}")
    per = num_devices // stages
    strategy = {}
    for layer, stage in zip(graph.layers, stage_of_layers(layer_work(graph), stages)):
        shape = graph.tensors[layer.outputs[0]].spec.shape
        devices = tuple(range(stage * per, (stage + 1) * per))
        rest = (1,) * (len(shape) - 1)
        if schedule == "1F1B" and 0 in layer.op.reduction_dims:
            raise ValueError(f"1F1B: layer '{layer.name}' sums over every micro-batch")
        if layer.op.dim_kinds(graph.in_specs(layer))[0] is None:
            if schedule == "1F1B":
                raise ValueError(f"1F1B: layer '{layer.name}' cannot run in micro-batches")
            strategy[layer.name] = ParallelConfig((1,) + rest, devices[:1], recompute)
            continue
        if shape[0] % (per * micro):
            raise ValueError(f"{micro} micro-batches over {per} devices do not divide the "
                             f"batch of {shape[0]} of layer '{layer.name}'")
        in_flight = min(stages - stage, micro) if schedule == "1F1B" else 0
        strategy[layer.name] = ParallelConfig((per * micro,) + rest, devices * micro, recompute,
                                              in_flight=in_flight)
    return strategy


def pipeline_candidates(graph: Graph, num_devices: int, recompute: bool,
                        schedule: str = "GPipe") -> dict[str, dict[str, ParallelConfig]]:
    """The search's pipeline starting points in `schedule`, by name ("pipeline, 4 stages x 8
    micro-batches", with ", 1F1B" after it in 1F1B's): every stage count from 2 to
    `MOST_STAGES` that divides the devices and is at most the layer count, with every count of
    `MICRO_BATCH_COUNTS` the batch allows; each also recomputed where `recompute`."""
    found = {}
    for stages in range(2, min(num_devices, len(graph.layers), MOST_STAGES) + 1):
        if num_devices % stages:
            continue
        for micro in MICRO_BATCH_COUNTS:
            try:
                strategy = pipeline_strategy(graph, num_devices, stages, micro,
                                             schedule=schedule)
            except ValueError:
                continue
            name = one_f_one_b_name(f"pipeline, {stages} stages x {micro} micro-batches",
                                    schedule == "1F1B")
            found[name] = strategy
            if recompute:
                found[name + ", recomputed"] = pipeline_strategy(
                    graph, num_devices, stages, micro, True, schedule)
    return found


def one_f_one_b_name(name: str, twin: bool = True) -> str:
    """The name of a GPipe pipeline candidate's 1F1B twin (itself where not `twin`)."""
    return name.replace(" micro-batches", " micro-batches, 1F1B") if twin else name


def in_dependency_order(tasks: list) -> list:
    """`tasks` (a task graph's, `taskgraph.Task`) reordered so that each comes after every task
    it depends on, keeping their order where it may (a stable topological sort): 1F1B makes a
    forward wait for a backward that the phases list after it. StrategyError where the
    dependencies form a cycle: a micro-batch's backward that needs a later micro-batch's
    forward (a layer that reads several micro-batches at once, such as one run whole or a
    batch norm over the batch), so that 1F1B's order cannot be kept."""
    index = {t.key: i for i, t in enumerate(tasks)}
    order, waiting = stable_order([[index[d] for d in t.deps if d in index] for t in tasks])
    if waiting:
        stuck = [tasks[i].key for i in waiting]
        waiter = next((k for k in stuck if k.phase == "forward"), stuck[0])
        raise StrategyError(f"layer '{waiter.layer}': 1F1B's order of its micro-batches cannot "
                            f"be kept: a later layer reads several micro-batches at once (one "
                            f"run whole, a batch norm over the batch, another micro-batch "
                            f"count), so a backward waits for a forward 1F1B puts after it")
    return [tasks[i] for i in order]
