"""Reading the pickles inside CIFAR-10 batches and Reuters' object arrays without running code.

`pickle.load` imports and calls whatever functions a file names, so loading an untrusted pickle
can run arbitrary code. The files read here only hold plain data (dicts, lists, tuples, strings,
bytes, numbers) and numpy arrays. `load` accepts exactly that: `find_class` refuses every global
except the few names numpy's array pickles use, and for those it returns inert stand-ins that
only record the array's description (dtype, shape, raw bytes or element list). Arrays are then
built here from the checked description (plain numeric dtypes, or object arrays of plain data).
No function named by the file is imported or called.
"""

from __future__ import annotations

import io
import math
import pickle
import re

import numpy as np

_NUMERIC_DTYPE = re.compile(r"^[<>|=]?[biuf]\d{1,2}$")


class _NDArrayMarker:
    """Stands in for `numpy.ndarray` (only valid as the first argument of _reconstruct)."""


class _DType:
    """Stands in for a `numpy.dtype(spec, align, copy)` call; BUILD sets the byte order."""

    def __init__(self, spec, align=False, copy=True):
        self.spec = spec.decode("latin1") if isinstance(spec, bytes) else str(spec)
        self.byteorder = ""

    def __setstate__(self, state):
        order = state[1] if isinstance(state, tuple) and len(state) > 1 else ""
        self.byteorder = order.decode("latin1") if isinstance(order, bytes) else str(order)

    def numpy(self) -> np.dtype:
        if self.spec in ("O", "O4", "O8"):
            return np.dtype(object)
        text = (self.byteorder if self.byteorder in "<>|=" else "") + self.spec
        if not _NUMERIC_DTYPE.match(text):
            raise pickle.UnpicklingError(f"array dtype {text!r} is not a plain numeric dtype")
        return np.dtype(text)


class _ArrayState:
    """Stands in for numpy's `_reconstruct(ndarray, shape, typecode)`; BUILD passes the state
    (version, shape, dtype, is_fortran, data)."""

    def __init__(self, cls=None, shape=None, typecode=None):
        if cls is not _NDArrayMarker:
            raise pickle.UnpicklingError("_reconstruct may only rebuild numpy arrays")
        self.state = None

    def __setstate__(self, state):
        self.state = state

    def numpy(self) -> np.ndarray:
        state = self.state
        if not isinstance(state, tuple) or len(state) not in (4, 5):
            raise pickle.UnpicklingError("malformed numpy array state")
        shape, dtype, fortran, data = state[-4:]
        if not isinstance(dtype, _DType) or not all(isinstance(d, int) and d >= 0
                                                    for d in shape):
            raise pickle.UnpicklingError("malformed numpy array state")
        return _build(tuple(shape), dtype.numpy(), bool(fortran), data)


def _build(shape: tuple, dtype: np.dtype, fortran: bool, data) -> np.ndarray:
    count = math.prod(shape)
    order = "F" if fortran else "C"
    if dtype.hasobject:
        if not isinstance(data, list) or len(data) != count:
            raise pickle.UnpicklingError(f"object array of shape {shape} needs {count} elements")
        out = np.empty(count, dtype=object)
        for i, item in enumerate(data):
            out[i] = _materialize(item)
        return out.reshape(shape, order=order)
    if isinstance(data, str):
        data = data.encode("latin1")
    if not isinstance(data, (bytes, bytearray)) or len(data) != count * dtype.itemsize:
        raise pickle.UnpicklingError(f"array of shape {shape} and dtype {dtype} needs "
                                     f"{count * dtype.itemsize} bytes of data")
    return np.frombuffer(bytes(data), dtype).reshape(shape, order=order).copy()


def _frombuffer(buffer, dtype, shape, order):
    """Stands in for numpy's pickle-protocol-5 `_frombuffer(buffer, dtype, shape, order)`."""
    if not isinstance(dtype, _DType):
        raise pickle.UnpicklingError("malformed numpy array")
    return _build(tuple(shape), dtype.numpy(), order == "F", bytes(buffer))


def _latin1_encode(text, encoding="latin1"):
    """Stands in for `_codecs.encode`, which Python 3 pickles of bytes (protocol < 3) use."""
    if encoding not in ("latin1", "latin-1") or not isinstance(text, str):
        raise pickle.UnpicklingError(f"_codecs.encode with {encoding!r} is not allowed")
    return text.encode("latin1")


_STAND_INS = {
    ("numpy.core.multiarray", "_reconstruct"): _ArrayState,
    ("numpy._core.multiarray", "_reconstruct"): _ArrayState,
    ("numpy", "ndarray"): _NDArrayMarker,
    ("numpy", "dtype"): _DType,
    ("numpy.core.numeric", "_frombuffer"): _frombuffer,
    ("numpy._core.numeric", "_frombuffer"): _frombuffer,
    ("_codecs", "encode"): _latin1_encode,
}


class _RestrictedUnpickler(pickle.Unpickler):
    def find_class(self, module, name):
        stand_in = _STAND_INS.get((module, name))
        if stand_in is None:
            raise pickle.UnpicklingError(f"refusing to load {module}.{name}: the file may only "
                                         f"hold plain data and numpy arrays")
        return stand_in


def _materialize(obj):
    """Replace stand-ins by numpy arrays, and check that everything else is plain data."""
    if isinstance(obj, _ArrayState):
        return obj.numpy()
    if isinstance(obj, np.ndarray) or obj is None or isinstance(
            obj, (bool, int, float, complex, str, bytes, bytearray)):
        return obj
    if isinstance(obj, dict):
        return {_materialize(k): _materialize(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_materialize(v) for v in obj]
    if isinstance(obj, tuple):
        return tuple(_materialize(v) for v in obj)
    raise pickle.UnpicklingError(f"unexpected object of type {type(obj).__name__} in the file")


def load(data: bytes, encoding: str = "bytes"):
    """The plain data and numpy arrays pickled in `data`. `encoding` applies to Python 2 str
    objects ('bytes' keeps them as bytes, as the CIFAR-10 batches need)."""
    unpickler = _RestrictedUnpickler(io.BytesIO(data), encoding=encoding)
    return _materialize(unpickler.load())
