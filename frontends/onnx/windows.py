"""Sliding windows (Conv, MaxPool, AveragePool): ONNX's geometry, and the general case built
from taps.

`Window.of` reads kernel, strides, dilations, pads / auto_pad and ceil_mode the way ONNX defines
them and computes the output size of each spatial dim. 1-d and 2-d windows without dilation run
as FlexFlow's conv2d / pool2d. Every other window (dilated, or 3-d and up) is built from taps: for
each kernel offset, the input elements that offset reads for every output position are selected
(`compose.take` on the padded input), then combined: a running max or sum for pooling (the
average divided by each window's element count, as ONNX counts it), a 1x1 convolution per tap,
summed, for Conv. Exact, and trainable: each tap's kernel slice is its own weight. MaxPool's
Indices come from the taps too: the position of the first tap, in window order, that equals the
max.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import numpy as np

from flexflow.core import DataType, Tensor

from .compose import arith, expand, pad_constant, take
from .node import Node
from .values import Const


@dataclass(frozen=True)
class Window:
    sizes: tuple[int, ...]        # input spatial sizes
    kernel: tuple[int, ...]
    strides: tuple[int, ...]
    dilations: tuple[int, ...]
    pads: tuple[tuple[int, int], ...]  # declared (before, after)
    outs: tuple[int, ...]

    @staticmethod
    def of(node: Node, sizes, kernel, ceil_mode: bool = False) -> "Window":
        rank = len(sizes)
        strides = node.ints("strides", (1,) * rank)
        dilations = node.ints("dilations", (1,) * rank)
        spans = [(k - 1) * d + 1 for k, d in zip(kernel, dilations)]
        auto = node.attr("auto_pad", "NOTSET")
        if auto in ("SAME_UPPER", "SAME_LOWER"):
            pads = []
            for n, span, s in zip(sizes, spans, strides):
                total = max((math.ceil(n / s) - 1) * s + span - n, 0)
                small, large = total // 2, total - total // 2
                pads.append((small, large) if auto == "SAME_UPPER" else (large, small))
        elif auto == "VALID":
            pads = [(0, 0)] * rank
        else:
            flat = node.ints("pads", (0,) * (2 * rank))
            pads = list(zip(flat[:rank], flat[rank:]))
        outs = []
        for n, span, s, (before, after) in zip(sizes, spans, strides, pads):
            room = n + before + after - span
            if room < 0:
                raise node.error(f"the window {tuple(kernel)} (dilations {dilations}) is larger "
                                 f"than the padded input {tuple(sizes)}")
            out = (-(-room // s) if ceil_mode else room // s) + 1
            if ceil_mode and (out - 1) * s >= n + before:  # the last window must start inside
                out -= 1
            outs.append(out)
        return Window(tuple(sizes), tuple(kernel), tuple(strides), tuple(dilations),
                      tuple(pads), tuple(outs))

    @property
    def spans(self) -> list[int]:
        return [(k - 1) * d + 1 for k, d in zip(self.kernel, self.dilations)]

    @property
    def reach(self) -> list[tuple[int, int]]:
        """(before, after) padding the windows actually read: the declared padding before, and
        after whatever the last window reaches (ceil_mode may reach past the declared padding)."""
        return [(before, max((out - 1) * s + span - n - before, 0))
                for n, s, span, out, (before, _) in zip(self.sizes, self.strides, self.spans,
                                                        self.outs, self.pads)]

    @property
    def plain(self) -> bool:
        """Whether FlexFlow's conv2d / pool2d computes it (1-d or 2-d, no dilation)."""
        return len(self.sizes) <= 2 and all(d == 1 for d in self.dilations)

    def tap_indices(self, dim: int, offset: int) -> list[int]:
        """Positions in the padded input that kernel offset `offset` reads, per output."""
        return [i * self.strides[dim] + offset * self.dilations[dim]
                for i in range(self.outs[dim])]

    def counts(self, dim: int, include_pad: bool) -> np.ndarray:
        """Per output position: how many of its window's elements an average divides by; the
        declared padding counts when `include_pad`, what lies past it (ceil_mode) never does."""
        before, after = self.pads[dim]
        n = self.sizes[dim]
        low, high = (0, n + before + after) if include_pad else (before, before + n)
        return np.array([sum(low <= p < high for p in (i * self.strides[dim] + k *
                                                       self.dilations[dim]
                                                       for k in range(self.kernel[dim])))
                         for i in range(self.outs[dim])], np.float32)


def _padded(cv, node: Node, x: Tensor, window: Window, fill: float) -> Tensor:
    for dim, grow in enumerate(window.reach):
        x = pad_constant(cv, node, x, 2 + dim, grow, fill)
    return x


