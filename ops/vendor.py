"""Vendor DNN kernels on our arrays: PyTorch's ATen operators (oneDNN and MKL on a CPU, cuDNN and
cuBLAS on a GPU) run in place on NumPy or CuPy buffers.

A kernel with a vendor version asks `aten(xp)` for the bridge. It gets one when PyTorch is
installed, the arrays of `xp` are NumPy's (torch CPU tensors over the same memory,
`torch.from_numpy`) or CuPy's (torch CUDA tensors over the same memory, DLPack), and the
reference kernels were not asked for. Only the kernel runs in torch: its inputs are viewed as
tensors, its results are viewed back as arrays of `xp`, nothing is copied either way, and what
travels between tasks, devices and stores stays an array of `xp`.

Which kernels run is a process-wide setting: `FLEXFLOW_KERNELS=reference` in the environment
(read at import, so worker processes started from this one inherit it) or `use_kernels(...)`
choose our own NumPy/CuPy kernels, which are the reference the vendor kernels are tested against
and the fallback where torch is absent. On CuPy arrays the vendor kernels need a torch built
with CUDA; with a CPU-only torch the reference kernels run.

TF32 (tensor-core float32 math: cuDNN's convolutions use it unless told otherwise, 10 bits of
mantissa, results off by about 1e-3) is another: off, so that a GPU's numbers are float32's,
unless `--allow-tensor-op-math-conversion` asks for it (`use_tensor_op_math`, which deployment
runs on every device's process).
"""

from __future__ import annotations

import contextlib
import os
import warnings
from dataclasses import dataclass
from typing import Any, Iterator

KERNELS_ENV = "FLEXFLOW_KERNELS"
KERNEL_PATHS = ("vendor", "reference")


def _path_from_environment() -> str:
    path = os.environ.get(KERNELS_ENV, "vendor")
    if path not in KERNEL_PATHS:
        raise ValueError(f"{KERNELS_ENV}={path!r}: expected one of {KERNEL_PATHS}")
    return path


_path = _path_from_environment()
_bridges: dict[Any, Any] = {}  # array module -> its bridge, or False where it has none
_tensor_op_math = {"allowed": False}


def kernel_path() -> str:
    """The kernels this process runs: "vendor" where torch can run them, else "reference"."""
    return "vendor" if _path == "vendor" and _torch() is not None else "reference"


def use_kernels(path: str) -> None:
    """Run the vendor kernels ("vendor", the default) or our own ("reference")."""
    global _path
    if path not in KERNEL_PATHS:
        raise ValueError(f"unknown kernel path {path!r}; expected one of {KERNEL_PATHS}")
    _path = path


@contextlib.contextmanager
def kernels(path: str) -> Iterator[None]:
    """`use_kernels(path)` for the duration of a `with` block."""
    before = _path
    use_kernels(path)
    try:
        yield
    finally:
        use_kernels(before)


def aten(xp) -> "Aten | None":
    """The bridge to torch for arrays of `xp`, or None where the reference kernels must run."""
    if _path != "vendor":
        return None
    bridge = _bridges.get(xp)
    if bridge is None:
        bridge = _bridges[xp] = _make_bridge(xp) or False
    return bridge or None


@dataclass(frozen=True)
class Saved:
    """What a vendor kernel's forward keeps for its backward: the bridge and its tensors. A
    backward given one runs the vendor kernel, whatever the setting is by then."""

    aten: "Aten"
    values: tuple


def matmul(xp, a, b):
    """a @ b (numpy's broadcasting rules): torch's product (MKL, cuBLAS) where torch can run,
    else xp's. One BLAS in a process: numpy's would run a second thread pool beside torch's."""
    bridge = aten(xp)
    if bridge is None:
        return a @ b
    return bridge.array(bridge.torch.matmul(bridge.tensor(a), bridge.tensor(b)))


