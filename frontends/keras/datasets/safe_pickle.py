"""Reading the pickles inside CIFAR-10 batches and Reuters' object arrays without running code.

`pickle.load` imports and calls whatever functions a file names, so loading an untrusted pickle
can run arbitrary code. The files read here only hold plain data (dicts, lists, tuples, strings,
bytes, numbers) and numpy arrays. `load` accepts exactly that: `find_class` refuses every global
except the few names numpy's array pickles use, and for those it returns inert stand-ins that
only record the array's description (dtype, shape, raw bytes or element list). Arrays are then
built here from the checked description (plain numeric dtypes, or object arrays of plain data).
No function named by the file is imported or called.

Nor can a small file take unbounded time or memory: the objects it shares are built once, the
data is refused once it would hold more than `MAX_ELEMENTS` items or `MAX_BYTES` bytes as its
readers see it (shared references expanded), and an object containing itself, nesting deeper
than Python's stack, or any other malformed pickle is a `RefusedPickle` naming the file.
"""

from __future__ import annotations

import io
import math
import pickle
import re

import numpy as np

from .files import DatasetError

_NUMERIC_DTYPE = re.compile(r"^[<>|=]?[biuf]\d{1,2}$")
MAX_ELEMENTS = 1 << 23  # items of lists, tuples, dicts (keys and values) and object arrays
MAX_BYTES = 1 << 28     # bytes of arrays, strings and bytes objects
# What malformed data makes the unpickler or the builder raise: truncated or unknown opcodes,
# stand-ins called with the wrong arguments, bad memo keys, nesting deeper than the stack, a
# size that does not fit in memory.
LOAD_ERRORS = (pickle.UnpicklingError, EOFError, ValueError, TypeError, KeyError, IndexError,
               AttributeError, ArithmeticError, MemoryError, RecursionError)


class RefusedPickle(DatasetError, pickle.UnpicklingError):
    """A pickle that holds more than plain data and numeric arrays, is malformed, contains
    itself or is too large; the message names the file."""


class _NDArrayMarker:
    """Stands in for `numpy.ndarray` (only valid as the first argument of _reconstruct)."""


class _DType:
    """Stands in for a `numpy.dtype(spec, align, copy)` call; BUILD sets the byte order."""

    def __init__(self, spec, align=False, copy=True):
        self.spec = _text(spec, "dtype")
        self.byteorder = ""

    def __setstate__(self, state):
        order = state[1] if isinstance(state, tuple) and len(state) > 1 else ""
        self.byteorder = _text(order, "byte order")

    def numpy(self) -> np.dtype:
        if self.spec in ("O", "O4", "O8"):
            return np.dtype(object)
        text = (self.byteorder if self.byteorder in "<>|=" else "") + self.spec
        if not _NUMERIC_DTYPE.match(text):
            raise pickle.UnpicklingError(f"array dtype {text!r} is not a plain numeric dtype")
        return np.dtype(text)


def _text(value, what: str) -> str:
    """A dtype's spec or byte order, which numpy pickles as a short str or bytes."""
    if not isinstance(value, (str, bytes)) or len(value) > 8:
        raise pickle.UnpicklingError(f"array {what} must be a short string")
    return value.decode("latin1") if isinstance(value, bytes) else value


class _ArrayState:
    """Stands in for numpy's `_reconstruct(ndarray, shape, typecode)`; BUILD passes the state
    (version, shape, dtype, is_fortran, data)."""

    def __init__(self, cls=None, shape=None, typecode=None):
        if cls is not _NDArrayMarker:
            raise pickle.UnpicklingError("_reconstruct may only rebuild numpy arrays")
        self.state = None

    def __setstate__(self, state):
        self.state = state

    def described(self) -> tuple[tuple, np.dtype, bool, object]:
        """(shape, dtype, is_fortran, data), checked but for the data."""
        state = self.state
        if not isinstance(state, tuple) or len(state) not in (4, 5):
            raise pickle.UnpicklingError("malformed numpy array state")
        shape, dtype, fortran, data = state[-4:]
        if not isinstance(dtype, _DType) or not _is_shape(shape):
            raise pickle.UnpicklingError("malformed numpy array state")
        return tuple(shape), dtype.numpy(), bool(fortran), data


def _is_shape(shape) -> bool:
    return isinstance(shape, (tuple, list)) and len(shape) <= 32 and all(
        type(d) is int and d >= 0 for d in shape)


def _numeric_array(shape: tuple, dtype: np.dtype, fortran: bool, data) -> np.ndarray:
    if dtype.hasobject:
        raise pickle.UnpicklingError("an object array's elements must be pickled as a list")
    count = math.prod(shape)
    if isinstance(data, str):
        data = data.encode("latin1")
    if not isinstance(data, (bytes, bytearray)) or len(data) != count * dtype.itemsize:
        raise pickle.UnpicklingError(f"array of shape {shape} and dtype {dtype} needs "
                                     f"{count * dtype.itemsize} bytes of data")
    return np.frombuffer(bytes(data), dtype).reshape(shape, order="F" if fortran else "C").copy()


