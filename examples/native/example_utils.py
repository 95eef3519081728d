"""What the native examples share besides the FlexFlow API: their own flags and their data.

The examples read MNIST through `flexflow.keras.datasets.mnist` and CIFAR-10 from the binary
batches (`data_batch_1.bin` ...) in the `-d/--dataset` folder. When the files are not there they
train, like FlexFlow's C++ examples, on synthetic data of the same shapes, after one notice line,
so every script runs anywhere. The synthetic samples are learnable (each class is a noisy copy of
its own random prototype), so accuracy still rises and `-a` is meaningful on them.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import numpy as np
from flexflow.keras.datasets import mnist
from flexflow.keras.datasets.files import DatasetNotFound

NUM_CLASSES = 10
MNIST_SAMPLES = 60000
MNIST_TRAIN_FILES = ("mnist.npz", mnist.IDX_FILES[0], mnist.IDX_FILES[0] + ".gz")
CIFAR10_RECORD = 1 + 3 * 32 * 32  # label byte, then the red, green and blue 32x32 planes
CIFAR10_BATCHES = [f"data_batch_{i}.bin" for i in range(1, 6)]


def script_args() -> argparse.Namespace:
    """The examples' own flags; everything else on the command line is FFConfig's."""
    parser = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    parser.add_argument("-a", "--test_acc", action="store_true",
                        help="fail unless the model reaches its ModelAccuracy")
    parser.add_argument("--num-samples", type=int, default=None,
                        help="train on at most this many samples")
    return parser.parse_known_args()[0]


def synthetic_data(num_samples: int, sample_shape: tuple[int, ...], seed: int = 0):
    """Float32 samples in [0, 1) whose class can be learnt, and int32 labels of shape (N, 1)."""
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, NUM_CLASSES, size=(num_samples, 1), dtype=np.int32)
    prototypes = rng.random((NUM_CLASSES,) + tuple(sample_shape), dtype=np.float32)
    samples = rng.random((num_samples,) + tuple(sample_shape), dtype=np.float32)
    samples += prototypes[labels[:, 0]]
    samples *= 0.5
    return samples, labels


def _synthetic_instead(reason: str, num_samples: int, sample_shape: tuple[int, ...]):
    print(f"Note: {reason.rstrip('.')}; training on {num_samples} synthetic samples of shape "
          f"{tuple(sample_shape)} instead")
    return synthetic_data(num_samples, sample_shape)


def mnist_training_data(ffconfig, sample_shape: tuple[int, ...], num_samples: int | None):
    """MNIST training images as float32 in [0, 1] of shape (N,) + sample_shape ((784,) or
    (1, 28, 28)) and labels (N, 1) int32. `-d` names the folder holding the files (and then
    only that folder counts); without it the loader's usual folders are searched."""
    num_synthetic = num_samples or MNIST_SAMPLES
    folder = ffconfig.dataset_path
    if folder:
        if not any((Path(folder) / name).is_file() for name in MNIST_TRAIN_FILES):
            return _synthetic_instead(f"no MNIST training files ({', '.join(MNIST_TRAIN_FILES)}) "
                                      f"in {folder}", num_synthetic, sample_shape)
        os.environ["FLEXFLOW_DATA_DIR"] = folder  # searched first by the loader
    try:
        (x_train, y_train), _ = mnist.load_data()
    except DatasetNotFound as error:
        return _synthetic_instead(str(error), num_synthetic, sample_shape)
    x_train, y_train = x_train[:num_samples], y_train[:num_samples]
    x = x_train.reshape((len(x_train),) + tuple(sample_shape)).astype(np.float32) / 255
    return x, y_train.astype(np.int32).reshape(-1, 1)


def cifar10_training_data(ffconfig, num_samples: int, image_size: int = 32):
    """CIFAR-10 training images as float32 (N, 3, image_size, image_size) in [0, 1] (resized by
    nearest neighbour when image_size is not 32) and labels (N, 1) int32, read from the binary
    batches in `-d` (or its `cifar-10-batches-bin` subfolder); synthetic without them."""
    shape = (3, image_size, image_size)
    folder = _cifar10_folder(ffconfig.dataset_path)
    if folder is None:
        where = (f"no CIFAR-10 binary batches ({CIFAR10_BATCHES[0]} ...) in "
                 f"{ffconfig.dataset_path}" if ffconfig.dataset_path
                 else "no CIFAR-10 folder given with -d")
        return _synthetic_instead(where, num_samples, shape)
    records = []
    for name in CIFAR10_BATCHES:
        if sum(len(r) for r in records) >= num_samples or not (folder / name).is_file():
            break
        records.append(np.fromfile(folder / name, np.uint8).reshape(-1, CIFAR10_RECORD))
    data = np.concatenate(records)[:num_samples]
    images = data[:, 1:].reshape(-1, 3, 32, 32)
    if image_size != 32:
        pick = np.arange(image_size) * 32 // image_size
        images = images[:, :, pick][:, :, :, pick]
    return images.astype(np.float32) / 255, data[:, :1].astype(np.int32)


def _cifar10_folder(dataset_path: str) -> Path | None:
    if not dataset_path:
        return None
    for folder in (Path(dataset_path), Path(dataset_path) / "cifar-10-batches-bin"):
        if (folder / CIFAR10_BATCHES[0]).is_file():
            return folder
    return None