def _taps(cv, node: Node, padded: Tensor, window: Window):
    """(kernel offsets, the (N, C, *outs) elements they read) for every kernel offset."""
    for offsets in itertools.product(*(range(k) for k in window.kernel)):
        tap = padded
        for dim, offset in enumerate(offsets):
            tap = take(cv, node, tap, window.tap_indices(dim, offset), 2 + dim)
        yield offsets, tap


def pool_by_taps(cv, node: Node, x: Tensor, window: Window, is_max: bool,
                 include_pad: bool) -> Tensor:
    ff = cv.ffmodel
    padded = _padded(cv, node, x, window, float("-inf") if is_max else 0.0)
    total = None
    for _, tap in _taps(cv, node, padded, window):
        if total is None:
            total = tap
        else:
            total = (ff.max if is_max else ff.add)(total, tap, name=node.name)
    if is_max:
        return total
    counts = np.ones((1, 1) + window.outs, np.float32)
    for dim in range(len(window.outs)):
        shape = [1] * counts.ndim
        shape[2 + dim] = window.outs[dim]
        counts = counts * window.counts(dim, include_pad).reshape(shape)
    if (counts == counts.flat[0]).all():
        return ff.scalar_true_divide(total, float(counts.flat[0]), name=node.name)
    return arith(cv, node, "Div", total, Const(counts))


def conv_by_taps(cv, node: Node, x: Tensor, weight: np.ndarray, bias, window: Window,
                 groups: int) -> Tensor:
    """sum over kernel offsets of a 1x1 convolution of the elements each offset reads."""
    ff = cv.ffmodel
    n, out_channels = x.dims[0], weight.shape[0]
    padded = _padded(cv, node, x, window, 0.0)
    flat = (int(np.prod(window.outs[:-1])), window.outs[-1])
    total = None
    for offsets, tap in _taps(cv, node, padded, window):
        tap = cv.reshape(tap, (n, x.dims[1]) + flat, node)
        with_bias = total is None and bias is not None
        y = ff.conv2d(tap, out_channels, 1, 1, 1, 1, 0, 0, groups=groups, use_bias=with_bias,
                      name=node.name)
        kernel = weight[(slice(None), slice(None)) + offsets].reshape(weight.shape[:2] + (1, 1))
        cv.load(y, [kernel, bias] if with_bias else [kernel])
        total = y if total is None else ff.add(total, y, name=node.name)
    return cv.reshape(total, (n, out_channels) + window.outs, node)


def argmax_by_taps(cv, node: Node, x: Tensor, window: Window, pooled: Tensor,
                   column_major: bool) -> Tensor:
    """ONNX MaxPool's Indices (int64): for each output, the flat index in x, (N, C, spatial...)
    with the spatial dims row-major (or column-major), of the first element in window order
    equal to the max `pooled`. Padding is NaN here, which equals nothing. The spatial index is
    chosen in float32 (exact below 2**24 positions), then offset by each (n, c) plane in
    float64."""
    ff = cv.ffmodel
    sizes = window.sizes
    if np.prod(sizes) > 1 << 24:
        raise node.error(f"the Indices output of a pool over {sizes} positions: more than "
                         f"float32 counts exactly (2**24)")
    strides = {}
    for d in (range(len(sizes)) if column_major else reversed(range(len(sizes)))):
        strides[d] = int(np.prod([sizes[e] for e in strides]))
    padded = _padded(cv, node, x, window, float("nan"))
    index = None
    for offsets, tap in reversed(list(_taps(cv, node, padded, window))):
        spatial = np.zeros(window.outs, np.float32)
        for d, offset in enumerate(offsets):
            coords = np.array(window.tap_indices(d, offset)) - window.pads[d][0]
            along = [1] * len(sizes)
            along[d] = window.outs[d]
            spatial = spatial + (coords * strides[d]).reshape(along)
        position = cv.tensor(Const(spatial.reshape((1, 1) + window.outs)), node)
        if index is None:
            index = expand(cv, node, position, tuple(pooled.dims))
        else:
            hit = ff.compare(tap, pooled, "equal", name=node.name)
            index = ff.where(hit, position, index, name=node.name)
    planes = np.arange(x.dims[0] * x.dims[1], dtype=np.float32)
    planes = cv.operand(Const(planes.reshape(tuple(x.dims[:2]) + (1,) * len(sizes))), node,
                        DataType.DT_DOUBLE)
    offset = ff.scalar_multiply(planes, float(np.prod(sizes)), name=node.name)
    index = ff.add(ff.cast(index, DataType.DT_DOUBLE, name=node.name), offset, name=node.name)
    return ff.cast(index, DataType.DT_INT64, name=node.name)
