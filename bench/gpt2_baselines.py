"""GPT-2 medium on the paper's 16 P100s (`p100-4x4`: 4 nodes of 4, 16 GB each), simulated: the
strategies a PyTorch user would try by hand, expressed in our strategy space, against the one
the search finds with every choice enabled (parameter and attribute splits, recomputation,
sharded weights, pipelines). Adam, global batch 32 (2 sequences of 1,024 tokens a device;
`--global-batch 64`: 4, where data parallelism no longer fits), the task graph a default run
executes (`paper_table.RUN_CHECKS`). Nothing is measured: every figure comes from
the simulator and the memory model (deterministic for the seed).

The hand-made baselines:

* data parallelism;
* FSDP with full recomputation: data parallelism, every weighted layer's weights sharded over
  the 16 devices (ZeRO-3), every layer recomputed in backward;
* tensor parallelism inside a node, data parallelism across: the batch split over the 4 nodes,
  and inside each node every layer split 4 ways along its parameter dim (the dense layers' and
  the embedding's output features) where it has one, else along its attribute dim (the sequence
  positions: attention, layer norm, softmax), else by sample;
* Megatron's tensor parallelism inside a node, data parallel across, in Megatron-LM's
  layout: the second dense layer of each block's MLP split by the features it sums over and
  each attention by its heads (`ParallelConfig.contraction`, scheduler/tensor_parallel.py),
  so that the node sums the partial outputs of each once, and the layer norms and residual
  adds replicated on the node's devices (`ParallelConfig.replicas`), so that each split layer
  reads its input where it runs;
* Megatron's MLP alone: the dense pairs so, attention and the rest split by positions as in
  the tensor-parallel baseline;
* a pipeline across nodes: 4 stages, one a node (scheduler/pipelines.py: balanced by flops),
  each data parallel over its node's 4 devices, in 2, 4 or 8 micro-batches, in GPipe's
  schedule and in 1F1B's (stage s holds 4 - s micro-batches' activations at most), each
  printed;
* the last two recomputed too, as a user short of memory would (GPipe recomputes by default).

The fastest fitting one of these (data parallelism aside) is what the search is compared with.

    python bench/gpt2_baselines.py [--budget 1000] [--seed 0] [--global-batch 32] [--processes 1]
"""

from __future__ import annotations

import io
import os
import sys
import time
from dataclasses import replace
from itertools import product
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

import dnn  # noqa: E402
from command_line import command_line  # noqa: E402
from paper_table import RUN_CHECKS  # noqa: E402

from flexflow.core import LossType  # noqa: E402
from flexflow.losses import loss_function  # noqa: E402
from flexflow.ops.optimizers import Adam  # noqa: E402
from flexflow.ops.spec import DimKind  # noqa: E402
from flexflow.scheduler import machine as machine_module  # noqa: E402
from flexflow.scheduler.pipelines import (MICRO_BATCH_COUNTS, SCHEDULES,  # noqa: E402
                                          pipeline_strategy)
from flexflow.scheduler.search import SearchOptions, search  # noqa: E402
from flexflow.scheduler.simulator import Simulator  # noqa: E402
from flexflow.scheduler.strategy import ParallelConfig, data_parallel_strategy  # noqa: E402
from flexflow.scheduler.tensor_parallel import megatron_strategy  # noqa: E402

GLOBAL_BATCH = 32  # the issue's; at 64 data parallelism no longer fits 16 GB in our model
GIB = 1 << 30


