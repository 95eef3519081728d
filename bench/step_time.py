"""One training step of flexflow-dask, on both kernel paths, against PyTorch eager on the same CPU.

Models (batch 64, SGD with momentum, sparse cross-entropy; both frameworks report the batch's
loss and accuracy, as FlexFlow's metrics do):
    mlp          the MLP 784-512-512-10
    cifar10_cnn  FlexFlow's cifar10_cnn: four 3x3 convolutions, two max pools, dense 512, dense 10
    resnet18     ResNet-18 on 3x32x32 images (bench/dnn.py: resnet18_cifar), with batch norm

Each pair of a thread count and a kernel path runs in a child process of its own: BLAS fixes
its thread pool when NumPy is imported, and the reference kernels' BLAS threads, spinning after
each product, would slow down torch's threads in the same process. Both frameworks get that
many threads. In a child each model is timed in rounds that alternate flexflow-dask (on the
vendor kernels, torch's oneDNN and MKL on our arrays, ops/vendor.py, or on the reference NumPy
kernels) with PyTorch, so a slow spell of a shared host hits both; a round is the mean step
time of a run of steps, and the figures are medians over rounds. Ratios are flexflow-dask /
PyTorch in the same process (lower is better).

    python bench/step_time.py [--rounds 5] [--threads 1 2] [--kernels vendor reference]
                              [--models mlp cifar10_cnn resnet18]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

BATCH = 64
MODELS = {"mlp": 200, "cifar10_cnn": 6, "resnet18": 2}  # name -> steps per round
THREAD_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


def ff_model(name: str, ff):
    """Builds `name` on `ff`; returns its input tensor."""
    from dnn import RELU, cifar10_cnn, resnet18_cifar

    from flexflow.core import DataType
    if name == "resnet18":
        return resnet18_cifar(ff, BATCH)[0]
    if name == "cifar10_cnn":
        return cifar10_cnn(ff, BATCH, second_padding=1)[0]
    x = ff.create_tensor([BATCH, 784], DataType.DT_FLOAT)
    ff.softmax(ff.dense(ff.dense(ff.dense(x, 512, RELU), 512, RELU), 10))
    return x


def torch_model(name: str):
    from torch import nn
    if name == "mlp":
        return nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(),
                             nn.Linear(512, 10))
    if name == "cifar10_cnn":
        return nn.Sequential(nn.Conv2d(3, 32, 3, padding=1), nn.ReLU(),
                             nn.Conv2d(32, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2, 2),
                             nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(),
                             nn.Conv2d(64, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2, 2),
                             nn.Flatten(), nn.Linear(64 * 8 * 8, 512), nn.ReLU(),
                             nn.Linear(512, 10))
    return _torch_resnet18()


def _torch_resnet18():
    from torch import nn

    def conv_bn(cin, cout, kernel, stride):
        return [nn.Conv2d(cin, cout, kernel, stride, kernel // 2, bias=False),
                nn.BatchNorm2d(cout)]

    class Block(nn.Module):
        def __init__(self, cin, cout, stride):
            super().__init__()
            self.body = nn.Sequential(*conv_bn(cin, cout, 3, stride), nn.ReLU(),
                                      *conv_bn(cout, cout, 3, 1))
            self.shortcut = (nn.Sequential(*conv_bn(cin, cout, 1, stride))
                             if stride != 1 or cin != cout else nn.Identity())

        def forward(self, x):
            return nn.functional.relu(self.body(x) + self.shortcut(x))

    layers, cin = [*conv_bn(3, 64, 3, 1), nn.ReLU()], 64
    for width, stride in ((64, 1), (128, 2), (256, 2), (512, 2)):
        layers += [Block(cin, width, stride), Block(width, width, 1)]
        cin = width
    return nn.Sequential(*layers, nn.AvgPool2d(4), nn.Flatten(), nn.Linear(512, 10))


def batch_of(name: str, rng):
    import numpy as np
    shape = (784,) if name == "mlp" else (3, 32, 32)
    return (rng.standard_normal((BATCH,) + shape).astype(np.float32),
            rng.integers(0, 10, (BATCH, 1)).astype(np.int32))


def flexflow_step(name: str, xb, yb):
    from flexflow.core import FFConfig, FFModel, LossType, MetricsType, SGDOptimizer
    ff = FFModel(FFConfig(argv=[], batch_size=BATCH))
    x = ff_model(name, ff)
    ff.compile(optimizer=SGDOptimizer(ff, lr=0.01, momentum=0.9),
               loss_type=LossType.LOSS_SPARSE_CATEGORICAL_CROSSENTROPY,
               metrics=[MetricsType.METRICS_ACCURACY])
    x.set_tensor(ff, xb)
    ff.label_tensor.set_tensor(ff, yb)
    return ff.train_step


def torch_step(name: str, xb, yb):
    import torch
    net = torch_model(name)
    opt = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9)
    x, y = torch.tensor(xb), torch.tensor(yb[:, 0]).long()

    def step():
        opt.zero_grad()
        out = net(x)
        loss = torch.nn.functional.cross_entropy(out, y)
        loss.backward()
        opt.step()
        # the batch's loss and accuracy, which flexflow-dask's step reports (FlexFlow's metrics)
        return loss.item(), int((out.argmax(1) == y).sum())
    return step


def mean_step_ms(step, steps: int) -> float:
    start = time.perf_counter()
    for _ in range(steps):
        step()
    return (time.perf_counter() - start) / steps * 1e3


def measure(name: str, rounds: int) -> dict[str, float]:
    """Median over alternating rounds of each framework's mean step time (ms)."""
    import numpy as np
    xb, yb = batch_of(name, np.random.default_rng(0))
    systems = {"flexflow": flexflow_step(name, xb, yb), "pytorch": torch_step(name, xb, yb)}
    for step in systems.values():
        step()  # warm-up: first-call costs and the optimizer state
    times: dict[str, list[float]] = {system: [] for system in systems}
    for _ in range(rounds):
        for system, step in systems.items():
            times[system].append(mean_step_ms(step, MODELS[name]))
    return {system: statistics.median(values) for system, values in times.items()}


def child(args) -> None:
    import torch
    from host_load import StealMeter, describe

    from flexflow.ops import vendor
    (threads,), (path,) = args.threads, args.kernels
    vendor.use_kernels(path)
    torch.set_num_threads(threads)
    for name in args.models:
        steal = StealMeter()
        ms = measure(name, args.rounds)
        print(f"{name:12s} {threads} thread(s)  {vendor.kernel_path():9s}  flexflow-dask "
              f"{ms['flexflow']:8.1f} ms  pytorch {ms['pytorch']:8.1f} ms  ratio "
              f"{ms['flexflow'] / ms['pytorch']:5.2f}x  ({describe(steal.read())})", flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--kernels", nargs="+", choices=("vendor", "reference"),
                        default=["vendor", "reference"])
    parser.add_argument("--models", nargs="+", choices=list(MODELS), default=list(MODELS))
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    sys.path.insert(0, str(Path(__file__).parent))
    if args.child:
        child(args)
        return
    import torch
    print(f"torch {torch.__version__}; batch {BATCH}; median of {args.rounds} alternating rounds; "
          f"flexflow-dask / PyTorch (lower is better)", flush=True)
    for threads in args.threads:
        for path in args.kernels:
            env = dict(os.environ, **{name: str(threads) for name in THREAD_VARIABLES})
            subprocess.run([sys.executable, __file__, "--child", "--threads", str(threads),
                            "--kernels", path, "--rounds", str(args.rounds),
                            "--models", *args.models], env=env, check=True)


if __name__ == "__main__":
    main()
