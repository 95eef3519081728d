"""MNIST: `load_data()` -> `(x_train, y_train), (x_test, y_test)` as uint8 arrays of shapes
(60000, 28, 28), (60000,), (10000, 28, 28), (10000,).

Reads Keras's `mnist.npz`, or the four original IDX files (`train-images-idx3-ubyte` etc., plain
or `.gz`), from the folders of `files.search_dirs()`, verifying published checksums; `mnist.npz`
is downloaded when neither form is there and the network answers.
"""

from __future__ import annotations

import gzip
import zlib
from pathlib import Path

import numpy as np

from . import files
from .npz_objects import load_npz

ORIGIN = "https://s3.amazonaws.com/img-datasets/mnist.npz"
IDX_FILES = ("train-images-idx3-ubyte", "train-labels-idx1-ubyte",
             "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte")
NPZ_KEYS = ("x_train", "y_train", "x_test", "y_test")


def load_data(path: str = "mnist.npz"):
    npz = files.find(path)
    if npz is not None:
        return _from_npz(files.verify(npz))
    found = [files.find(name, name + ".gz") for name in IDX_FILES]
    if all(found):
        x_train, y_train, x_test, y_test = (read_idx(files.verify(p)) for p in found)
        return (x_train, y_train), (x_test, y_test)
    alternatives = [f"{n}[.gz]" for n in IDX_FILES]
    return _from_npz(files.locate("mnist", path, ORIGIN if path == "mnist.npz" else None,
                                  alternatives))


def _from_npz(path: Path):
    data = load_npz(path)
    missing = [k for k in NPZ_KEYS if k not in data]
    if missing:
        raise files.DatasetError(f"{path}: not an MNIST archive (no {missing})")
    return (data["x_train"], data["y_train"]), (data["x_test"], data["y_test"])


def read_idx(path: Path) -> np.ndarray:
    """An IDX file (big-endian header: 0, 0, type 0x08 = ubyte, ndim; then the dims)."""
    opener = gzip.open if path.suffix == ".gz" else open
    try:
        with opener(path, "rb") as f:
            data = f.read()
    except (OSError, EOFError, zlib.error) as error:  # a damaged or truncated .gz
        raise files.DatasetError(f"{path}: unreadable ({error})") from None
    if len(data) < 4 or data[0] != 0 or data[1] != 0 or data[2] != 0x08:
        raise files.DatasetError(f"{path}: not an unsigned-byte IDX file")
    ndim = data[3]
    dims = tuple(int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(ndim))
    body = np.frombuffer(data, np.uint8, offset=4 + 4 * ndim)
    if body.size != int(np.prod(dims)):
        raise files.DatasetError(f"{path}: header says {dims} ({int(np.prod(dims))} bytes), "
                                 f"file has {body.size}")
    return body.reshape(dims)
