"""Mean over a set of dims.

Non-reduced dims split without communication (each output element averages input elements that
share its index in those dims). A reduced dim would need a cross-partition sum, so it is never
declared splittable; with keepdims it stays in the output with size 1.
"""

from __future__ import annotations

from dataclasses import dataclass

from .base import Operator, expect_count, expect_float, normalize_axis
from .box import Box
from .elementwise import independent_dim_kinds
from .spec import ShapeError, TensorSpec


@dataclass(frozen=True)
class Mean(Operator):
    """`dims` are batch-first and may be negative."""

    dims: tuple[int, ...]
    keepdims: bool = False

    type_name = "Mean"
    int_tuples = ("dims",)

    def _dims(self, shape) -> tuple[int, ...]:
        """The reduced dims, normalised and sorted."""
        what = f"mean of shape {tuple(shape)}"
        dims = tuple(sorted(normalize_axis(d, len(shape), what) for d in self.dims))
        if not dims or len(set(dims)) != len(dims):
            raise ShapeError(f"mean dims must be non-empty without repeats, got {self.dims} for "
                             f"input shape {tuple(shape)}")
        return dims

    def _kept(self, shape) -> list[int]:
        """For each output dim, the input dim it comes from."""
        dims = self._dims(shape)
        return list(range(len(shape))) if self.keepdims else \
            [d for d in range(len(shape)) if d not in dims]

    def infer(self, inputs):
        expect_count(inputs, 1, "mean")
        expect_float(inputs, 0, "mean input")
        shape = inputs[0].shape
        dims = self._dims(shape)
        out = tuple(1 if d in dims else shape[d] for d in self._kept(shape))
        return (TensorSpec(out, inputs[0].dtype),)

    def forward(self, xp, xs, ws, part):
        (x,) = xs
        return [x.mean(axis=self._dims(x.shape), keepdims=self.keepdims)], x.shape

    def backward(self, xp, dys, saved, part):
        x_shape = saved
        dims = self._dims(x_shape)
        count = 1
        for d in dims:
            count *= x_shape[d]
        dy = dys[0] if self.keepdims else xp.expand_dims(dys[0], dims)
        # A copy, not a broadcast view: callers may accumulate into the gradient in place.
        return [xp.broadcast_to(dy / count, x_shape).copy()], []

    def dim_kinds(self, inputs):
        shape = inputs[0].shape
        kinds = independent_dim_kinds(len(shape), fixed=self._dims(shape))
        return tuple(kinds[d] for d in self._kept(shape))

    def input_box(self, out_box, inputs, index):
        shape = inputs[0].shape
        dims = self._dims(shape)
        box = Box.full(shape)
        for j, d in enumerate(self._kept(shape)):
            if d not in dims:
                box = box.replace(d, *out_box.bounds[j])
        return box

    def flops(self, inputs):
        return inputs[0].size
