"""Timing kernels on one device (runs on a worker, or in this process).

A kernel's time is stored as a multiple of a reference kernel's (a matmul and a large copy)
timed just before it, and turned back into milliseconds with the reference timed when the
table is used: the table follows the speed the device has now.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import replace
from typing import Any, Callable, Sequence

import numpy

from ...ops.base import Part, split_partial
from ...ops.finite import all_finite
from ..actions import synchronizer
from ..cluster import array_module
from ..costs import KernelCall
from ..memory_use import allocated_bytes

WARMUP, REPEATS, BUDGET_MS = 1, 5, 400.0  # per kernel: repeats stop early past the budget
REFERENCE_BYTES = 32 << 20  # the reference kernel's copy: memory-bound, as large kernels are
REFERENCE_RUNS = 8  # reference kernels per run timed on all devices together
SPEED_COPY_BYTES = 4 << 20  # the copy that gives a device's memory bandwidth
MATMUL = 512  # side of the square float32 matmuls in the reference and the speed probe


def _timed_ms(fn: Callable[[], Any], sync: Callable[[], None]) -> float:
    start = time.perf_counter()
    fn()
    sync()
    return (time.perf_counter() - start) * 1e3


def _warmed_up(fn: Callable[[], Any], sync: Callable[[], None]) -> Any:
    """`fn`'s result after its `WARMUP` untimed runs."""
    result = None
    for _ in range(WARMUP):
        result = fn()
        sync()
    return result


def _median_ms(fn: Callable[[], Any], sync: Callable[[], None]) -> tuple[float, Any]:
    result = _warmed_up(fn, sync)
    samples: list[float] = []
    while len(samples) < REPEATS and (not samples or sum(samples) < BUDGET_MS):
        samples.append(_timed_ms(fn, sync))
    return statistics.median(samples), result


def _median_ratio(fn: Callable[[], Any], reference: Callable[[], None],
                  sync: Callable[[], None]) -> tuple[float, Any]:
    """(median over runs of `fn`'s time over the time of the `reference` run just before it,
    `fn`'s result). Each is timed at its second run in a row, with its operands in the
    caches: `fn` not after the reference flushed them, and the reference not after `fn` did,
    as `reference_ms` times it when the ratio is turned back into milliseconds (timed
    straight after `fn`, the reference is slower, and every ratio would come out small)."""
    result = _warmed_up(fn, sync)
    ratios: list[float] = []
    spent = 0.0
    while len(ratios) < REPEATS and spent < BUDGET_MS:
        reference()
        sync()
        reference_time = _timed_ms(reference, sync)
        fn()
        sync()
        ms = _timed_ms(fn, sync)
        ratios.append(ms / reference_time)
        spent += ms
    return statistics.median(ratios), result


def _nbytes(value) -> int:
    if isinstance(value, (tuple, list)):
        return sum(_nbytes(v) for v in value)
    return int(getattr(value, "nbytes", 0))


def _array(xp, rng, shape, dtype):
    if dtype.startswith("float"):
        return xp.asarray(rng.standard_normal(shape).astype(dtype))
    return xp.zeros(shape, dtype)  # indices: zeros are valid for every embedding and label


def _step_kernel(xp, rng, call: KernelCall) -> Callable[[], Any]:
    """A closure running a loss, update, check or sum `call` once on inputs made here."""
    if call.phase == "loss":
        out_shape, label_shape, label_dtype = call.probe
        out = xp.asarray(rng.uniform(0.01, 1.0, out_shape).astype("float32"))
        label = _array(xp, rng, label_shape, label_dtype)
        return lambda: call.subject(xp, out, label)
    (shape,) = call.probe
    if call.phase == "update":
        weight, grad = _array(xp, rng, shape, "float32"), _array(xp, rng, shape, "float32")
        state = call.subject.init_state(xp, weight)
        return lambda: call.subject.update(xp, weight, grad, state, 0)
    if call.phase == "check":
        grad = _array(xp, rng, shape, "float32")
        return lambda: all_finite(xp, grad)
    grad, extra = _array(xp, rng, shape, "float32"), _array(xp, rng, shape, "float32")
    return lambda: grad + extra


def _operator_kernel(xp, rng, call: KernelCall) -> Callable[[], Any]:
    """A closure running an operator's forward or backward `call` (whole or partial) once on
    inputs made here; a combined call gets the reduction of `group` partials."""
    op = call.subject
    out_boxes, in_boxes, in_shapes, in_dtypes, weight_shapes, group, grads = call.probe
    xs = [_array(xp, rng, b.shape, d) for b, d in zip(in_boxes, in_dtypes)]
    ws = [_array(xp, rng, s, "float32") for s in weight_shapes]
    part = Part(out_boxes, in_boxes, in_shapes, True, 0, None, grads)
    if call.phase == "forward_partial":
        return lambda: op.forward_partial(xp, xs, ws, part)
    if group:
        partial, made = split_partial(op.forward_partial(xp, xs, ws, part))
        part = replace(part, reduced=op.combine(xp, [partial] * group, "forward"), made=made)
    if call.phase == "forward":
        return lambda: op.forward(xp, xs, ws, part)
    ys, saved = op.forward(xp, xs, ws, part)
    dys = [_array(xp, rng, y.shape, "float32") for y in ys]
    if call.phase == "backward_partial":
        return lambda: op.backward_partial(xp, dys, saved, part)
    if group:
        part = replace(part, reduced=op.combine(
            xp, [op.backward_partial(xp, dys, saved, part)] * group, "backward"))
    return lambda: op.backward(xp, dys, saved, part)


