"""Operators that move elements without computing on them: Flat, Reshape, Transpose, Reverse.

Flat and Reshape regroup the elements of each sample, so a partition is exact only if it holds
whole samples: the batch dim is the one splittable dim, and only when the batch size is unchanged
(otherwise samples would be cut across partitions). Transpose and Reverse map each output element
to one input element, so every dim splits and the input box is the output box permuted or
mirrored.
"""

from __future__ import annotations

from dataclasses import dataclass

from .base import AlongAxis, Kept, Operator, expect_count
from .box import Box
from .elementwise import independent_dim_kinds
from .spec import DimKind, ShapeError, TensorSpec


class _Regroup(Operator):
    """Shared kernels and splitting rule of Flat and Reshape: subclasses only define `infer`."""

    def _keeps_batch(self, inputs) -> bool:
        return self.infer(inputs)[0].shape[0] == inputs[0].shape[0]

    def forward(self, xp, xs, ws, part):
        (x,) = xs
        return [x.reshape(part.out_box.shape)], x.shape

    def kept_for_backward(self, inputs):
        return Kept()

    def backward(self, xp, dys, saved, part):
        return [dys[0].reshape(saved)], []

    def dim_kinds(self, inputs):
        rank = self.infer(inputs)[0].ndim
        batch = DimKind.SAMPLE if self._keeps_batch(inputs) else None
        return (batch,) + (None,) * (rank - 1)

    def input_box(self, out_box, inputs, index):
        full = Box.full(inputs[0].shape)
        if not self._keeps_batch(inputs):
            return full
        return full.replace(0, *out_box.bounds[0])

    def flops(self, inputs):
        return 0


@dataclass(frozen=True)
class Flat(_Regroup):
    """(b, d1, d2, ...) -> (b, d1 * d2 * ...); FlexFlow's flat is (b, c, h, w) -> (b, c*h*w)."""

    type_name = "Flat"

    def infer(self, inputs):
        expect_count(inputs, 1, "flat")
        (x,) = inputs
        if x.ndim < 2:
            raise ShapeError(f"flat input must be at least 2-d, got shape {x.shape}")
        return (TensorSpec((x.shape[0], x.size // x.shape[0]), x.dtype),)


@dataclass(frozen=True)
class Reshape(_Regroup):
    """`shape` includes the batch dim; one entry may be -1 and is inferred from the element
    count."""

    shape: tuple[int, ...]

    type_name = "Reshape"
    int_tuples = ("shape",)

    def infer(self, inputs):
        expect_count(inputs, 1, "reshape")
        (x,) = inputs
        shape = self.shape
        if not shape or shape.count(-1) > 1 or any(n <= 0 and n != -1 for n in shape):
            raise ShapeError(f"reshape target must be positive sizes with at most one -1, got "
                             f"{shape} for input shape {x.shape}")
        known = 1
        for n in shape:
            if n != -1:
                known *= n
        if -1 in shape:
            if x.size % known:
                raise ShapeError(f"cannot reshape {x.shape} ({x.size} elements) to {shape}: "
                                 f"{x.size} is not a multiple of {known}")
            shape = tuple(x.size // known if n == -1 else n for n in shape)
        elif known != x.size:
            raise ShapeError(f"cannot reshape {x.shape} ({x.size} elements) to {shape} "
                             f"({known} elements)")
        return (TensorSpec(shape, x.dtype),)


@dataclass(frozen=True)
class Transpose(Operator):
    """Output dim j is input dim perm[j] (batch dim included, as in numpy.transpose).

    Each output dim keeps the SOAP kind of the input dim it came from: the output dim holding the
    input's batch dim is the SAMPLE dim.
    """

    perm: tuple[int, ...]

    type_name = "Transpose"
    int_tuples = ("perm",)

    def infer(self, inputs):
        expect_count(inputs, 1, "transpose")
        (x,) = inputs
        if sorted(self.perm) != list(range(x.ndim)):
            raise ShapeError(f"transpose perm must be a permutation of 0..{x.ndim - 1} for input "
                             f"shape {x.shape}, got {self.perm}")
        return (TensorSpec(tuple(x.shape[p] for p in self.perm), x.dtype),)

    def forward(self, xp, xs, ws, part):
        # A contiguous copy: the point of a transpose is the new memory layout.
        return [xp.ascontiguousarray(xs[0].transpose(self.perm))], None

    def kept_for_backward(self, inputs):
        return Kept()

    def backward(self, xp, dys, saved, part):
        inverse = tuple(sorted(range(len(self.perm)), key=self.perm.__getitem__))
        return [xp.ascontiguousarray(dys[0].transpose(inverse))], []

    def dim_kinds(self, inputs):
        self.infer(inputs)
        kinds = independent_dim_kinds(inputs[0].ndim)
        return tuple(kinds[p] for p in self.perm)

    def input_box(self, out_box, inputs, index):
        bounds = [None] * out_box.ndim
        for j, p in enumerate(self.perm):
            bounds[p] = out_box.bounds[j]
        return Box(tuple(bounds))

    def flops(self, inputs):
        return 0


@dataclass(frozen=True)
class Reverse(AlongAxis):
    """Reverses the order of elements along `axis`."""

    type_name = "Reverse"
    what = "reverse"

    def infer(self, inputs):
        expect_count(inputs, 1, "reverse")
        self._expect_axis(inputs[0])
        return (TensorSpec(inputs[0].shape, inputs[0].dtype),)

    def forward(self, xp, xs, ws, part):
        (x,) = xs
        return [xp.ascontiguousarray(xp.flip(x, self._axis(x.ndim)))], None

    def kept_for_backward(self, inputs):
        return Kept()

    def backward(self, xp, dys, saved, part):
        (dy,) = dys
        return [xp.ascontiguousarray(xp.flip(dy, self._axis(dy.ndim)))], []

    def dim_kinds(self, inputs):
        return independent_dim_kinds(self.infer(inputs)[0].ndim)

    def input_box(self, out_box, inputs, index):
        axis = self._axis(out_box.ndim)
        n = inputs[0].shape[axis]
        start, stop = out_box.bounds[axis]
        return out_box.replace(axis, n - stop, n - start)

    def flops(self, inputs):
        return 0