def _frombuffer(buffer, dtype, shape, order):
    """Stands in for numpy's pickle-protocol-5 `_frombuffer(buffer, dtype, shape, order)`."""
    if (not isinstance(dtype, _DType) or not _is_shape(shape)
            or not isinstance(buffer, (bytes, bytearray))):
        raise pickle.UnpicklingError("malformed numpy array")
    return _numeric_array(tuple(shape), dtype.numpy(), order == "F", buffer)


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


class _Builder:
    """Replaces stand-ins by numpy arrays and checks that everything else is plain data.

    Each object of the file is built once, so references the file shares stay shared instead
    of being copied at each place (a "billion laughs" file nests ten references to a list in
    each of nine lists). The readers walk the result as a tree, though, so its size is counted
    as they will see it, a shared object at each of its places: more than `MAX_ELEMENTS` items
    or `MAX_BYTES` bytes is refused, and so is an object that contains itself."""

    def __init__(self):
        self.built: dict[int, tuple[object, int, int]] = {}  # id -> (value, items, bytes)
        self.open: set[int] = set()  # ids being built: meeting one again is a cycle

    def build(self, obj) -> tuple[object, int, int]:
        """(the plain value of `obj`, its items, its bytes), counted as a tree."""
        key = id(obj)
        if key in self.built:
            return self.built[key]
        if key in self.open:
            raise pickle.UnpicklingError("the data contains itself (a reference cycle)")
        self.open.add(key)
        value, items, nbytes = self._convert(obj)
        self.open.discard(key)
        if items > MAX_ELEMENTS or nbytes > MAX_BYTES:
            raise pickle.UnpicklingError(
                f"the data would hold {items} items and {nbytes} bytes once its shared "
                f"references are expanded; at most {MAX_ELEMENTS} items and {MAX_BYTES} bytes "
                f"are read")
        self.built[key] = (value, items, nbytes)
        return self.built[key]

    def _convert(self, obj) -> tuple[object, int, int]:
        if isinstance(obj, _ArrayState):
            return self._array(*obj.described())
        if isinstance(obj, np.ndarray):
            return obj, 0, obj.nbytes
        if obj is None or isinstance(obj, (bool, int, float, complex)):
            return obj, 0, 0
        if isinstance(obj, (str, bytes, bytearray)):
            return obj, 0, len(obj)
        if isinstance(obj, dict):
            keys, values = self._all(obj.keys()), self._all(obj.values())
            return dict(zip(keys[0], values[0])), 2 * len(obj) + keys[1] + values[1], \
                keys[2] + values[2]
        if isinstance(obj, (list, tuple)):
            values, items, nbytes = self._all(obj)
            return (values if isinstance(obj, list) else tuple(values)), len(obj) + items, nbytes
        raise pickle.UnpicklingError(f"unexpected object of type {type(obj).__name__} in the file")

    def _all(self, objects) -> tuple[list, int, int]:
        values, items, nbytes = [], 0, 0
        for obj in objects:
            value, more_items, more_bytes = self.build(obj)
            values.append(value)
            items, nbytes = items + more_items, nbytes + more_bytes
        return values, items, nbytes

    def _array(self, shape: tuple, dtype: np.dtype, fortran: bool, data):
        if not dtype.hasobject:
            array = _numeric_array(shape, dtype, fortran, data)
            return array, 0, array.nbytes
        count = math.prod(shape)
        if not isinstance(data, list) or len(data) != count:
            raise pickle.UnpicklingError(f"object array of shape {shape} needs {count} elements")
        values, items, nbytes = self._all(data)
        out = np.empty(count, dtype=object)
        for i, value in enumerate(values):
            out[i] = value
        return out.reshape(shape, order="F" if fortran else "C"), count + items, nbytes


def load(data: bytes, encoding: str = "bytes", where: str = "pickle"):
    """The plain data and numpy arrays pickled in `data`. `encoding` applies to Python 2 str
    objects ('bytes' keeps them as bytes, as the CIFAR-10 batches need). Every problem, malformed
    data included, is a `RefusedPickle` whose message starts with `where` (the file)."""
    try:
        unpickler = _RestrictedUnpickler(io.BytesIO(data), encoding=encoding)
        return _Builder().build(unpickler.load())[0]
    except LOAD_ERRORS as error:
        reason = str(error) if isinstance(error, pickle.UnpicklingError) else (
            f"malformed pickle ({type(error).__name__}: {str(error)[:200]})")
        raise RefusedPickle(f"{where}: {reason}") from None