def _kernel(xp, rng, call: KernelCall) -> Callable[[], Any]:
    """A closure running `call` once on freshly made inputs (made here, not timed)."""
    if call.phase in ("loss", "update", "check", "sum"):
        return _step_kernel(xp, rng, call)
    return _operator_kernel(xp, rng, call)


def time_kernels(calls: Sequence[KernelCall], cpu_only: bool = False
                 ) -> list[tuple[float, int, int]]:
    """(time as a multiple of the reference kernel's, bytes of the result, bytes the kernel
    left allocated once its result was dropped) of each call, on this process's device. Each
    timing of a kernel is paired with a timing of the reference just before it, so that a
    change in the device's speed between timings scales both. What a kernel leaves allocated
    is what its library keeps between calls (scratch, caches), which a device holds beside
    the arrays the memory model counts (`scheduler/memory_use.py` reads it)."""
    xp = array_module(cpu_only)
    sync = synchronizer(xp)
    rng = numpy.random.default_rng(0)
    reference = _reference_mix(xp)
    out = []
    for call in calls:
        kernel = _kernel(xp, rng, call)
        before = allocated_bytes(xp)
        ratio, result = _median_ratio(kernel, reference, sync)
        nbytes = _nbytes(result) if call.phase.endswith("partial") else 0
        del result
        after = allocated_bytes(xp)
        kept = max(0, after - before) if before is not None and after is not None else 0
        out.append((ratio, nbytes, kept))
    return out


def _matmul_operands(xp, rng):
    return (_array(xp, rng, (MATMUL, MATMUL), "float32"),
            _array(xp, rng, (MATMUL, MATMUL), "float32"))


def _reference_mix(xp) -> Callable[[], None]:
    """The reference kernel: a fixed mix of a matmul and a large copy, arrays made here."""
    a, b = _matmul_operands(xp, numpy.random.default_rng(0))
    src = xp.ones(REFERENCE_BYTES // 4, "float32")  # beyond the caches; quick to make
    dst = xp.empty_like(src)

    def mix():
        a @ b
        xp.copyto(dst, src)
    return mix


def reference_ms(cpu_only: bool = False) -> float:
    """The reference kernel's median time: kernel times are stored as multiples of it, so a
    cached table follows the speed the device has now (a shared machine's load changes)."""
    xp = array_module(cpu_only)
    return _median_ms(_reference_mix(xp), synchronizer(xp))[0]


def reference_work(cpu_only: bool = False) -> Callable[[], None]:
    """One reference kernel run to its end, arrays made here: the work between collectives
    that calibration times them amid (`process_groups.time_amid_work`)."""
    xp = array_module(cpu_only)
    sync = synchronizer(xp)
    mix = _reference_mix(xp)

    def work():
        mix()
        sync()
    return work


def reference_span_at(start: float, cpu_only: bool = False) -> tuple[float, float]:
    """(began, ended), wall-clock seconds: `REFERENCE_RUNS` reference kernels in a row, begun
    at the wall-clock time `start` (after making the arrays and one warm-up run; waiting a
    second at most). Devices timing it together must really run it at once: their Dask tasks
    start milliseconds apart, and those started first would otherwise run alone for a while."""
    xp = array_module(cpu_only)
    sync = synchronizer(xp)
    mix = _reference_mix(xp)
    mix()
    sync()
    time.sleep(min(1.0, max(0.0, start - time.time())))
    began = time.time()
    for _ in range(REFERENCE_RUNS):
        mix()
    sync()
    return began, time.time()


def device_speed(cpu_only: bool = False) -> tuple[float, float]:
    """(FLOP per ms of a float32 matmul, bytes per ms of a large copy) for analytic costs."""
    xp = array_module(cpu_only)
    sync = synchronizer(xp)
    rng = numpy.random.default_rng(0)
    a, b = _matmul_operands(xp, rng)
    matmul_ms, _ = _median_ms(lambda: a @ b, sync)
    src = _array(xp, rng, (SPEED_COPY_BYTES // 4,), "float32")
    dst = xp.empty_like(src)
    copy_ms, _ = _median_ms(lambda: xp.copyto(dst, src), sync)
    return 2 * MATMUL ** 3 / matmul_ms, src.nbytes / copy_ms

