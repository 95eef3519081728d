"""On real MNIST the native examples learn: the MLP passes its own -a check (>= 90% on the
training set) after one epoch, and the CNN's training accuracy reaches 95% within two epochs.

MNIST is the `mnist_dir` fixture's (tests/conftest.py)."""

import re
from pathlib import Path

from .runner import METRICS, run_example

MNIST_TRAIN_SAMPLES = 60000


def train(script: str, mnist_dir: Path, *args: str, timeout: float):
    result = run_example(script, *args, env={"FLEXFLOW_DATA_DIR": str(mnist_dir)},
                         timeout=timeout)
    assert "synthetic" not in result.stdout, result.stdout
    return result


def test_mlp_reaches_90_percent_in_one_epoch(mnist_dir):
    result = train("mnist_mlp.py", mnist_dir, "-e", "1", "-a", timeout=900)
    assert re.search(r"^accuracy [\d.]+% >= the expected 90%$", result.stdout, re.MULTILINE)


def test_cnn_reaches_95_percent_within_two_epochs(mnist_dir):
    batch = 64
    result = train("mnist_cnn.py", mnist_dir, "-e", "2", "-b", str(batch), "-a", timeout=7200)
    last_epoch = [(int(c), int(n)) for c, n in METRICS.findall(result.stderr)][-1]
    correct, seen = last_epoch
    assert seen == MNIST_TRAIN_SAMPLES // batch * batch
    assert correct / seen >= 0.95, f"training accuracy {100 * correct / seen:.2f}% in epoch 2"
