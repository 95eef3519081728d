"""What the Keras examples share: their flags and their data.

Flags (besides FlexFlow's own, -b etc.): `-e/--epochs N`, `--num-samples N` (train on at most N
samples), `--accuracy P` (the percentage the accuracy checks expect, instead of ModelAccuracy's),
and for the CIFAR-10 scripts `--image-size N` (images resized to N x N; quick runs use small
ones).

Data comes from flexflow.keras.datasets (files in $FLEXFLOW_DATA_DIR or the Keras cache, see
flexflow/keras/datasets/files.py). When a data set is not there, the examples train on synthetic
data of the same shapes, after one notice line, so that every script runs anywhere: each class
is a noisy copy of its own random prototype, so accuracy still rises.
"""

from __future__ import annotations

import argparse

import numpy as np

from flexflow.keras.datasets import cifar10, mnist, reuters
from flexflow.keras.datasets.files import DatasetNotFound
from flexflow.keras.preprocessing.text import Tokenizer


def script_args(epochs: int, image_size: int | None = None) -> argparse.Namespace:
    """The example's flags; `image_size` adds `--image-size N` with that default."""
    parser = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    parser.add_argument("-e", "--epochs", type=int, default=epochs)
    parser.add_argument("--num-samples", type=int, default=None)
    parser.add_argument("--accuracy", type=float, default=None)
    if image_size is not None:
        parser.add_argument("--image-size", type=int, default=image_size)
    return parser.parse_known_args()[0]


def synthetic(num_samples: int, shape: tuple, classes: int = 10, seed: int = 0):
    """float32 samples in [0, 1) whose class can be learnt, int32 labels (N, 1)."""
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, classes, (num_samples, 1)).astype(np.int32)
    prototypes = rng.random((classes,) + shape, dtype=np.float32)
    samples = 0.5 * (rng.random((num_samples,) + shape, dtype=np.float32)
                     + prototypes[labels[:, 0]])
    return samples, labels


def _or_synthetic(load, name: str, num_samples: int, shape: tuple, classes=10):
    """load(), or synthetic training data and a test set a fifth of its size."""
    try:
        return load()
    except DatasetNotFound as error:
        print(f"Note: {name} not found ({str(error).split(' was found')[0]}); training on "
              f"synthetic data of shape {shape} instead")
    num_test = max(num_samples // 5, 32)
    x, y = synthetic(num_samples + num_test, shape, classes)
    return (x[:num_samples], y[:num_samples]), (x[num_samples:], y[num_samples:])


def mnist_data(shape: tuple, num_samples: int | None = None):
    """MNIST as float32 in [0, 1] of shape (N,) + shape ((784,) or (1, 28, 28)) and int32
    labels (N, 1)."""
    def load():
        (x_train, y_train), (x_test, y_test) = mnist.load_data()
        prepare = lambda x: x.reshape((len(x),) + shape).astype(np.float32) / 255  # noqa: E731
        return ((prepare(x_train[:num_samples]), _labels(y_train[:num_samples])),
                (prepare(x_test), _labels(y_test)))
    return _or_synthetic(load, "MNIST", num_samples or 60000, shape)


def cifar10_data(num_samples: int, image_size: int = 32):
    """CIFAR-10 as float32 (N, 3, image_size, image_size) in [0, 1] (resized by nearest
    neighbour when image_size is not 32) and int32 labels (N, 1)."""
    def load():
        (x_train, y_train), (x_test, y_test) = cifar10.load_data(num_samples)
        return ((_images(x_train, image_size), _labels(y_train)),
                (_images(x_test, image_size), _labels(y_test)))
    return _or_synthetic(load, "CIFAR-10", num_samples, (3, image_size, image_size))


def reuters_data(num_words: int, num_samples: int | None = None):
    """Reuters newswires as binary bag-of-words rows (N, num_words) float32, int32 labels of
    46 topics."""
    def load():
        (x_train, y_train), (x_test, y_test) = reuters.load_data(num_words=num_words,
                                                                 test_split=0.2)
        tokenizer = Tokenizer(num_words=num_words)
        matrix = lambda x: tokenizer.sequences_to_matrix(x, "binary").astype(np.float32)  # noqa
        return ((matrix(x_train[:num_samples]), _labels(y_train[:num_samples])),
                (matrix(x_test), _labels(y_test)))
    return _or_synthetic(load, "Reuters", num_samples or 8982, (num_words,), classes=46)


def _labels(y) -> np.ndarray:
    return np.asarray(y).astype(np.int32).reshape(-1, 1)


def _images(x: np.ndarray, size: int) -> np.ndarray:
    if size != x.shape[-1]:
        pick = np.arange(size) * x.shape[-1] // size
        x = x[:, :, pick][:, :, :, pick]
    return x.astype(np.float32) / 255
