"""Softmax along one axis.

The backward is the true softmax Jacobian-vector product, dx = y * (dy - sum(dy * y, axis)), not
FlexFlow's pass-through (which assumes a cross-entropy loss follows and folds its gradient in); the
loss module owns that shortcut if it wants it.

Every dim except `axis` splits without communication. Splitting `axis` itself would need two
cross-partition reductions in the forward (the max and the sum of exponentials) and one in the
backward (sum(dy * y)); that is not implemented, so `axis` is declared unsplittable.
"""

from __future__ import annotations

from dataclasses import dataclass

from .base import Operator, expect_count, expect_float, normalize_axis
from .elementwise import independent_dim_kinds
from .spec import TensorSpec


@dataclass(frozen=True)
class Softmax(Operator):
    axis: int = -1

    type_name = "Softmax"

    def _axis(self, rank: int) -> int:
        return normalize_axis(self.axis, rank, "softmax")

    def infer(self, inputs):
        expect_count(inputs, 1, "softmax")
        expect_float(inputs, 0, "softmax input")
        normalize_axis(self.axis, inputs[0].ndim, f"softmax of shape {inputs[0].shape}")
        return (TensorSpec(inputs[0].shape, inputs[0].dtype),)

    def forward(self, xp, xs, ws, part):
        (x,) = xs
        axis = self._axis(x.ndim)
        # Subtracting the max keeps exp from overflowing; it cancels in the ratio.
        e = xp.exp(x - x.max(axis=axis, keepdims=True))
        y = e / e.sum(axis=axis, keepdims=True)
        return [y], y

    def backward(self, xp, dys, saved, part):
        y = saved
        (dy,) = dys
        axis = self._axis(y.ndim)
        return [y * (dy - (dy * y).sum(axis=axis, keepdims=True))], []

    def dim_kinds(self, inputs):
        rank = inputs[0].ndim
        return independent_dim_kinds(rank, fixed=(self._axis(rank),))

    def flops(self, inputs):
        # max, subtract, exp, sum, divide
        return 5 * inputs[0].size
