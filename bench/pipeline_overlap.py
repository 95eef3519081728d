"""Whether a pipeline's micro-batches overlap its stages in real runs: per-step wall time of a
deep MLP trained on a local cluster of 2 single-threaded Dask workers (one a device), as a
2-stage pipeline in 1, 2, 4 and 8 micro-batches, against data parallelism on the same workers,
one device in this process, and each pipeline run serially in this process.

The model (FFModel API): `--layers` dense layers of `--width` with ReLU, then a dense to
`--classes` and a softmax, SGD (learning rate 0.001), the sparse categorical cross-entropy,
batch `--batch`; at the default sizes a whole step is about 0.25 s on one core, so that one
stage's work per micro-batch (tens of ms) dwarfs a message between the workers (a few ms,
bench/hop_latency.py). The systems, all compiled once, the cluster ones on one cluster:

    one device          in this process, no flags (the losses' reference)
    data parallel       the default strategy of `-ll:gpu 2` on the workers (gradients summed
                        by all-reduces)
    pipeline x1         scheduler/pipelines.py's 2 stages (balanced by flops), one per worker,
                        the batch whole: operator placement, the stages one after the other
    pipeline xM         the same stages in M micro-batches (GPipe's schedule): stage 2 runs
                        micro-batch j while stage 1 runs micro-batch j+1
    pipeline xM serial  the same strategy on 2 devices in this process (`--in-process`),
                        which runs all of both devices' work one task after another: the work
                        the pipeline's schedule has to overlap, micro-batching's own costs
                        included, without messages

Each system trains `--warmup` steps, then `--rounds` rounds in which every system trains
`--steps` steps (`ff.train_step()`, each timed on its own), the systems' order rotated each
round so that a slow spell of the shared host falls on all of them. Step i feeds every system
the same batch (one of a few synthetic batches from a fixed seed), so every system's measured
losses must be the one device's within 1e-5 relative; the worst gap is printed. Reported per
system: the median step time over all rounds and its speed-up against the pipeline in 1
micro-batch and against data parallelism (above 1: faster); for a pipeline on the workers its
overlap, its serial run's median over its own (1: the stages ran one after the other), beside
the ideal 2M/(M+1) of 2 equal stages with free messages; and per round each system's median
with the host's load and CPU steal (bench/host_load.py). The workers keep no copies for
recovery (`--recovery-interval 0`), so that no measured step pays for one.

Run with one BLAS thread in this process too (the workers are given one), so that the one-device
figure is one core's:

    OMP_NUM_THREADS=1 python bench/pipeline_overlap.py [--rounds 3] [--steps 4] [--warmup 2]
        [--batch 128] [--features 1024] [--width 2048] [--layers 8] [--classes 4]
        [--micro 2 4 8]
"""

from __future__ import annotations

import statistics
import sys
import time
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Callable

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parent.parent))

from command_line import command_line  # noqa: E402
from host_load import StealMeter, describe  # noqa: E402
from local_cluster import local_cluster  # noqa: E402

from flexflow.core import (ActiMode, DataType, FFConfig, FFModel, LossType,  # noqa: E402
                           SGDOptimizer, Tensor)
from flexflow.scheduler import cluster as cluster_module  # noqa: E402
from flexflow.scheduler.pipelines import pipeline_strategy  # noqa: E402

LOSS_TOLERANCE = 1e-5  # relative, against the one device's losses
# small enough that float32 rounding (sums in another order) stays far under LOSS_TOLERANCE for
# tens of steps: at 0.01 it grows to 3e-5 by step 14 at the default sizes, at 0.001 to 5e-7
# by step 20, the loss still falling
LEARNING_RATE = 0.001
DISTINCT_BATCHES = 4  # step i feeds batch i % DISTINCT_BATCHES
REFERENCE, DATA_PARALLEL, PLACEMENT = "one device", "data parallel", "pipeline x1"
SERIAL = " serial"  # the suffix of a pipeline run in this process


