"""Data-parallel scaling on a real local cluster: throughput of a compute-heavy CNN on 2 workers
over 1 worker, with the same total cores (1 worker with 2 BLAS threads vs 2 workers with 1), and
the number of dependent hops (Dask task levels) in one data-parallel iteration.

    python bench/scaling.py [--steps 10] [--repeats 3] [--batch 64]
"""

from __future__ import annotations

import os
import statistics
import time

import numpy as np
from distributed import LocalCluster
from command_line import command_line

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


def throughput(workers: int, args) -> tuple[float, int]:
    """Median samples/s over repeats, and the dependent hops of one iteration."""
    blas = str(CORES // workers)
    env = {name: blas for name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")}
    with LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                      dashboard_address=":0", env=env) as cluster:
        argv = ["--scheduler", cluster.scheduler_address, "-ll:gpu", str(workers)]
        ff = FFModel(FFConfig(argv=argv, batch_size=args.batch))
        x = cnn(ff, args.batch)
        ff.compile(optimizer=SGDOptimizer(ff, lr=0.01, momentum=0.9),
                   loss_type=LossType.LOSS_SPARSE_CATEGORICAL_CROSSENTROPY)
        rng = np.random.default_rng(0)
        x.set_tensor(ff, rng.standard_normal(x.dims).astype(np.float32))
        ff.label_tensor.set_tensor(ff, rng.integers(0, 10, (args.batch, 1)).astype(np.int32))
        ff.train_step()
        runs = []
        for _ in range(args.repeats):
            start = time.perf_counter()
            for _ in range(args.steps):
                ff.train_step()
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
    args = command_line(__doc__, steps=10, repeats=3, batch=64)
    print(f"CNN 3x32x32, batch {args.batch}, {CORES} cores in all; median of {args.repeats} "
          f"runs of {args.steps} steps (cpu count {os.cpu_count()})")
    one, hops_one = throughput(1, args)
    two, hops_two = throughput(2, args)
    print(f"1 worker  x {CORES} threads: {one:8.1f} samples/s, {hops_one} dependent hop(s)")
    print(f"2 workers x 1 thread : {two:8.1f} samples/s, {hops_two} dependent hop(s)")
    print(f"data-parallel speed-up 2 workers / 1 worker: {two / one:.2f}x")


if __name__ == "__main__":
    main()