class Aten:
    """torch, its ATen operators (`ops`), and the two zero-copy views between one array
    module's arrays and torch tensors."""

    def __init__(self, torch, to_tensor, to_array):
        self.torch = torch
        self.ops = torch.ops.aten
        self._to_tensor = to_tensor
        self._to_array = to_array

    def tensor(self, array):
        """A tensor over `array`'s memory (strides kept)."""
        return self._to_tensor(array)

    def array(self, tensor):
        """An array of `xp` over `tensor`'s memory."""
        return self._to_array(tensor)


def _torch():
    try:
        import torch
    except ImportError:
        return None
    return torch


def use_tensor_op_math(allowed: bool) -> None:
    """Let cuDNN and cuBLAS use TF32 in float32 kernels, or not (the default)."""
    _tensor_op_math["allowed"] = bool(allowed)
    torch = _torch()
    if torch is not None:
        _apply_tensor_op_math(torch)


def _apply_tensor_op_math(torch) -> None:
    allowed = _tensor_op_math["allowed"]
    torch.backends.cuda.matmul.allow_tf32 = allowed
    torch.backends.cudnn.allow_tf32 = allowed


def _make_bridge(xp) -> Aten | None:
    torch = _torch()
    if torch is None:
        return None
    if getattr(xp, "__name__", "") == "cupy":
        if not torch.cuda.is_available():  # a CPU-only torch cannot view CuPy's memory
            return None
        _apply_tensor_op_math(torch)
        _share_memory_pool(torch, xp)
        return Aten(torch, torch.from_dlpack, xp.from_dlpack)
    numpy = _numpy_of(xp)
    if numpy is None:
        return None
    return Aten(torch, _numpy_to_tensor(torch, numpy), _tensor_to_numpy(xp, numpy))


def holds_host_arrays(xp) -> bool:
    """Whether `xp`'s arrays live in host memory (NumPy's)."""
    return _numpy_of(xp) is not None


def _numpy_of(xp):
    """numpy, when `xp` is numpy or a module whose arrays are NumPy arrays (a wrapper that
    counts calls, in the tests); else None."""
    import numpy
    return numpy if getattr(xp, "ndarray", None) is numpy.ndarray or xp is numpy else None


def _numpy_to_tensor(torch, numpy):
    ndarray = numpy.ndarray

    def to_tensor(array):
        if type(array) is not ndarray:
            array = numpy.asarray(array)
        if not array.flags.writeable:
            # a read-only buffer (a batch received from another process): torch warns that
            # it could write to it, but kernels only read their inputs
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", UserWarning)
                return _from_numpy(torch, numpy, array)
        return _from_numpy(torch, numpy, array)
    return to_tensor


def _from_numpy(torch, numpy, array):
    try:
        return torch.from_numpy(array)
    except ValueError:  # a reversed view: torch has no negative strides
        return torch.from_numpy(numpy.ascontiguousarray(array))


def _tensor_to_numpy(xp, numpy):
    if xp is numpy:
        return lambda tensor: tensor.numpy()
    return lambda tensor: xp.asarray(tensor.numpy())


def _share_memory_pool(torch, cupy) -> None:
    """One pool of GPU memory for both libraries: where CuPy still allocates from its own pool
    (not from RMM, which dask-cuda's workers give both), it allocates from torch's caching
    allocator, so that memory one library freed is there for the other."""
    if cupy.cuda.get_allocator() != cupy.get_default_memory_pool().malloc:
        return

    class Block:
        """A block of torch's pool, handed back to it when CuPy drops its last reference."""

        def __init__(self, size: int, device: int):
            self.pointer = torch.cuda.caching_allocator_alloc(size, device)

        def __del__(self):
            torch.cuda.caching_allocator_delete(self.pointer)

    def allocate(size: int):
        device = cupy.cuda.Device().id
        block = Block(max(size, 1), device)
        memory = cupy.cuda.UnownedMemory(block.pointer, size, block, device)
        return cupy.cuda.MemoryPointer(memory, 0)

    cupy.cuda.set_allocator(allocate)
