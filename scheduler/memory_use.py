"""How many bytes a device's allocator has handed out now: the measured side of the memory model
(scheduler/memory.py), the figure `torch.cuda.memory_allocated` gives for PyTorch.

On a CPU that is the C heap in use, from glibc's `mallinfo2` (NumPy's arrays, torch's CPU
tensors and Python's larger objects all come from it), so a CPU worker's figure is its process's;
devices trained in one process share that process's figure. On a GPU it is the bytes CuPy's
memory pool has handed out. Where neither can be read (another C library), None.

Reading it walks the heap's free lists (tens of microseconds), so only `--profiling`'s timed
tasks read it (`actions.run_timed`). What the allocator keeps beyond this (freed memory it has
not returned, a pool's cached blocks) is the process's resident memory, which bench/memory.py
compares with PyTorch's. (From RMM, the device's memory in use is all there is to read: it
counts RMM's pool whole, and the CUDA context.)
"""

from __future__ import annotations

import ctypes
import ctypes.util


class _Mallinfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks",
        "fordblks", "keepcost")]


def _mallinfo2():
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        function = libc.mallinfo2
    except (OSError, AttributeError):  # not glibc 2.33 or later
        return None
    function.restype = _Mallinfo2
    return function


_MALLINFO2 = _mallinfo2()


def heap_in_use() -> int | None:
    """Bytes of this process's C heap in use (small blocks and mapped ones), or None."""
    if _MALLINFO2 is None:
        return None
    info = _MALLINFO2()
    return info.uordblks + info.hblkhd


def allocated_bytes(xp) -> int | None:
    """Bytes the allocator of array module `xp` (numpy or cupy) has handed out now: on a GPU,
    CuPy's pool's, or, where CuPy allocates from torch's caching allocator (ops/vendor.py shares
    it), torch's; from RMM (dask-cuda's pool), what the device has in use."""
    if getattr(xp, "cuda", None) is not None:
        return _gpu_allocated(xp)
    return heap_in_use()


def _gpu_allocated(cupy) -> int:
    pool = cupy.get_default_memory_pool()
    if cupy.cuda.get_allocator() == pool.malloc:
        return int(pool.used_bytes())
    try:
        import torch
        allocated = torch.cuda.memory_allocated() if torch.cuda.is_available() else 0
    except ImportError:
        allocated = 0
    if allocated:  # 0 under RMM, which torch allocates from without counting it
        return int(allocated)
    free, total = cupy.cuda.Device().mem_info
    return int(total - free)
