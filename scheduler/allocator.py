"""Processes that train (Dask workers, and this one when it trains in-process) keep the memory
they free, for the next iteration to reuse.

A training iteration allocates the same arrays every time (activations, saved operands,
gradients) and frees them at the next. Dask starts its worker processes with glibc's
`MALLOC_TRIM_THRESHOLD_` at 64 KiB, which also fixes the threshold above which every array is
a fresh `mmap` at 128 KiB: each large array is then returned to the operating system when freed
and faulted in again, page by page, when the next iteration allocates it. On a CPU worker that
made forward kernels up to twice as slow as the same kernels timed back to back, and the
simulator's calibrated kernel times wrong by as much. `keep_freed_memory` has glibc serve every
array under 32 MiB from its heap and never trim it, so each iteration reuses the pages of the
last. Arrays of 32 MiB and more (glibc's own largest threshold, where its defaults, and so
PyTorch, leave them) are mapped afresh and returned when freed: kept on the heap too, they
fragment it until a process's resident memory is twice what it has allocated at its peak
(ResNet-18 at 224x224, batch 32: 1.6 GB resident for 0.8 GB allocated). Elsewhere (not glibc,
e.g. macOS) it does nothing.
"""

from __future__ import annotations

import ctypes
import ctypes.util

M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3  # mallopt parameters (glibc's malloc.h)
NEVER_TRIM = 2**31 - 1
MAPPED_FROM = 32 << 20  # bytes: glibc's DEFAULT_MMAP_THRESHOLD_MAX on 64-bit systems
_state = {"kept": False}


def keep_freed_memory() -> bool:
    """Tune this process's allocator as the module docstring says (once); whether it is."""
    if not _state["kept"]:
        try:
            libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
            mallopt = libc.mallopt
        except (OSError, AttributeError):  # no C library with mallopt here
            return False
        _state["kept"] = bool(mallopt(M_TRIM_THRESHOLD, NEVER_TRIM)) and bool(
            mallopt(M_MMAP_THRESHOLD, MAPPED_FROM))
    return _state["kept"]


def policy() -> str:
    """How this process's allocator treats freed memory, for calibration fingerprints (kernels
    run at different speeds under the two)."""
    return "kept" if _state["kept"] else "default"
