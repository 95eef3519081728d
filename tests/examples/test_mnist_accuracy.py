"""On real MNIST the native examples learn: the MLP and the CNN pass their own -a check (>= 90%
on the training set) after one epoch, the CNN with every batch of the epoch counted.

MNIST is the `mnist_dir` fixture's (tests/conftest.py)."""

import re
from pathlib import Path

from .runner import METRICS, run_example

MNIST_TRAIN_SAMPLES = 60000


def train(script: str, mnist_dir: Path, *args: str, timeout: float, threads: int = 1):
    """`script` on real MNIST, its kernels on `threads` threads (the test runs alone)."""
    env = {"FLEXFLOW_DATA_DIR": str(mnist_dir), **{name: str(threads) for name in (
        "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")}}
    result = run_example(script, *args, env=env, timeout=timeout)
    assert "synthetic" not in result.stdout, result.stdout
    return result


def test_mlp_reaches_90_percent_in_one_epoch(mnist_dir):
    result = train("mnist_mlp.py", mnist_dir, "-e", "1", "-a", timeout=900)
    assert re.search(r"^accuracy [\d.]+% >= the expected 90%$", result.stdout, re.MULTILINE)


def test_cnn_reaches_90_percent_in_one_epoch(mnist_dir):
    batch = 64
    result = train("mnist_cnn.py", mnist_dir, "-e", "1", "-b", str(batch), "-a", timeout=3600,
                   threads=2)
    assert re.search(r"^accuracy [\d.]+% >= the expected 90%$", result.stdout, re.MULTILINE)
    correct, seen = [(int(c), int(n)) for c, n in METRICS.findall(result.stderr)][-1]
    assert seen == MNIST_TRAIN_SAMPLES // batch * batch
    assert correct / seen >= 0.9, f"training accuracy {100 * correct / seen:.2f}% in epoch 1"
