"""Whether the paper's 64 samples per device fit a 16 GB P100 for Inception-v3 and ResNet-101:
PyTorch's footprint measured at batches this machine holds, extrapolated to 64, beside the
memory model's prediction at 64 (what bench/paper_table.py's choice of batch rests on).

PyTorch's footprint is bench/memory.py's figure (peak resident growth over the training steps,
one thread, SGD with momentum) at each of `--batches`, the network a PyTorch module replayed
from bench/dnn.py's builder; a training step's memory is weights and optimizer state plus
activations in proportion to the batch, so the line through the two largest batches gives the
footprint at 64. Beside it, ours measured at the same batches (resident, and allocated against
the model) and the model's prediction at 64 per device for data parallelism on `p100-4x4`
(the simulator's, as paper_table uses it). Activations at 64 dominate both, and what a GPU adds
(cuDNN's workspace, the CUDA context) is not in either.

    python bench/paper_memory.py [--batches 4 8] [--networks resnet101 inception_v3]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

import dnn  # noqa: E402
import memory  # noqa: E402

PAPER_BATCH = 64
STEPS = 2
MACHINE = "p100-4x4"
GB = 2**30


def extrapolated(batches: list[int], peaks: list[int], batch: int) -> float:
    """The line through the last two (batch, peak) points, at `batch`."""
    (b0, p0), (b1, p1) = list(zip(batches, peaks))[-2:]
    return p1 + (p1 - p0) / (b1 - b0) * (batch - b1)


def predicted_at(name: str, per_device: int) -> tuple[int, int]:
    """(the memory model's peak bytes on the busiest device, its capacity) for data
    parallelism of `name` at `per_device` samples per device on MACHINE."""
    from paper_table import RUN_CHECKS

    from flexflow.scheduler import machine as machine_module
    from flexflow.scheduler.simulator import Simulator
    from flexflow.scheduler.strategy import data_parallel_strategy
    machine = machine_module.preset(MACHINE)
    n = machine.num_devices
    graph, objective = dnn.graph_of(getattr(dnn, name), per_device * n)
    simulation = Simulator(graph, objective, machine, checks=RUN_CHECKS).simulate(
        data_parallel_strategy(graph, n))
    return max(simulation.memory), min(simulation.capacity)


def measured(network: str, batches: list[int]) -> dict[str, list[int]]:
    """Per system, the footprint at each of `batches`; ours also allocated and predicted."""
    found: dict[str, list[int]] = {"pytorch": [], "flexflow": [], "allocated": [],
                                   "predicted": []}
    for batch in batches:
        for system in memory.SYSTEMS:
            figures = memory.run_child(system, network, STEPS, batch=batch)
            found[system].append(figures["peak"])
            if system == "flexflow":
                found["allocated"].append(figures["allocated"])
                found["predicted"].append(figures["predicted"])
    return found


def report(network: str, batches: list[int], found: dict[str, list[int]]) -> None:
    name = memory.DEEP_NETWORKS[network][0]
    for i, batch in enumerate(batches):
        print(f"{network:13s} batch {batch:3d}: pytorch {found['pytorch'][i] / GB:6.2f} GiB  "
              f"flexflow-dask {found['flexflow'][i] / GB:6.2f} GiB  (allocated "
              f"{found['allocated'][i] / GB:6.2f}, predicted {found['predicted'][i] / GB:6.2f})")
    theirs = extrapolated(batches, found["pytorch"], PAPER_BATCH)
    ours = extrapolated(batches, found["flexflow"], PAPER_BATCH)
    predicted, capacity = predicted_at(name, PAPER_BATCH)
    fits = "fits" if theirs <= capacity else "does not fit"
    print(f"{network:13s} batch {PAPER_BATCH} (extrapolated): pytorch {theirs / GB:6.2f} GiB "
          f"({fits} {capacity / GB:.0f} GiB)  flexflow-dask {ours / GB:6.2f} GiB  model on "
          f"{MACHINE} {predicted / GB:6.2f} GiB per device ({(predicted - theirs) / theirs:+.0%}"
          f" of PyTorch's)", flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", type=int, nargs="+", default=[4, 8])
    parser.add_argument("--networks", nargs="+", choices=list(memory.DEEP_NETWORKS),
                        default=list(memory.DEEP_NETWORKS))
    args = parser.parse_args()
    if len(args.batches) < 2:
        parser.error("--batches needs two batches or more (the line through the last two)")
    from host_load import StealMeter, describe
    steal = StealMeter()
    print(f"peak resident growth over {STEPS} training steps, one thread; extrapolated to "
          f"{PAPER_BATCH} per device", flush=True)
    for network in args.networks:
        report(network, args.batches, measured(network, args.batches))
    print(f"({describe(steal.read())})")


if __name__ == "__main__":
    main()
