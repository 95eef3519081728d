"""FlexFlow's headline experiment, simulated: searched vs data-parallel iteration time of
AlexNet, Inception-v3, ResNet-101 and a transformer language model on the paper's two clusters
(the `p100-4x4` and `k80-16x4` presets), with the search's parameter and attribute
parallelism enabled.

Per-device batch: 64, or the largest of 32 and 16 at which data parallelism fits in device
memory (so the comparison is between strategies that both run). The search budget is FlexFlow's
usual 1,000 proposals for every row; `--deep-budget` and `--k80-deep-budget` lower it for the
deep networks on 16 and on 64 devices, whose task graphs have thousands of fused groups (every
batch-norm split by sample is a cross-device reduction). The budgets used and each search's
seconds are printed.

The paper (Jia et al., SysML 2019) reports FlexFlow's throughput at 1.3x-3.3x that of data
parallelism across its six DNNs on 16 P100 GPUs; the per-model figures are in its Figure 7.
Our numbers are simulated iteration times of this project's executor as a cluster with torch
runs it (`RUN_CHECKS`: replicated weights' gradients summed by NCCL-style all-reduces in buckets,
batch-norm statistics by collectives, the non-finite guard on; Dask scheduler overheads as in the
presets), not FlexFlow's runtime.

    python bench/paper_table.py [--budget 1000] [--deep-budget 1000] [--k80-deep-budget 1000]
                                [--models ...] [--machines p100-4x4,k80-16x4]
"""

from __future__ import annotations

import io
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

import dnn  # noqa: E402
from command_line import command_line  # noqa: E402

from flexflow.scheduler import machine as machine_module  # noqa: E402
from flexflow.scheduler.search import SearchOptions, search  # noqa: E402
from flexflow.scheduler.simulator import Simulator  # noqa: E402
from flexflow.scheduler.strategy import data_parallel_strategy  # noqa: E402
from flexflow.scheduler.taskgraph import Checks  # noqa: E402

MODELS = ("alexnet", "inception_v3", "resnet101", "transformer_lm")
DEEP = ("inception_v3", "resnet101")
MACHINES = ("p100-4x4", "k80-16x4")
PAPER = "1.3-3.3x (six DNNs, 16 P100s)"
RUN_CHECKS = Checks(finite_gradients=True, collectives=True)  # a default run's task graph


def data_parallel(build, machine, per_device):
    """(graph, objective, simulator, data-parallel simulation) of `build` at `per_device`
    samples on each of `machine`'s devices."""
    n = machine.num_devices
    graph, objective = dnn.graph_of(build, per_device * n)
    simulator = Simulator(graph, objective, machine, checks=RUN_CHECKS)
    return graph, objective, simulator, simulator.simulate(data_parallel_strategy(graph, n))


def fitting_batch(build, machine, batches=(64, 32, 16)):
    """(per-device batch, graph, objective, simulator, data-parallel simulation) at the first of
    `batches` (largest first) at which data parallelism fits in device memory, else at the
    last. A batch is not simulated where even memory in proportion to the batch (a lower bound:
    the weights do not shrink with it) would not fit, unless it is the last."""
    per_device, found = batches[0], data_parallel(build, machine, batches[0])
    for smaller in batches[1:]:
        baseline = found[3]
        if not baseline.over:
            break
        if smaller != batches[-1] and any(m * smaller / per_device > c for m, c in
                                          zip(baseline.memory, baseline.capacity)):
            continue  # hopeless: do not simulate it
        per_device, found = smaller, data_parallel(build, machine, smaller)
    return (per_device, *found)


def search_best(simulator, budget):
    """(simulation of the best strategy, seconds) of a search of `budget` proposals with
    parameter and attribute parallelism enabled; its printed lines are dropped."""
    options = SearchOptions(budget, enable_parameter_parallel=True,
                            enable_attribute_parallel=True)
    started = time.perf_counter()
    result = search(simulator, options, stream=io.StringIO())
    return simulator.simulate(result.best), time.perf_counter() - started


def main():
    args = command_line(__doc__, budget=1000, deep_budget=1000, k80_deep_budget=1000,
                        models=",".join(MODELS), machines=",".join(MACHINES))
    print(f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at start")
    rows = []
    for machine_name in args.machines.split(","):
        machine = machine_module.preset(machine_name)
        for name in args.models.split(","):
            per_device, graph, objective, simulator, baseline = fitting_batch(
                getattr(dnn, name), machine)
            budget = args.budget
            if name in DEEP:
                budget = args.k80_deep_budget if machine.num_devices > 16 else args.deep_budget
            best, seconds = search_best(simulator, budget)
            fits = "" if not baseline.over else " (data parallelism over memory)"
            rows.append((machine_name, name, per_device, budget, baseline.time, best.time,
                         seconds, fits))
            print(f"{machine_name:9s} {name:15s} batch {per_device:2d}/device  budget {budget:5d}"
                  f"  data parallel {baseline.time:10.1f} ms  searched {best.time:10.1f} ms  "
                  f"speed-up {baseline.time / best.time:5.2f}x  ({seconds:.0f} s search){fits}",
                  flush=True)
    print()
    print("| machine | model | batch/device | budget | search (s) | data parallel (ms) | "
          "searched (ms) | speed-up | paper |")
    print("|---|---|---|---|---|---|---|---|---|")
    for machine_name, name, per_device, budget, dp, searched, seconds, fits in rows:
        print(f"| {machine_name} | {name} | {per_device} | {budget} | {seconds:.0f} | {dp:.1f} "
              f"| {searched:.1f} | {dp / searched:.2f}x{fits} "
              f"| {PAPER if machine_name == 'p100-4x4' else '-'} |")
    print(f"load average {os.getloadavg()[0]:.1f} at the end")


if __name__ == "__main__":
    main()
