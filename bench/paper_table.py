"""FlexFlow's headline experiment, simulated: searched vs data-parallel iteration time of
AlexNet, Inception-v3, ResNet-101 and a transformer language model on the paper's two clusters
(the `p100-4x4` and `k80-16x4` presets), with the search's parameter and attribute
parallelism enabled.

Per-device batch: 64, or the largest of 32 and 16 at which data parallelism fits in device
memory (so the comparison is between strategies that both run). The search budget is smaller
for the deep networks, whose task graphs have thousands of fused tasks (every batch-norm split
by sample is a cross-device reduction); the budgets used are printed.

The paper (Jia et al., SysML 2019) reports FlexFlow's throughput at 1.3x-3.3x that of data
parallelism across its six DNNs on 16 P100 GPUs; the per-model figures are in its Figure 7.
Our numbers are simulated iteration times of this project's executor (Dask scheduler overheads
as in the presets, weights owned by the first device of each layer), not FlexFlow's runtime.

    python bench/paper_table.py [--budget 1000] [--deep-budget 100] [--models ...]
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

MODELS = ("alexnet", "inception_v3", "resnet101", "transformer_lm")
DEEP = ("inception_v3", "resnet101")
MACHINES = ("p100-4x4", "k80-16x4")
PAPER = "1.3-3.3x (six DNNs, 16 P100s)"


def fitting_batch(build, machine):
    """(per-device batch, graph, objective, simulator, data-parallel simulation): 64, or the
    largest of 32 and 16 at which data parallelism fits in device memory."""
    n = machine.num_devices

    def simulated(per_device):
        graph, objective = dnn.graph_of(build, per_device * n)
        simulator = Simulator(graph, objective, machine)
        return graph, objective, simulator, simulator.simulate(data_parallel_strategy(graph, n))
    per_device, found = 64, simulated(64)
    for smaller in (32, 16):
        baseline = found[3]
        if not baseline.over:
            break
        if smaller == 32 and any(m * smaller / 64 > c for m, c in zip(baseline.memory,
                                                                       baseline.capacity)):
            continue  # even halving everything would not fit: do not simulate it
        per_device, found = smaller, simulated(smaller)
    return (per_device, *found)


def main():
    args = command_line(__doc__, budget=1000, deep_budget=100, k80_deep_budget=10,
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
            options = SearchOptions(budget, enable_parameter_parallel=True,
                                    enable_attribute_parallel=True)
            started = time.perf_counter()
            result = search(simulator, options, stream=io.StringIO())
            best = simulator.simulate(result.best)
            seconds = time.perf_counter() - started
            fits = "" if not baseline.over else " (data parallelism over memory)"
            rows.append((machine_name, name, per_device, budget, baseline.time, best.time,
                         seconds, fits))
            print(f"{machine_name:9s} {name:15s} batch {per_device:2d}/device  budget {budget:5d}"
                  f"  data parallel {baseline.time:10.1f} ms  searched {best.time:10.1f} ms  "
                  f"speed-up {baseline.time / best.time:5.2f}x  ({seconds:.0f} s search){fits}",
                  flush=True)
    print()
    print("| machine | model | batch/device | budget | data parallel (ms) | searched (ms) | "
          "speed-up | paper |")
    print("|---|---|---|---|---|---|---|---|")
    for machine_name, name, per_device, budget, dp, searched, _, fits in rows:
        print(f"| {machine_name} | {name} | {per_device} | {budget} | {dp:.1f} | {searched:.1f} "
              f"| {dp / searched:.2f}x{fits} | {PAPER if machine_name == 'p100-4x4' else '-'} |")
    print(f"load average {os.getloadavg()[0]:.1f} at the end")


if __name__ == "__main__":
    main()
