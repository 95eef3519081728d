"""CIFAR-10 (python version): `load_data(num_samples=40000)` ->
(x_train uint8 (num_samples, 3, 32, 32), y_train uint8 (num_samples, 1)),
(x_test uint8 (10000, 3, 32, 32), y_test int64 (10000, 1)), FlexFlow's shapes and dtypes
(channels-first).

Reads the extracted folder `cifar-10-batches-py/` (data_batch_1..5, test_batch) or, without it,
the archive `cifar-10-python.tar.gz` (members read in place, nothing is extracted) from the
folders of `files.search_dirs()`; the archive is downloaded when neither is there and the network
answers. Training samples come from data_batch_1, 2, ... in order, as many batches as
`num_samples` needs.
"""

from __future__ import annotations

import tarfile
import zlib

import numpy as np

from . import files
from .cifar import load_batch

ORIGIN = "https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz"
ARCHIVE = "cifar-10-python.tar.gz"
FOLDER = "cifar-10-batches-py"
TRAIN_BATCHES = [f"data_batch_{i}" for i in range(1, 6)]
TEST_BATCH = "test_batch"
MAX_BATCH_BYTES = 1 << 28  # a batch of the archive is read whole; the published ones hold 31 MB


def load_data(num_samples: int = 40000):
    if int(num_samples) <= 0:
        raise ValueError(f"cifar10.load_data: num_samples must be positive, got {num_samples}")
    read = _batch_reader()
    images, labels = [], []
    for name in TRAIN_BATCHES:
        if sum(len(x) for x in images) >= num_samples:
            break
        x, y = read(name)
        images.append(x)
        labels += y
    available = sum(len(x) for x in images)
    if available < num_samples:
        raise ValueError(f"cifar10.load_data: num_samples={num_samples}, but the training "
                         f"batches hold {available} samples")
    x_train = np.concatenate(images)[:num_samples]
    y_train = np.array(labels[:num_samples], np.uint8).reshape(-1, 1)
    x_test, test_labels = read(TEST_BATCH)
    return (x_train, y_train), (x_test, np.array(test_labels, np.int64).reshape(-1, 1))


def _batch_reader():
    """A function reading one batch by name, from the extracted folder or from the archive
    (whose batches are read in one pass over it: a .tar.gz cannot be read out of order)."""
    folder = files.find_dir(FOLDER)
    if folder is not None:
        def from_folder(name):
            path = folder / name
            if not path.is_file():
                raise files.DatasetNotFound("cifar10", [f"{FOLDER}/{name}"])
            return load_batch(files.verify(path))
        return from_folder
    archive = files.locate("cifar10", ARCHIVE, ORIGIN, alternatives=[FOLDER + "/"])
    wanted = {f"{FOLDER}/{name}" for name in TRAIN_BATCHES + [TEST_BATCH]}
    try:
        contents = _batches_of(archive, wanted)
    except (tarfile.TarError, OSError, EOFError, zlib.error) as error:
        raise files.DatasetError(f"{archive}: not a readable tarball ({error})") from None

    def from_archive(name):
        if name not in contents:
            raise files.DatasetError(f"{archive}: no file {FOLDER}/{name} in the archive")
        return load_batch(contents[name], where=f"{archive}:{FOLDER}/{name}")
    return from_archive


def _batches_of(archive, wanted: set[str]) -> dict[str, bytes]:
    """The bytes of the `wanted` members of the tarball, by file name."""
    contents = {}
    with tarfile.open(archive, "r:*") as tar:
        for member in tar:
            if member.name in wanted and member.isfile():
                if member.size > MAX_BATCH_BYTES:
                    raise files.DatasetError(f"{archive}: {member.name} declares {member.size} "
                                             f"bytes, more than the {MAX_BATCH_BYTES} of a batch")
                contents[member.name.split("/")[-1]] = tar.extractfile(member).read()
    return contents
