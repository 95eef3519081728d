"""Concat joins tensors along an axis; Split cuts one tensor into pieces along an axis.

Both only move elements. Concat splits along every dim, the concat axis included: a partition
reads from each input the part of the output box that input covers, which may be nothing (a zero-
size slice, whose gradient is zero-size too). Split splits along every dim but `axis`, because its
outputs are separate tensors and a box of output 0 says nothing about where to cut the others.
"""

from __future__ import annotations

from dataclasses import dataclass

from .base import AlongAxis, Kept, Operator, expect_count, normalize_axis
from .elementwise import independent_dim_kinds
from .spec import ShapeError, TensorSpec


def _offsets(sizes) -> list[int]:
    """Start of each piece along the axis."""
    starts = [0]
    for n in sizes[:-1]:
        starts.append(starts[-1] + n)
    return starts


def _cut(array, sizes, axis: int) -> list:
    """Consecutive slices of `array` along `axis` with the given sizes."""
    index = [slice(None)] * array.ndim
    pieces = []
    for start, n in zip(_offsets(sizes), sizes):
        index[axis] = slice(start, start + n)
        pieces.append(array[tuple(index)])
    return pieces


@dataclass(frozen=True)
class Concat(AlongAxis):
    type_name = "Concat"
    what = "concat"

    def infer(self, inputs):
        if not inputs:
            raise ShapeError("concat takes at least 1 input, got 0")
        first = inputs[0]
        axis = normalize_axis(self.axis, first.ndim, f"concat of input 0 shape {first.shape}")
        for i, t in enumerate(inputs[1:], start=1):
            others_match = (t.ndim == first.ndim and all(
                m == n for d, (m, n) in enumerate(zip(t.shape, first.shape)) if d != axis))
            if not others_match:
                raise ShapeError(f"concat along axis {self.axis}: input {i} has shape {t.shape} "
                                 f"but input 0 has {first.shape}; all dims except the axis "
                                 f"must match")
            if t.dtype != first.dtype:
                raise ShapeError(f"concat: input {i} is {t.dtype} {t.shape}, input 0 is "
                                 f"{first.dtype} {first.shape}")
        shape = list(first.shape)
        shape[axis] = sum(t.shape[axis] for t in inputs)
        return (TensorSpec(tuple(shape), first.dtype),)

    def forward(self, xp, xs, ws, part):
        axis = self._axis(xs[0].ndim)
        return [xp.concatenate(list(xs), axis=axis)], [x.shape[axis] for x in xs]

    def kept_for_backward(self, inputs):
        return Kept()

    def backward(self, xp, dys, saved, part):
        return _cut(dys[0], saved, self._axis(dys[0].ndim)), []

    def dim_kinds(self, inputs):
        return independent_dim_kinds(inputs[0].ndim)

    def input_box(self, out_box, inputs, index):
        axis = self._axis(out_box.ndim)
        sizes = [t.shape[axis] for t in inputs]
        offset, n = _offsets(sizes)[index], sizes[index]
        start, stop = out_box.bounds[axis]
        # Intersect with [offset, offset + n) in the input's coordinates; an empty intersection
        # stays a well-formed (k, k) inside the input, so it clips and slices to zero size.
        lo = min(max(start - offset, 0), n)
        hi = max(min(stop - offset, n), lo)
        return out_box.replace(axis, lo, hi)

    def flops(self, inputs):
        return 0


@dataclass(frozen=True)
class Split(Operator):
    """Cuts `axis` into consecutive pieces of `sizes` (which must sum to its length); one output
    per piece."""

    sizes: tuple[int, ...]
    axis: int

    type_name = "Split"
    int_tuples = ("sizes",)

    def _axis(self, rank: int) -> int:
        return normalize_axis(self.axis, rank, "split")

    def infer(self, inputs):
        expect_count(inputs, 1, "split")
        (x,) = inputs
        axis = normalize_axis(self.axis, x.ndim, f"split of shape {x.shape}")
        if not self.sizes or any(n <= 0 for n in self.sizes) or sum(self.sizes) != x.shape[axis]:
            raise ShapeError(f"split sizes must be positive and sum to the length of axis "
                             f"{self.axis} ({x.shape[axis]} in shape {x.shape}), got {self.sizes}")
        outputs = []
        for n in self.sizes:
            shape = list(x.shape)
            shape[axis] = n
            outputs.append(TensorSpec(tuple(shape), x.dtype))
        return tuple(outputs)

    def forward(self, xp, xs, ws, part):
        (x,) = xs
        return _cut(x, self.sizes, self._axis(x.ndim)), None

    def kept_for_backward(self, inputs):
        return Kept()

    def backward(self, xp, dys, saved, part):
        return [xp.concatenate(list(dys), axis=self._axis(dys[0].ndim))], []

    def dim_kinds(self, inputs):
        rank = inputs[0].ndim
        return independent_dim_kinds(rank, fixed=(self._axis(rank),))

    def input_box(self, out_box, inputs, index):
        axis = self._axis(out_box.ndim)
        return out_box.replace(axis, 0, inputs[0].shape[axis])

    def flops(self, inputs):
        return 0
