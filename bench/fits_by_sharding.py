"""A transformer that data parallelism cannot fit under a per-device memory cap, trained on a
real 2-worker Dask cluster under that cap with the strategy the search finds once it may shard
weights (ZeRO-3/FSDP) and recompute activations.

The cap is each worker's memory limit: on CPU workers that is the memory compile's check and
the search give a device (`-ll:fsize` is a GPU's, docs/launching.md; it is passed too, and
does not apply here). The bench:

1. compiles data parallelism (no search) on the capped workers, which must refuse with the
   memory check's error naming the devices over, and prints the model's figure per worker;
2. compiles with `--budget N --enable-weight-sharding --enable-recomputation` on the same
   workers: the search's strategy (its sharded and recomputed layers) must fit, and trains
   `--steps` Adam steps on one fixed synthetic batch, timing each;
3. trains the same model and data on one device in this process, without a cap, and compares
   the losses and final weights (1e-4 relative, tests/parallel's `assert_same_run`);
4. prints, per worker, the measured allocated peak (`--profiling`'s, as bench/memory.py
   compares with the model), the resident peak's growth, the model's prediction and the cap.

    python bench/fits_by_sharding.py [--size bench|test] [--budget 200] [--steps 5]
"""

from __future__ import annotations

import argparse
import io
import os
import sys
import time
from contextlib import redirect_stdout
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
from distributed import Client

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parent.parent))

import dnn  # noqa: E402
import memory  # noqa: E402
from local_cluster import local_cluster  # noqa: E402
from tests.parallel.test_strategy_invariance import Run, assert_same_run, weights  # noqa: E402
from tests.parallel.training import vanishing_gradient_weights  # noqa: E402

from flexflow.core import AdamOptimizer, FFConfig, FFModel, LossType, MetricsType  # noqa: E402
from flexflow.scheduler import cluster as cluster_module  # noqa: E402
from flexflow.scheduler.strategy import StrategyError, data_parallel_strategy  # noqa: E402

MiB = 1 << 20


@dataclass(frozen=True)
class Size:
    """A transformer_lm and the cap per worker (MiB) it is trained under."""
    batch: int
    seq: int
    vocab: int
    width: int
    heads: int
    layers: int
    cap_mib: int

    def build(self, ff):
        return dnn.transformer_lm(ff, self.batch, self.seq, self.vocab, self.width, self.heads,
                                  self.layers)

    @property
    def limit_mib(self) -> int:
        """Each worker's memory limit, which the plan may use: the cap less HEADROOM for what
        the memory model does not count (it predicts 3-7% under what workers allocate,
        docs/benchmarks.md), as one gives a GPU's -ll:fsize below the card's memory."""
        return int(self.cap_mib * (1 - HEADROOM))


HEADROOM = 0.1
# The cap sits between the memory model's peak per worker of data parallelism (over) and of
# data parallelism with every weighted layer sharded (under), both with the collectives on.
SIZES = {"bench": Size(batch=8, seq=32, vocab=4096, width=512, heads=8, layers=4, cap_mib=224),
         "test": Size(batch=4, seq=16, vocab=2048, width=128, heads=4, layers=2, cap_mib=16)}
SEARCH_FLAGS = ("--enable-weight-sharding", "--enable-recomputation")


def batch_of(size: Size) -> tuple[np.ndarray, np.ndarray]:
    """One fixed synthetic batch: tokens and a next token per position, from one seed."""
    rng = np.random.default_rng(0)
    return (rng.integers(0, size.vocab, (size.batch, size.seq)).astype(np.int32),
            rng.integers(0, size.vocab, (size.batch, size.seq, 1)).astype(np.int32))


def compiled(size: Size, argv: list[str]) -> FFModel:
    """transformer_lm of `size` compiled with `argv` for Adam and next-token cross-entropy,
    fed its batch."""
    ff = FFModel(FFConfig(argv=argv, batch_size=size.batch))
    [tokens] = size.build(ff)
    ff.compile(optimizer=AdamOptimizer(ff, alpha=0.001),
               loss_type=LossType.LOSS_SPARSE_CATEGORICAL_CROSSENTROPY,
               metrics=[MetricsType.METRICS_ACCURACY])
    xb, yb = batch_of(size)
    tokens.set_tensor(ff, xb)
    ff.label_tensor.set_tensor(ff, yb)
    return ff


