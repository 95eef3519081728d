"""FlexFlow's scaling experiment, simulated: how the iteration time of data parallelism and of
the searched strategy grows from 1 to 64 devices on the paper's clusters and on one H100 node.

For each machine preset (`p100-4x4`, `k80-16x4`, `h100-8`; a job on n of its devices gets the
first n, filling its nodes in order) and each device count n it has, every model (ResNet-50 as
in examples/native/resnet.py, ResNet-101, Inception-v3, AlexNet and the transformer LM of
bench/dnn.py) is simulated at the same per-device batch, so the global batch grows with n:

    data parallel (ms)  the simulated iteration time of data parallelism on n devices
    efficiency          its time on 1 device over its time on n (1.00: perfect weak scaling)
    searched (ms)       the best strategy of an MCMC search of `--budget` proposals (parameter
                        and attribute parallelism enabled, as bench/paper_table.py searches)
    speed-up            data parallel over searched

The per-device batch is the paper's, 64 (images for the CNNs; sequences of dnn.py's 64 tokens
for the transformer), where one device of the preset holds a training iteration at that batch
in the simulator's memory model, else the largest power of two that it holds; the line after
each table says which. A time marked `*` is of a strategy over some device's memory (data
parallelism's can grow with n: each weight's owner receives every device's gradient).
Everything comes from the simulator at run time; the preset's overheads are those of this
project's Dask executor, not FlexFlow's runtime.

    python bench/paper_scaling.py [--models resnet50 resnet101 inception_v3 alexnet
                                   transformer_lm] [--presets p100-4x4 k80-16x4 h100-8]
                                  [--devices 1 2 4 8 16 32 64] [--budget 10]
"""

from __future__ import annotations

import os
import sys
from dataclasses import replace
from pathlib import Path
from typing import Iterator, NamedTuple

sys.path.insert(0, str(Path(__file__).parent))

import dnn  # noqa: E402
from command_line import command_line  # noqa: E402
from host_load import StealMeter, describe  # noqa: E402
from paper_table import data_parallel, fitting_batch, search_best  # noqa: E402

from flexflow.scheduler import machine as machine_module  # noqa: E402
from flexflow.scheduler.machine import MachineModel  # noqa: E402

MODELS = ["resnet50", "resnet101", "inception_v3", "alexnet", "transformer_lm"]
PRESETS = ["p100-4x4", "k80-16x4", "h100-8"]
DEVICES = [1, 2, 4, 8, 16, 32, 64]
BATCHES = (64, 32, 16, 8, 4, 2, 1)  # per device: the paper's, then each power of two below
COLUMNS = ("model", "devices", "batch/device", "global batch", "data parallel (ms)",
           "efficiency", "searched (ms)", "speed-up", "search (s)")


class Row(NamedTuple):
    model: str
    devices: int
    per_device: int
    global_batch: int  # the simulated graph's batch
    data_parallel_ms: float
    data_parallel_over: bool  # over some device's memory
    efficiency: float
    searched_ms: float
    searched_over: bool
    search_seconds: float

    def cells(self) -> tuple[str, ...]:
        """The row's cells of the printed table, in COLUMNS' order."""
        def ms(value, over):
            return f"{value:.1f}" + ("*" if over else "")
        return (self.model, str(self.devices), str(self.per_device), str(self.global_batch),
                ms(self.data_parallel_ms, self.data_parallel_over), f"{self.efficiency:.2f}",
                ms(self.searched_ms, self.searched_over),
                f"{self.data_parallel_ms / self.searched_ms:.2f}x", f"{self.search_seconds:.1f}")


def first_devices(machine: MachineModel, n: int) -> MachineModel:
    """The first `n` devices of `machine` and the links among them: what a job given n of a
    cluster's devices runs on (flexflow.scheduler.machine builds its presets only whole)."""
    part = replace(machine, device_kinds=machine.device_kinds[:n], nodes=machine.nodes[:n],
                   routes={pair: route for pair, route in machine.routes.items()
                           if max(pair) < n},
                   host_routes=machine.host_routes[:n], name=f"{machine.name}[:{n}]")
    part.check(part.name)
    return part


