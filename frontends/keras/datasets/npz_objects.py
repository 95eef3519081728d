"""Reading data set `.npz` archives (MNIST's, Reuters') within size bounds and without
`allow_pickle=True`, with `flexflow.archive` (the checkpoint reader's).

The archive is refused before any member is read when its members declare more than
`MAX_ARCHIVE_BYTES` uncompressed (a zip bomb), and a numeric member whose header declares more
data than it holds is refused before its array is allocated. An object array's `.npy` member
(Reuters' lists of word ids) is a header followed by a pickle of the array, which goes through
the restricted unpickler of `safe_pickle`, which only builds plain data and arrays. Every
problem is a `files.DatasetError` naming the file and the member.
"""

from __future__ import annotations

import numpy as np

from flexflow.archive import Archive

from . import safe_pickle
from .files import DatasetError

MAX_ARCHIVE_BYTES = 1 << 28  # MNIST's arrays hold 55 MB, Reuters' a few


def load_npz(path) -> dict[str, np.ndarray]:
    """Every array of the archive at `path`, by name."""
    with Archive(path, DatasetError, "data set archive", MAX_ARCHIVE_BYTES) as archive:
        return {name: _array(archive, name) for name in sorted(archive.names)}


def _array(archive: Archive, name: str) -> np.ndarray:
    shape, dtype = archive.declared(name)
    if not dtype.hasobject:
        return archive.numeric(name)
    where = f"{archive.path}:{name}.npy"
    array = safe_pickle.load(archive.pickled(name), encoding="latin1", where=where)
    if not isinstance(array, np.ndarray) or array.shape != shape:
        raise DatasetError(f"{where}: the pickled array does not match its header shape {shape}")
    return array