def trained(ff: FFModel, steps: int) -> tuple[Run, list[float]]:
    """`steps` training steps on the fed batch: the run (losses, final weights) and each
    step's seconds. Attention's key biases are left out of the weights: their gradient is
    zero but for float32 rounding (tests/parallel/training.py), which Adam's step, scaled by
    the gradient's own size, turns into moves of the learning rate's size in any direction."""
    losses, seconds = [], []
    for _ in range(steps):
        start = time.perf_counter()
        losses.append(ff.train_step())
        seconds.append(time.perf_counter() - start)
    rounding = vanishing_gradient_weights(ff.graph)
    kept = {key: value for key, value in weights(ff).items() if key not in rounding}
    return Run(np.array(losses), kept), seconds


def cluster_argv(address: str, size: Size, *flags: str) -> list[str]:
    """The flags of a run on the capped workers at `address` (collectives on: data
    parallelism's gradients summed by torch.distributed, as on a cluster by default)."""
    return ["--scheduler", address, "-ll:gpu", "2", "-ll:fsize", str(size.cap_mib),
            "--collectives", "on", *flags]


def data_parallel_refusal(address: str, size: Size) -> str:
    """The memory check's error when data parallelism (no search) compiles on the capped
    workers; a RuntimeError if it compiles."""
    try:
        compiled(size, cluster_argv(address, size))
    except StrategyError as error:
        return str(error)
    finally:
        cluster_module.disconnect(address)
    raise RuntimeError("data parallelism compiled under the cap: no case")


def searched_run(address: str, size: Size, budget: int, steps: int, starts: dict) -> dict:
    """Search and train on the capped workers: the strategy block the search printed, the
    run, step times, and per worker the allocated peak, the resident peak's growth since
    `starts` (bench/memory.py's measures) and the model's prediction."""
    printed = io.StringIO()
    ff = None
    try:
        with redirect_stdout(printed):
            ff = compiled(size, cluster_argv(address, size, "--budget", str(budget),
                                             "--profiling", *SEARCH_FLAGS))
        run, seconds = trained(ff, steps)
        client, workers = ff.compiled.cluster.client, ff.compiled.cluster.workers
        resident = client.run(lambda dask_worker: memory.peak_since(starts[dask_worker.address]))
        return {"printed": printed.getvalue(), "run": run, "seconds": seconds,
                "layers": chosen_layers(ff),
                "allocated": ff.get_perf_metrics().peak_memory,
                "resident": [resident[w] for w in workers],
                "predicted": memory.memory_model(ff, len(workers))}
    finally:
        if ff is not None:
            ff.compiled.executor.close()
        cluster_module.disconnect(address)


def predicted_peaks(size: Size, sharded: bool) -> list[int]:
    """The memory model's peak bytes per worker of data parallelism on 2 devices with the
    collectives on, every weighted layer's weights sharded where `sharded` (compiled in this
    process, no cap)."""
    ff = FFModel(FFConfig(argv=["-ll:gpu", "2", "--in-process", "--collectives", "on"],
                          batch_size=size.batch))
    size.build(ff)
    strategy = {name: replace(config, shard_weights=sharded)
                for name, config in data_parallel_strategy(ff.graph, 2).items()}
    ff.compile(optimizer=AdamOptimizer(ff, alpha=0.001),
               loss_type=LossType.LOSS_SPARSE_CATEGORICAL_CROSSENTROPY, strategy=strategy)
    return memory.memory_model(ff, 2)


def model_bytes(size: Size) -> int:
    """Bytes of the trainable weights."""
    graph, _ = dnn.graph_of(lambda ff, batch: size.build(ff), size.batch)
    return sum(int(np.prod(w.spec.shape)) * 4 for layer in graph.layers for w in layer.weights
               if w.trainable)


