"""Data-parallel scaling on a real local cluster: throughput of a compute-heavy CNN on 2 workers
over 1 worker, with the same total cores (1 worker with 2 BLAS threads vs 2 workers with 1), and
the number of dependent hops (Dask task levels) in one data-parallel iteration. Each repeat is a
one-epoch `fit` of `--steps` batches on data loaders, as a user trains (the data kept on the
workers, the iterations in windows).

    python bench/scaling.py [--steps 10] [--repeats 3] [--batch 64]
"""

from __future__ import annotations

import contextlib
import io
import os
import statistics
import time

import numpy as np
from distributed import LocalCluster
from command_line import command_line
from host_load import StealMeter, describe

from flexflow.core import ActiMode, FFConfig, FFModel, LossType, SGDOptimizer
from flexflow.scheduler import cluster as cluster_module
from flexflow.scheduler.fusion import fuse
from flexflow.scheduler.taskgraph import PHASES

CORES = 2


def cnn(ff, batch):
    x = ff.create_tensor([batch, 3, 32, 32])
    t = ff.conv2d(x, 32, 3, 3, 1, 1, 1, 1, ActiMode.AC_MODE_RELU)
    t = ff.conv2d(t, 64, 3, 3, 1, 1, 1, 1, ActiMode.AC_MODE_RELU)
    t = ff.pool2d(t, 2, 2, 2, 2, 0, 0)
    t = ff.conv2d(t, 64, 3, 3, 1, 1, 1, 1, ActiMode.AC_MODE_RELU)
    t = ff.pool2d(t, 2, 2, 2, 2, 0, 0)
    t = ff.flat(t)
    ff.softmax(ff.dense(t, 10))
    return x


def throughput(workers: int, threads: int, args) -> tuple[float, int]:
    """Median samples/s over repeats, and the dependent hops of one iteration."""
    blas = str(threads)
    env = {name: blas for name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")}
    with LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                      dashboard_address=":0", env=env) as cluster:
        argv = ["--scheduler", cluster.scheduler_address, "-ll:gpu", str(workers)]
        ff = FFModel(FFConfig(argv=argv, batch_size=args.batch))
        x = cnn(ff, args.batch)
        ff.compile(optimizer=SGDOptimizer(ff, lr=0.01, momentum=0.9),
                   loss_type=LossType.LOSS_SPARSE_CATEGORICAL_CROSSENTROPY)
        rng = np.random.default_rng(0)
        images = rng.standard_normal((args.batch * args.steps, *x.dims[1:])).astype(np.float32)
        labels = rng.integers(0, 10, (args.batch * args.steps, 1)).astype(np.int32)
        loaders = (ff.create_data_loader(x, images),
                   ff.create_data_loader(ff.label_tensor, labels))
        runs = []
        for repeat in range(args.repeats + 1):  # the first is a warm-up
            start = time.perf_counter()
            with contextlib.redirect_stderr(io.StringIO()):  # its [Metrics] lines
                ff.fit(x=loaders[0], y=loaders[1], epochs=1)
            if repeat:
                runs.append(args.steps * args.batch / (time.perf_counter() - start))
        groups = fuse(ff.compiled.executor.taskgraph.phase(*PHASES))
        hops = hop_count(groups)
        ff.compiled.executor.close()
        cluster_module.disconnect(cluster.scheduler_address)
    return statistics.median(runs), hops


def hop_count(groups) -> int:
    """Length of the longest chain of dependent Dask tasks."""
    depth: dict[str, int] = {}
    for group in groups:  # fuse() returns groups in dependency order
        depth[group.name] = 1 + max([depth[k] for k in group.receive_from + group.after] or [0])
    return max(depth.values())


def main():
    args = command_line(__doc__, steps=10, repeats=3, batch=64, rounds=3)
    steal = StealMeter()
    print(f"CNN 3x32x32, batch {args.batch}, {CORES} cores; {args.rounds} rounds, each the "
          f"median of {args.repeats} fits of {args.steps} steps (cpu count {os.cpu_count()}, "
          f"{describe(steal.read())})")
    layouts = [(1, CORES), (2, 1), (1, 1)]  # (workers, threads per worker)
    figures: dict[tuple[int, int], list[float]] = {layout: [] for layout in layouts}
    hops = {}
    for r in range(args.rounds):
        for layout in layouts[r % 3:] + layouts[:r % 3]:
            samples, hops[layout] = throughput(*layout, args)
            figures[layout].append(samples)
    median = {layout: statistics.median(values) for layout, values in figures.items()}
    for (workers, threads), value in median.items():
        print(f"{workers} worker(s) x {threads} thread(s): {value:8.1f} samples/s "
              f"(rounds: {', '.join(f'{v:.1f}' for v in figures[(workers, threads)])}), "
              f"{hops[(workers, threads)]} dependent hop(s)")
    print(f"2 workers x 1 thread over 1 worker x {CORES} threads: "
          f"{median[(2, 1)] / median[(1, CORES)]:.2f}x; over 1 worker x 1 thread: "
          f"{median[(2, 1)] / median[(1, 1)]:.2f}x ({describe(steal.read())})")


if __name__ == "__main__":
    main()
