"""Searched strategy vs data parallelism, both measured, on a 2-worker local cluster.

The AlexNet-style CNN (`dnn.alexnet_cifar`: five convolutions on 3x32x32 images, two 4096-wide
dense layers, 21 M weights, batch 64) is compiled twice on one LocalCluster of two
single-threaded worker processes: once data parallel, once with `--budget N` and parameter
(and attribute) parallelism enabled, which calibrates the cluster and searches as any run would.
Both are then trained in alternating rounds, so slow periods of a shared machine hit both, and
compared by the median iteration time.

    python bench/search_vs_dp.py [--budget 1000] [--rounds 5] [--steps 3]
"""

from __future__ import annotations

import os
import statistics
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))

from dnn import alexnet_cifar  # noqa: E402
from host_load import StealMeter, describe  # noqa: E402
from local_cluster import local_cluster  # noqa: E402
from command_line import command_line  # noqa: E402
from simulator_accuracy import step_ms  # noqa: E402

from flexflow.core import FFConfig, FFModel, LossType, SGDOptimizer  # noqa: E402
from flexflow.scheduler import cluster as cluster_module  # noqa: E402

BATCH = 64


def compiled(argv):
    ff = FFModel(FFConfig(argv=argv, batch_size=BATCH))
    (x,) = alexnet_cifar(ff, BATCH)
    ff.compile(optimizer=SGDOptimizer(ff, lr=0.01, momentum=0.9),
               loss_type=LossType.LOSS_SPARSE_CATEGORICAL_CROSSENTROPY)
    rng = np.random.default_rng(0)
    x.set_tensor(ff, rng.standard_normal(x.dims).astype(np.float32))
    ff.label_tensor.set_tensor(ff, rng.integers(0, 10, (BATCH, 1)).astype(np.int32))
    ff.train_step()  # warm-up
    return ff


def main():
    args = command_line(__doc__, budget=1000, rounds=5, steps=3, no_attribute=False)
    print(f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at start")
    with local_cluster(2) as cluster:
        base = ["--scheduler", cluster.scheduler_address, "-ll:gpu", "2"]
        data_parallel = compiled(base)
        flags = ["--budget", str(args.budget), "--enable-parameter-parallel"]
        if not args.no_attribute:
            flags.append("--enable-attribute-parallel")
        searched = compiled(base + flags)
        times = {"data parallel": [], "searched": []}
        steal = StealMeter()
        for _ in range(args.rounds):
            times["data parallel"] += step_ms(data_parallel, args.steps)
            times["searched"] += step_ms(searched, args.steps)
        dp, best = (statistics.median(times[k]) for k in ("data parallel", "searched"))
        print(f"data parallel: {dp:8.1f} ms per iteration ({BATCH * 1e3 / dp:7.1f} samples/s)")
        print(f"searched     : {best:8.1f} ms per iteration ({BATCH * 1e3 / best:7.1f} samples/s)")
        print(f"throughput searched / data parallel: {dp / best:.2f}x (target >= 1.3x); medians "
              f"of {args.rounds} alternating rounds of {args.steps} iterations "
              f"({describe(steal.read())} while they ran)")
        cluster_module.disconnect(cluster.scheduler_address)
    print(f"load average {os.getloadavg()[0]:.1f} at the end")


if __name__ == "__main__":
    main()
