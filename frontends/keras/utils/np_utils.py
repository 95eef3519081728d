"""Array helpers of Keras's `utils`."""

from __future__ import annotations

import numpy as np


def to_categorical(y, num_classes=None, dtype="float32") -> np.ndarray:
    """One-hot rows for integer class labels `y` (any shape; a trailing dim of 1 is dropped)."""
    y = np.asarray(y, dtype="int64")
    shape = y.shape[:-1] if y.ndim > 1 and y.shape[-1] == 1 else y.shape
    y = y.reshape(-1)
    if y.size and y.min() < 0:
        raise ValueError(f"to_categorical: labels must not be negative, got {y.min()}")
    num_classes = int(y.max()) + 1 if num_classes is None else int(num_classes)
    if y.size and y.max() >= num_classes:
        raise ValueError(f"to_categorical: label {y.max()} does not fit num_classes="
                         f"{num_classes}")
    out = np.zeros((y.size, num_classes), dtype=dtype)
    out[np.arange(y.size), y] = 1
    return out.reshape(shape + (num_classes,))


def normalize(x, axis=-1, order=2) -> np.ndarray:
    """x divided by its `order`-norm along `axis` (zero vectors are left unchanged)."""
    x = np.asarray(x)
    norm = np.atleast_1d(np.linalg.norm(x, order, axis))
    norm[norm == 0] = 1
    return x / np.expand_dims(norm, axis)
