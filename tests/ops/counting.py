"""An array module that counts device launches: NumPy, with every operation that would be a
kernel launch on a GPU counted.

`CountingNumpy` stands where CuPy would (the executor's `xp`); its arrays are `CountingArray`s,
NumPy arrays that count each ufunc, array function, element copy and assignment done on them.
The torch kernels the vendor path runs on those arrays are counted by a dispatch mode, one per
ATen operator that computes (views, which only describe memory, are not launches). On a GPU
each of those is at least one kernel launch, so a bound checked here on a CPU bounds the GPU's
launches too.
"""

from __future__ import annotations

import types

import numpy as np
from torch.utils._python_dispatch import TorchDispatchMode


class Counter:
    def __init__(self):
        self.numpy = 0
        self.aten = 0

    @property
    def total(self) -> int:
        return self.numpy + self.aten


COUNTER = Counter()


def _wrap(value):
    if type(value) is np.ndarray:
        return value.view(CountingArray)
    if isinstance(value, tuple):
        return tuple(_wrap(v) for v in value)
    if isinstance(value, list):
        return [_wrap(v) for v in value]
    return value


def _plain(value):
    if isinstance(value, CountingArray):
        return value.view(np.ndarray)
    if isinstance(value, (tuple, list)):
        return type(value)(_plain(v) for v in value)
    return value


class CountingArray(np.ndarray):
    """A NumPy array whose computing operations count as launches."""

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        COUNTER.numpy += 1
        if "out" in kwargs:
            kwargs["out"] = _plain(kwargs["out"])
        return _wrap(getattr(ufunc, method)(*_plain(inputs), **kwargs))

    def __array_function__(self, func, types_, args, kwargs):
        if func.__name__ not in METADATA_FUNCTIONS:
            COUNTER.numpy += 1
        return _wrap(func(*_plain(args), **_plain(kwargs)))

    def __setitem__(self, index, value):
        COUNTER.numpy += 1
        np.ndarray.__setitem__(self.view(np.ndarray), _plain(index), _plain(value))

    def copy(self, order="C"):
        COUNTER.numpy += 1
        return _wrap(self.view(np.ndarray).copy(order))

    def astype(self, dtype, order="K", casting="unsafe", subok=True, copy=True):
        if not copy and self.dtype == np.dtype(dtype):
            return self
        COUNTER.numpy += 1
        return _wrap(self.view(np.ndarray).astype(dtype, order, casting, copy=copy))

    def fill(self, value):
        COUNTER.numpy += 1
        self.view(np.ndarray).fill(value)


# functions that describe memory or shapes without touching elements: no launch on a GPU
METADATA_FUNCTIONS = {"reshape", "transpose", "ravel", "squeeze", "expand_dims", "shape",
                      "ndim", "size", "broadcast_to", "moveaxis", "swapaxes", "result_type",
                      "may_share_memory", "shares_memory", "iscomplexobj", "isscalar"}
_NO_LAUNCH = {"asarray", "asanyarray", "dtype", "result_type", "finfo", "iinfo", "ndarray",
              "float32", "float64", "int32", "int64", "bool_", "uint8", "newaxis", "inf", "nan",
              "pi", "e", "errstate", "issubdtype", "floating", "integer"} | METADATA_FUNCTIONS


class CountingNumpy(types.ModuleType):
    """numpy's namespace with every array-making or computing function counted."""

    def __init__(self):
        super().__init__("counting_numpy")
        self.ndarray = np.ndarray  # its arrays are NumPy's: the vendor bridge views them

    def __getattr__(self, name):
        value = getattr(np, name)
        if not callable(value) or isinstance(value, type) or name in _NO_LAUNCH:
            if name in ("asarray", "asanyarray"):
                return _asarray
            return value

        def counted(*args, **kwargs):
            COUNTER.numpy += 1
            return _wrap(value(*_plain(args), **_plain(kwargs)))
        return counted


def _asarray(value, dtype=None, **kwargs):
    """No launch when `value` is already one of our arrays of that dtype (a view); otherwise a
    copy to the device, one launch."""
    if isinstance(value, np.ndarray) and (dtype is None or value.dtype == np.dtype(dtype)):
        return value.view(CountingArray)
    COUNTER.numpy += 1
    return np.asarray(_plain(value), dtype=dtype, **kwargs).view(CountingArray)


class CountingAten(TorchDispatchMode):
    """Counts the computing ATen operators run while it is active."""

    def __torch_dispatch__(self, func, types_, args=(), kwargs=None):
        if not func.is_view and func.__name__.split(".")[0] not in ("detach", "lift_fresh"):
            COUNTER.aten += 1
        return func(*args, **(kwargs or {}))


def counting() -> tuple[CountingNumpy, Counter]:
    """The module and the counter, reset."""
    COUNTER.numpy = COUNTER.aten = 0
    return CountingNumpy(), COUNTER