def single_device_run(size: Size, steps: int) -> tuple[Run, list[float]]:
    """The same model and batch on one device in this process, without a cap."""
    return trained(compiled(size, []), steps)


def chosen_layers(ff: FFModel) -> tuple[list[str], list[str]]:
    """(the layers whose weights are sharded, the layers recomputed) of the compiled run. The
    sharded ones are read from the task graph: a layer the strategy marks sharded on one
    device keeps its weights whole (docs/memory.md), and the printed block still marks it."""
    layers = ff.graph.layers
    sharded = sorted({key[0] for key in ff.compiled.executor.taskgraph.sharded})
    return ([layers[i].name for i in sharded],
            [name for name, config in ff.compiled.strategy.items() if config.recompute])


def measure(size: Size, budget: int, steps: int) -> dict:
    """Everything the bench prints, on a fresh 2-worker cluster capped at `size.cap_mib`."""
    figures = {"single": single_device_run(size, steps),
               "predicted": {sharded: predicted_peaks(size, sharded) for sharded in (False, True)}}
    with local_cluster(2, memory_limit=size.limit_mib * MiB) as cluster, \
            Client(cluster.scheduler_address) as client:
        address = cluster.scheduler_address
        figures["refusal"] = data_parallel_refusal(address, size)
        starts = client.run(memory._imports_then_start_peak)
        figures["searched"] = searched_run(address, size, budget, steps, starts)
    return figures


def mib(peaks: list[int]) -> str:
    """Bytes per worker as MiB, for a line of the report."""
    return ", ".join(f"{p / MiB:.1f}" for p in peaks)


def report(size: Size, figures: dict, loads: tuple[str, str]) -> None:
    """The bench's lines (see the module's docstring)."""
    searched = figures["searched"]
    single_run, single_seconds = figures["single"]
    sharded, recomputed = searched["layers"]
    print(f"model: {size}, {model_bytes(size) / MiB:.1f} MiB of weights, Adam")
    print(f"cap: {size.cap_mib} MiB per worker; each worker's memory limit (the plan's) "
          f"{size.limit_mib} MiB; -ll:fsize {size.cap_mib} passed too, a GPU's (not applied)")
    print(f"predicted per worker: data parallelism {mib(figures['predicted'][False])} MiB "
          f"(over the cap); data parallelism with sharded weights "
          f"{mib(figures['predicted'][True])} MiB")
    print(f"data parallelism, no search: refused: {figures['refusal']}")
    print(searched["printed"].rstrip())
    print(f"searched strategy: {len(sharded)} layers with sharded weights {sharded}; "
          f"{len(recomputed)} recomputed {recomputed}")
    for d, (allocated, resident, predicted) in enumerate(zip(
            searched["allocated"], searched["resident"], searched["predicted"])):
        print(f"worker {d}: measured allocated peak {allocated / MiB:.1f} MiB, predicted "
              f"{predicted / MiB:.1f} MiB, cap {size.cap_mib} MiB; resident peak growth "
              f"{resident / MiB:.1f} MiB")
    run = searched["run"]
    gap = np.max(np.abs(run.losses - single_run.losses) / np.abs(single_run.losses))
    assert_same_run(run, single_run)
    print(f"losses, 2 capped workers: {np.round(run.losses, 6).tolist()}; one device, no cap: "
          f"{np.round(single_run.losses, 6).tolist()}; largest relative gap {gap:.1e} "
          f"(losses and weights within 1e-4)")
    print(f"step seconds, 2 capped workers: {np.round(searched['seconds'], 3).tolist()}; "
          f"one device: {np.round(single_seconds, 3).tolist()}")
    print(f"load average at start {loads[0]}, at end {loads[1]}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", choices=sorted(SIZES), default="bench")
    parser.add_argument("--budget", type=int, default=200)
    parser.add_argument("--steps", type=int, default=5)
    args = parser.parse_args()
    start_load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    figures = measure(SIZES[args.size], args.budget, args.steps)
    end_load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    report(SIZES[args.size], figures, (start_load, end_load))


if __name__ == "__main__":
    main()
