"""One CIFAR batch of the python version: a pickled dict with 'data' (uint8, N x 3072: the red,
green and blue 32x32 planes of each image) and the labels, read with the restricted unpickler of
`safe_pickle` (never `pickle.load`)."""

from __future__ import annotations

import numpy as np

from . import files, safe_pickle


def load_batch(fpath, label_key: str = "labels", *, where: str = "CIFAR batch"):
    """(images uint8 (N, 3, 32, 32), labels list of N ints) from a batch file path, or from
    the batch's bytes (`where` names them in errors). A batch that is not one raises
    `files.DatasetError`."""
    if isinstance(fpath, (bytes, bytearray)):
        data = bytes(fpath)
    else:
        with open(fpath, "rb") as f:
            data, where = f.read(), str(fpath)
    batch = safe_pickle.load(data, encoding="bytes", where=where)
    if not isinstance(batch, dict):
        raise files.DatasetError(f"{where}: not a CIFAR batch (expected a pickled dict)")
    batch = {k.decode("latin1") if isinstance(k, bytes) else k: v for k, v in batch.items()}
    images, labels = batch.get("data"), batch.get(label_key)
    if (not isinstance(images, np.ndarray) or images.dtype != np.uint8 or images.ndim != 2
            or images.shape[1] != 3 * 32 * 32):
        raise files.DatasetError(f"{where}: 'data' must be a uint8 array of shape (N, 3072)")
    if (not isinstance(labels, list) or len(labels) != len(images)
            or not all(isinstance(v, int) for v in labels)):
        raise files.DatasetError(f"{where}: '{label_key}' must be a list of {len(images)} ints")
    return images.reshape(-1, 3, 32, 32), labels