def gpt2_simulator(machine, batch: int = GLOBAL_BATCH):
    """(graph, simulator) of GPT-2 medium at the global `batch`, trained with Adam."""
    graph, objective = dnn.graph_of(dnn.gpt2_medium, batch)
    output = graph.tensors[graph.layers[-1].outputs[0]].spec
    loss = loss_function(LossType.LOSS_SPARSE_CATEGORICAL_CROSSENTROPY, (), batch,
                         output.size // batch, True)
    return graph, Simulator(graph, objective, machine, loss, Adam(alpha=1e-4), RUN_CHECKS)


def fsdp_recomputed(graph, devices: int) -> dict[str, ParallelConfig]:
    """Data parallelism with every weighted layer's weights sharded and every layer
    recomputed: FSDP with full activation checkpointing."""
    weighted = {layer.name for layer in graph.layers if any(w.trainable for w in layer.weights)}
    return {name: replace(config, recompute=True, shard_weights=name in weighted)
            for name, config in data_parallel_strategy(graph, devices).items()}


def tensor_in_node(graph, nodes: int, per_node: int) -> dict[str, ParallelConfig]:
    """The batch over `nodes` nodes and, inside each node, every layer split `per_node` ways
    along its parameter dim, else its attribute dim, else by sample (device = node * per_node +
    part, so a node's parts share its links)."""
    strategy = {}
    for layer in graph.layers:
        shape = graph.tensors[layer.outputs[0]].spec.shape
        kinds = layer.op.dim_kinds(graph.in_specs(layer))
        inner = next((d for kind in (DimKind.PARAMETER, DimKind.ATTRIBUTE)
                      for d, k in enumerate(kinds)
                      if k is kind and d > 0 and shape[d] % per_node == 0), None)
        degrees = [1] * len(shape)
        degrees[0] = nodes if inner is not None else nodes * per_node
        if inner is not None:
            degrees[inner] = per_node
        strategy[layer.name] = ParallelConfig(tuple(degrees), tuple(range(nodes * per_node)))
    return strategy


def megatron_in_node(graph, nodes: int, per_node: int, heads: bool = True
                     ) -> dict[str, ParallelConfig]:
    """`tensor_in_node` with each dense pair Megatron's: the first column-parallel, the second
    row-parallel, over a node's devices; where `heads`, Megatron-LM's whole layout: each
    attention split by its heads there and the layer norms and residual adds replicated on
    the node's devices (else attention and the rest by positions, as `tensor_in_node` splits
    them)."""
    return megatron_strategy(graph, nodes * per_node, per_node,
                             tensor_in_node(graph, nodes, per_node), heads, replicate=heads)


def describe(name: str, simulation, seconds: float | None = None) -> str:
    fits = "fits" if not simulation.over else "OVER memory"
    searched = f"  ({seconds:.0f} s search)" if seconds is not None else ""
    return (f"{name:58s} {simulation.time:9.1f} ms  {max(simulation.memory) / GIB:6.2f} GiB "
            f"peak device  {fits}{searched}")


def hand_made(graph) -> dict[str, dict[str, ParallelConfig]]:
    """The baselines by name: data parallelism, FSDP, tensor parallelism in a node (also
    recomputed, as a user short of memory would), the pipeline across nodes in each count of
    micro-batches and each schedule (also recomputed: GPipe's own default)."""
    baselines = {
        "data parallel": data_parallel_strategy(graph, 16),
        "FSDP (ZeRO-3), full recomputation": fsdp_recomputed(graph, 16),
        "tensor parallel in a node (4), data parallel across": tensor_in_node(graph, 4, 4),
    }
    baselines["tensor parallel in a node, recomputed"] = recomputed(
        baselines["tensor parallel in a node (4), data parallel across"])
    baselines["Megatron in a node (4), data parallel across"] = megatron_in_node(graph, 4, 4)
    baselines["Megatron in a node, recomputed"] = recomputed(
        baselines["Megatron in a node (4), data parallel across"])
    baselines["Megatron's MLP in a node, attention by positions"] = megatron_in_node(
        graph, 4, 4, heads=False)
    baselines["Megatron's MLP, attention by positions, recomputed"] = recomputed(
        baselines["Megatron's MLP in a node, attention by positions"])
    for micro, schedule in product(MICRO_BATCH_COUNTS, SCHEDULES):
        pipeline = pipeline_strategy(graph, 16, 4, micro, schedule=schedule)
        name = f"pipeline across nodes, {micro} micro-batches" + (
            f", {schedule}" if schedule != "GPipe" else "")
        baselines[name] = pipeline
        baselines[f"{name}, recomputed"] = recomputed(pipeline)
    return baselines


def recomputed(strategy: dict[str, ParallelConfig]) -> dict[str, ParallelConfig]:
    return {name: replace(config, recompute=True) for name, config in strategy.items()}


def choices(strategy: dict[str, ParallelConfig]) -> str:
    """What a strategy chose, in a few words: its layers recomputed, sharded, contracted
    (row-parallel), pipelined (and in which schedule)."""
    configs = strategy.values()
    return (f"{sum(c.recompute for c in configs)} layers recomputed, "
            f"{sum(c.shard_weights for c in configs)} sharded, "
            f"{sum(c.contraction > 1 for c in configs)} row-parallel, most micro-batches "
            f"{max(c.micro_batches for c in configs)} ({sum(bool(c.in_flight) for c in configs)}"
            f" layers in 1F1B), "
            f"{sum(c.degrees[0] == c.num_parts for c in configs)} of {len(strategy)} split by "
            f"sample alone")


def main():
    args = command_line(__doc__, budget=1000, seed=0, global_batch=GLOBAL_BATCH, processes=1)
    machine = machine_module.preset("p100-4x4")
    print(f"GPT-2 medium, global batch {args.global_batch}, Adam, {machine.describe()}, "
          f"{machine.memory(0) / GIB:.1f} GiB a device; {os.cpu_count()} cores, load average "
          f"{os.getloadavg()[0]:.1f} at start", flush=True)
    graph, simulator = gpt2_simulator(machine, args.global_batch)
    results = {}
    for name, strategy in hand_made(graph).items():
        results[name] = simulator.simulate(strategy)
        print(describe(name, results[name]), flush=True)
    options = SearchOptions(args.budget, seed=args.seed, enable_parameter_parallel=True,
                            enable_attribute_parallel=True, enable_recomputation=True,
                            enable_weight_sharding=True, enable_pipeline_parallel=True,
                            processes=args.processes)
    started = time.perf_counter()
    found = search(simulator, options, stream=io.StringIO())
    seconds = time.perf_counter() - started
    best = simulator.simulate(found.best)
    print(describe(f"searched (budget {args.budget}, {args.processes} process"
                   f"{'es' if args.processes > 1 else ''})", best, seconds))
    print(f"  the searched strategy: {choices(found.best)}")
    fitting = [s.time for name, s in results.items() if name != "data parallel" and not s.over]
    if fitting and not best.over:
        print(f"searched against the best fitting hand-made baseline (FSDP, tensor parallel, "
              f"Megatron, pipeline): {min(fitting) / best.time:.2f}x")
    if not results["data parallel"].over and not best.over:
        print(f"searched against data parallelism: "
              f"{results['data parallel'].time / best.time:.2f}x")
    print(f"load average {os.getloadavg()[0]:.1f} at the end")


if __name__ == "__main__":
    main()