def baseline(name: str, machine: MachineModel) -> tuple:
    """fitting_batch's (per-device batch, graph, objective, simulator, simulation) of network
    `name`'s data parallelism on one device of `machine`, at the first of BATCHES it holds."""
    return fitting_batch(getattr(dnn, name), first_devices(machine, 1), BATCHES)


def scaling_rows(name: str, machine: MachineModel, counts: list[int], budget: int,
                 fitted: tuple) -> Iterator[Row]:
    """Network `name`'s row at each of `counts` devices of `machine`, at the per-device batch of
    `fitted` (its `baseline`), whose one simulation is the numerator of every efficiency, so
    the efficiency at 1 device is exactly 1."""
    per_device, one = fitted[0], fitted[4]
    for n in counts:
        found = fitted[1:] if n == 1 else data_parallel(getattr(dnn, name),
                                                         first_devices(machine, n), per_device)
        graph, _, simulator, simulation = found
        best, seconds = search_best(simulator, budget)
        yield Row(name, n, per_device, graph.tensors[graph.inputs[0]].spec.shape[0],
                  simulation.time, bool(simulation.over), one.time / simulation.time,
                  best.time, bool(best.over), seconds)


def batch_note(name: str, machine: MachineModel, fitted: tuple) -> str:
    """Which per-device batch network `name` ran at on `machine`, and why."""
    per_device, one = fitted[0], fitted[4]
    kind = machine.kind(0)
    memory = f"one {kind.name} ({kind.memory / 2**30:.0f} GiB)"
    if one.over:
        return f"{name}: {per_device} per device, and even so over the memory of {memory}"
    if per_device == BATCHES[0]:
        return f"{name}: {per_device} per device (the paper's)"
    return (f"{name}: {per_device} per device, the largest power of two at which {memory} "
            f"holds an iteration ({BATCHES[0]} does not)")


def table(preset: str, args) -> None:
    """The preset's table, each row printed as soon as it is simulated, then the batches."""
    machine = machine_module.preset(preset)
    counts = [n for n in args.devices if n <= machine.num_devices]
    skipped = [str(n) for n in args.devices if n > machine.num_devices]
    print(f"\n{machine.describe()}; budget {args.budget} proposals"
          + (f"; {', '.join(skipped)} devices skipped (more than it has)" if skipped else ""))
    if not counts:
        return
    print("| " + " | ".join(COLUMNS) + " |")
    print("|" + "---|" * len(COLUMNS))
    notes = []
    for name in args.models:
        fitted = baseline(name, machine)
        for row in scaling_rows(name, machine, counts, args.budget, fitted):
            print("| " + " | ".join(row.cells()) + " |", flush=True)
        notes.append(batch_note(name, machine, fitted))
    print("\n".join(notes))


def check_options(args) -> None:
    """Exits on a model, preset or device count this bench does not have."""
    unknown = (sorted(set(args.models) - set(MODELS)) + sorted(set(args.presets) - set(PRESETS))
               + [n for n in args.devices if n < 1])
    if unknown:
        raise SystemExit(f"unknown model, preset or device count {unknown}; models {MODELS}, "
                         f"presets {PRESETS}, devices at least 1")


def main():
    args = command_line(__doc__, models=list(MODELS), presets=list(PRESETS),
                        devices=list(DEVICES), budget=10)
    check_options(args)
    steal = StealMeter()
    print(f"{os.cpu_count()} cores, {describe(None)} at start; models "
          f"{' '.join(args.models)}; devices {' '.join(map(str, args.devices))}; a time with * "
          f"is over some device's memory")
    for preset in args.presets:
        table(preset, args)
    print(f"\n{describe(steal.read())} over the run")


if __name__ == "__main__":
    main()