@dataclass(frozen=True)
class Size:
    """The MLP: `layers` dense layers of `width` with ReLU on `features` inputs, a dense to
    `classes` and a softmax, trained on batches of `batch` samples."""
    batch: int
    features: int
    width: int
    layers: int
    classes: int

    def build(self, ff: FFModel) -> Tensor:
        """The model in `ff`; returns its input tensor."""
        x = ff.create_tensor([self.batch, self.features], DataType.DT_FLOAT)
        t = x
        for _ in range(self.layers):
            t = ff.dense(t, self.width, ActiMode.AC_MODE_RELU)
        ff.softmax(ff.dense(t, self.classes))
        return x


@dataclass
class Trained:
    """A compiled system, its input tensor, and the losses and seconds of its measured steps."""
    ff: FFModel
    x: Tensor
    losses: list[float]
    seconds: list[float]


def batches(size: Size) -> list[tuple[np.ndarray, np.ndarray]]:
    """DISTINCT_BATCHES synthetic batches from one seed: each sample its class's fixed random
    template plus unit noise, and its label."""
    rng = np.random.default_rng(0)
    templates = rng.standard_normal((size.classes, size.features)).astype(np.float32)
    found = []
    for _ in range(DISTINCT_BATCHES):
        labels = rng.integers(0, size.classes, size.batch)
        noise = rng.standard_normal((size.batch, size.features)).astype(np.float32)
        found.append((templates[labels] + noise, labels.reshape(-1, 1).astype(np.int32)))
    return found


def compiled(size: Size, argv: list[str], strategy: Callable | None) -> Trained:
    """The MLP compiled with `argv` under `strategy(graph)` (None: the default strategy)."""
    ff = FFModel(FFConfig(argv=argv, batch_size=size.batch))
    x = size.build(ff)
    ff.compile(optimizer=SGDOptimizer(ff, lr=LEARNING_RATE),
               loss_type=LossType.LOSS_SPARSE_CATEGORICAL_CROSSENTROPY,
               strategy=None if strategy is None else strategy(ff.graph))
    return Trained(ff, x, [], [])


def systems(size: Size, address: str, micro: list[int]) -> dict[str, Trained]:
    """Every system, compiled: one device in this process; on the 2 workers at `address` data
    parallelism and the 2-stage pipeline in 1 and each of `micro` micro-batches; and each such
    pipeline on 2 devices in this process, which runs their work one after the other."""
    cluster = ["--scheduler", address, "-ll:gpu", "2", "--recovery-interval", "0"]
    found = {REFERENCE: compiled(size, [], None),
             DATA_PARALLEL: compiled(size, cluster, None)}
    for m in [1, *micro]:
        stages = partial(_two_stages, micro=m)
        found[f"pipeline x{m}"] = compiled(size, cluster, stages)
        found[f"pipeline x{m}{SERIAL}"] = compiled(size, ["-ll:gpu", "2", "--in-process"],
                                                   stages)
    return found


def _two_stages(graph, micro: int) -> dict:
    """The 2-stage pipeline on 2 devices in `micro` micro-batches."""
    return pipeline_strategy(graph, 2, 2, micro)


def train(system: Trained, data: list, first: int, steps: int, measured: bool) -> None:
    """Steps `first` to `first + steps - 1` of `system`, step i on batch i of `data`
    (cycled); each step's loss and seconds kept where `measured`."""
    for i in range(first, first + steps):
        x, y = data[i % len(data)]
        system.x.set_tensor(system.ff, x)
        system.ff.label_tensor.set_tensor(system.ff, y)
        start = time.perf_counter()
        loss = system.ff.train_step()
        if measured:
            system.seconds.append(time.perf_counter() - start)
            system.losses.append(loss)


