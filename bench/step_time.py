"""One training step of flexflow-dask against PyTorch eager on the same CPU, in one process.

Models: the MLP 784-512-512-10 and a CIFAR-size CNN (FlexFlow's cifar10_cnn: four 3x3 convs,
two max pools, dense 512, dense 10), batch 64, SGD with momentum, sparse cross-entropy. Both
frameworks run the same network on the same batch; each timing is the median over repeats of the
mean step time of a run of steps. Prints the ratio flexflow-dask / PyTorch (lower is better).

    python bench/step_time.py [--repeats 5] [--steps 20] [--threads N]

`--threads N` gives both frameworks N threads (BLAS and PyTorch's intra-op pool); on a shared,
loaded machine `--threads 1` is the fair comparison, since spinning BLAS threads collapse when
another process holds a core.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time


def _threads_from_argv() -> int | None:
    """Read --threads before numpy loads: BLAS fixes its thread count at import."""
    if "--threads" in sys.argv[:-1]:
        threads = sys.argv[sys.argv.index("--threads") + 1]
        for name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
            os.environ[name] = threads
        return int(threads)
    return None


THREADS = _threads_from_argv()

import numpy as np  # noqa: E402
import torch  # noqa: E402
from torch import nn  # noqa: E402

from flexflow.core import (ActiMode, DataType, FFConfig, FFModel, LossType, MetricsType,
                           SGDOptimizer)  # noqa: E402

BATCH = 64


def ff_mlp(ff):
    x = ff.create_tensor([BATCH, 784], DataType.DT_FLOAT)
    t = ff.dense(x, 512, ActiMode.AC_MODE_RELU)
    t = ff.dense(t, 512, ActiMode.AC_MODE_RELU)
    ff.softmax(ff.dense(t, 10))
    return x, (784,)


def torch_mlp():
    return nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(),
                         nn.Linear(512, 10))


def ff_cnn(ff):
    x = ff.create_tensor([BATCH, 3, 32, 32], DataType.DT_FLOAT)
    t = ff.conv2d(x, 32, 3, 3, 1, 1, 1, 1, ActiMode.AC_MODE_RELU)
    t = ff.conv2d(t, 32, 3, 3, 1, 1, 1, 1, ActiMode.AC_MODE_RELU)
    t = ff.pool2d(t, 2, 2, 2, 2, 0, 0)
    t = ff.conv2d(t, 64, 3, 3, 1, 1, 1, 1, ActiMode.AC_MODE_RELU)
    t = ff.conv2d(t, 64, 3, 3, 1, 1, 1, 1, ActiMode.AC_MODE_RELU)
    t = ff.pool2d(t, 2, 2, 2, 2, 0, 0)
    t = ff.flat(t)
    t = ff.dense(t, 512, ActiMode.AC_MODE_RELU)
    ff.softmax(ff.dense(t, 10))
    return x, (3, 32, 32)


def torch_cnn():
    return nn.Sequential(nn.Conv2d(3, 32, 3, padding=1), nn.ReLU(),
                         nn.Conv2d(32, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2, 2),
                         nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(),
                         nn.Conv2d(64, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2, 2),
                         nn.Flatten(), nn.Linear(64 * 8 * 8, 512), nn.ReLU(), nn.Linear(512, 10))


def time_steps(step, steps: int, repeats: int) -> float:
    step()  # warm-up
    runs = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(steps):
            step()
        runs.append((time.perf_counter() - start) / steps)
    return statistics.median(runs)


def flexflow_step(build, xb, yb):
    ff = FFModel(FFConfig(argv=[], batch_size=BATCH))
    x, _ = build(ff)
    ff.compile(optimizer=SGDOptimizer(ff, lr=0.01, momentum=0.9),
               loss_type=LossType.LOSS_SPARSE_CATEGORICAL_CROSSENTROPY,
               metrics=[MetricsType.METRICS_ACCURACY])
    x.set_tensor(ff, xb)
    ff.label_tensor.set_tensor(ff, yb)
    return ff.train_step


def torch_step(net, xb, yb):
    opt = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9)
    x, y = torch.tensor(xb), torch.tensor(yb[:, 0]).long()

    def step():
        opt.zero_grad()
        nn.functional.cross_entropy(net(x), y).backward()
        opt.step()
    return step


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--threads", type=int, default=None,
                        help="threads for both frameworks (default: their own defaults)")
    args = parser.parse_args()
    if THREADS:
        torch.set_num_threads(THREADS)
    rng = np.random.default_rng(0)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads; batch {BATCH}; "
          f"median of {args.repeats} runs of {args.steps} steps")
    for name, ff_build, torch_build in (("MLP 784-512-512-10", ff_mlp, torch_mlp),
                                        ("CIFAR-10 CNN", ff_cnn, torch_cnn)):
        shape = ff_build(FFModel(FFConfig(argv=[], batch_size=BATCH)))[1]
        xb = rng.standard_normal((BATCH,) + shape).astype(np.float32)
        yb = rng.integers(0, 10, (BATCH, 1)).astype(np.int32)
        ff_time = time_steps(flexflow_step(ff_build, xb, yb), args.steps, args.repeats)
        torch_time = time_steps(torch_step(torch_build(), xb, yb), args.steps, args.repeats)
        print(f"{name:20s} flexflow-dask {ff_time * 1e3:8.2f} ms  pytorch {torch_time * 1e3:8.2f} ms"
              f"  ratio {ff_time / torch_time:5.2f}x")


if __name__ == "__main__":
    main()
