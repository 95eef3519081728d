"""The native examples run end to end on tiny settings: each exits with status 0 and prints
FlexFlow's timing line, respects -e and --num-samples, and falls back to synthetic data (with a
notice) when its data set is absent; the examples' data helpers read CIFAR-10 binary batches."""

import re
import sys
from pathlib import Path

import numpy as np
import pytest

from .runner import EXAMPLES, METRICS, run_example

ELAPSED = re.compile(r"^epochs (\d+), ELAPSED TIME = \d+\.\d{4}s, THROUGHPUT = \d+\.\d{2} "
                     r"samples/s$", re.MULTILINE)
TINY = ("-b", "16", "-e", "1", "--num-samples", "32")

sys.path.insert(0, str(EXAMPLES))
from example_utils import cifar10_training_data, synthetic_data  # noqa: E402


def without_data(folder: Path) -> tuple[str, ...]:
    """Flags that point the example at the empty `folder`: it then trains on synthetic data and
    never consults this machine's data caches or the network."""
    return ("-d", str(folder))


def elapsed_epochs(result) -> int:
    match = ELAPSED.search(result.stdout)
    assert match, f"no ELAPSED TIME line in:\n{result.stdout}"
    return int(match.group(1))


@pytest.mark.parametrize("script, args", [
    ("mnist_mlp.py", TINY),
    ("mnist_mlp_attach.py", TINY),
    ("mnist_cnn.py", TINY),
    ("print_layers.py", TINY),
    ("cifar10_cnn.py", TINY),
    ("cifar10_cnn_concat.py", TINY),
    ("split.py", TINY),
    ("alexnet.py", ("-b", "2", "-e", "1", "--num-samples", "4")),
    ("resnet.py", ("-b", "2", "-e", "1", "--num-samples", "2")),
    ("inception.py", ("-b", "1", "-e", "1", "--num-samples", "1")),
])
def test_example_trains_and_reports_time(script, args, tmp_path):
    result = run_example(script, *args, *without_data(tmp_path))
    assert elapsed_epochs(result) == 1


def test_epochs_and_num_samples_are_respected(tmp_path):
    result = run_example("cifar10_cnn.py", "-b", "16", "-e", "2", "--num-samples", "48",
                         *without_data(tmp_path))
    assert elapsed_epochs(result) == 2
    batches = [(int(c), int(n)) for c, n in METRICS.findall(result.stderr)]
    assert len(batches) == 2 * 3  # 48 samples / batch 16, twice
    assert [n for _, n in batches] == [16, 32, 48] * 2  # metrics restart every epoch


def test_manual_loop_reports_each_epoch(tmp_path):
    result = run_example("mnist_mlp_attach.py", "-b", "16", "-e", "2", "--num-samples", "32",
                         *without_data(tmp_path))
    assert re.findall(r"^epoch (\d): accuracy", result.stdout, re.MULTILINE) == ["0", "1"]
    assert elapsed_epochs(result) == 2


def test_missing_data_set_gives_one_notice_and_synthetic_data(tmp_path):
    for script in ("mnist_mlp.py", "cifar10_cnn.py"):
        result = run_example(script, *TINY, *without_data(tmp_path))
        notices = [line for line in result.stdout.splitlines() if line.startswith("Note:")]
        assert len(notices) == 1 and str(tmp_path) in notices[0]
        assert "32 synthetic samples" in notices[0]


def test_test_acc_flag_fails_a_run_below_the_expected_accuracy(tmp_path):
    result = run_example("cifar10_cnn.py", *TINY, "-a", *without_data(tmp_path), check=False)
    assert result.returncode != 0
    assert re.search(r"AssertionError: accuracy [\d.]+% is below the expected 90%", result.stderr)


def test_tensor_attach_round_trip():
    result = run_example("tensor_attach.py")
    assert "mapped: shape (8, 3, 10, 10)" in result.stdout
    assert result.stdout.rstrip().endswith("detached")


def test_print_layers_edits_weights(tmp_path):
    result = run_example("print_layers.py", *TINY, *without_data(tmp_path))
    assert re.search(r"^layer 0: Linear\(hidden_100\) name=hidden output dims \(16, 128\)$",
                     result.stdout, re.MULTILINE)
    assert "set to 0.125" in result.stdout and "halved through inline_map" in result.stdout


def write_cifar10_batch(path: Path, labels, seed=0) -> np.ndarray:
    """A CIFAR-10 binary batch: per record a label byte and 3x32x32 pixel bytes."""
    images = np.random.default_rng(seed).integers(0, 256, (len(labels), 3, 32, 32), np.uint8)
    records = np.concatenate([np.asarray(labels, np.uint8)[:, None],
                              images.reshape(len(labels), -1)], axis=1)
    records.tofile(path)
    return images


class FakeConfig:
    def __init__(self, dataset_path):
        self.dataset_path = str(dataset_path)


def test_cifar10_binary_batches_are_read_and_capped(tmp_path):
    folder = tmp_path / "cifar-10-batches-bin"
    folder.mkdir()
    first = write_cifar10_batch(folder / "data_batch_1.bin", [3, 1, 4], seed=1)
    second = write_cifar10_batch(folder / "data_batch_2.bin", [1, 5, 9], seed=2)
    x, y = cifar10_training_data(FakeConfig(tmp_path), num_samples=5)
    assert x.dtype == np.float32 and y.dtype == np.int32
    assert y[:, 0].tolist() == [3, 1, 4, 1, 5]
    np.testing.assert_array_equal(x * 255, np.concatenate([first, second[:2]]))


def test_cifar10_upsampling_repeats_pixels(tmp_path):
    images = write_cifar10_batch(tmp_path / "data_batch_1.bin", [7, 2])
    x, y = cifar10_training_data(FakeConfig(tmp_path), num_samples=2, image_size=64)
    assert x.shape == (2, 3, 64, 64) and y[:, 0].tolist() == [7, 2]
    np.testing.assert_array_equal(x[:, :, ::2, ::2] * 255, images)
    np.testing.assert_array_equal(x[:, :, 1::2, 1::2], x[:, :, ::2, ::2])


def test_cifar10_example_reads_the_dataset_folder(tmp_path):
    write_cifar10_batch(tmp_path / "data_batch_1.bin", list(range(10)) * 4)
    result = run_example("cifar10_cnn.py", *TINY, "-d", str(tmp_path))
    assert "synthetic" not in result.stdout
    assert elapsed_epochs(result) == 1


def test_synthetic_data_is_learnable_and_shaped():
    x, y = synthetic_data(200, (4, 5))
    assert x.shape == (200, 4, 5) and x.dtype == np.float32 and 0 <= x.min() and x.max() < 1
    assert y.shape == (200, 1) and y.dtype == np.int32 and set(y[:, 0]) <= set(range(10))
    means = np.stack([x[y[:, 0] == c].mean(axis=0) for c in range(10)])
    nearest = ((x[:, None] - means[None]) ** 2).sum(axis=(2, 3)).argmin(axis=1)
    assert (nearest == y[:, 0]).mean() > 0.9
