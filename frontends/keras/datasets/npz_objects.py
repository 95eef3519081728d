"""Reading `.npz` archives whose arrays may hold Python objects (Reuters' lists of word ids)
without `allow_pickle=True`.

An object array's `.npy` member is a header followed by a pickle of the array. Numeric members
are read by numpy with `allow_pickle=False`; object members go through the restricted unpickler
of `safe_pickle`, which only builds plain data and arrays.
"""

from __future__ import annotations

import io
import zipfile

import numpy as np
from numpy.lib import format as npy_format

from . import safe_pickle


def load_npz(path) -> dict[str, np.ndarray]:
    arrays = {}
    with zipfile.ZipFile(path) as archive:
        for member in archive.namelist():
            if not member.endswith(".npy"):
                continue
            arrays[member[:-len(".npy")]] = _read_npy(archive.read(member), f"{path}:{member}")
    return arrays


def _read_npy(data: bytes, where: str) -> np.ndarray:
    stream = io.BytesIO(data)
    try:
        version = npy_format.read_magic(stream)
        read_header = (npy_format.read_array_header_1_0 if version == (1, 0)
                       else npy_format.read_array_header_2_0)
        shape, fortran, dtype = read_header(stream)
    except ValueError as error:
        raise ValueError(f"{where}: not a .npy array ({error})") from None
    if not dtype.hasobject:
        return npy_format.read_array(io.BytesIO(data), allow_pickle=False)
    array = safe_pickle.load(data[stream.tell():], encoding="latin1")
    if not isinstance(array, np.ndarray) or array.shape != shape:
        raise ValueError(f"{where}: the pickled array does not match its header shape {shape}")
    return array