def timed_rounds(found: dict[str, Trained], data: list, rounds: int, steps: int,
                 warmup: int, report: Callable[[str], None]) -> None:
    """`warmup` unmeasured steps of every system, then `rounds` rounds of `steps` measured
    steps of each, the order rotated by one each round; after each round `report` gets a
    line of each system's median ms in it and the host's load and steal."""
    names = list(found)
    for name in names:
        train(found[name], data, 0, warmup, measured=False)
    steal = StealMeter()
    for r in range(rounds):
        order = names[r % len(names):] + names[:r % len(names)]
        for name in order:
            train(found[name], data, warmup + r * steps, steps, measured=True)
        medians = ", ".join(
            f"{name} {1e3 * statistics.median(found[name].seconds[-steps:]):.0f}"
            for name in names)
        report(f"round {r + 1}: ms per step {medians} ({describe(steal.read())})")


def measure(size: Size, rounds: int, steps: int, warmup: int, micro: list[int],
            report: Callable[[str], None] = print) -> dict[str, Trained]:
    """Every system trained and timed on a fresh 2-worker cluster (see the module's
    docstring)."""
    with local_cluster(2) as cluster:
        address = cluster.scheduler_address
        try:
            found = systems(size, address, micro)
            try:
                timed_rounds(found, batches(size), rounds, steps, warmup, report)
            finally:
                for system in found.values():
                    system.ff.compiled.executor.close()
        finally:
            cluster_module.disconnect(address)
    return found


def worst_loss_gap(found: dict[str, Trained]) -> dict[str, float]:
    """Each system's largest relative difference from the one device's measured losses."""
    reference = np.array(found[REFERENCE].losses)
    return {name: float(np.max(np.abs(np.array(system.losses) - reference) / np.abs(reference)))
            for name, system in found.items()}


def summary(found: dict[str, Trained]) -> list[str]:
    """The report's table: per system its median ms per step, the speed-ups against the
    pipeline in 1 micro-batch and against data parallelism, for a pipeline on the workers its
    overlap (its serial run's median over its own) beside the ideal, and the worst loss gap."""
    median = {name: 1e3 * statistics.median(s.seconds) for name, s in found.items()}
    gaps = worst_loss_gap(found)
    lines = [f"{'system':<22}{'median ms':>10}{'vs x1':>8}{'vs DP':>8}{'overlap':>9}"
             f"{'ideal':>7}{'steps':>7}  worst loss gap"]
    for name, ms in median.items():
        overlap = ideal = ""
        if name.startswith("pipeline") and not name.endswith(SERIAL):
            micro = int(name.split("x")[-1])
            overlap = f"{median[name + SERIAL] / ms:.2f}x"
            ideal = f"{2 * micro / (micro + 1):.2f}x"
        lines.append(f"{name:<22}{ms:>10.1f}{median[PLACEMENT] / ms:>7.2f}x"
                     f"{median[DATA_PARALLEL] / ms:>7.2f}x{overlap:>9}{ideal:>7}"
                     f"{len(found[name].seconds):>7}  {gaps[name]:.1e}")
    worst = max(gaps.values())
    verdict = "within" if worst <= LOSS_TOLERANCE else "NOT within"
    lines.append(f"losses: every system's measured losses are {verdict} {LOSS_TOLERANCE:g} "
                 f"relative of the one device's (worst {worst:.1e})")
    return lines


def host_now() -> str:
    """The host's load, and its CPU steal over the next second."""
    steal = StealMeter()
    time.sleep(1.0)
    return describe(steal.read())


def main():
    args = command_line(__doc__, rounds=3, steps=4, warmup=2, batch=128, features=1024,
                        width=2048, layers=8, classes=4, micro=[2, 4, 8])
    size = Size(args.batch, args.features, args.width, args.layers, args.classes)
    micro = [m for m in args.micro if size.batch % m == 0]
    print(f"model: {size}; SGD; 2 single-threaded Dask workers; pipelines in 1 and {micro} "
          f"micro-batches; {args.rounds} rounds x {args.steps} steps after {args.warmup} "
          f"warm-up steps", flush=True)
    print(f"host at start: {host_now()}", flush=True)
    found = measure(size, args.rounds, args.steps, args.warmup, micro,
                    lambda line: print(line, flush=True))
    print("\n".join(summary(found)))
    print(f"host at end: {host_now()}")


if __name__ == "__main__":
    main()
