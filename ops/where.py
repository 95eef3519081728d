"""Element-wise choice: y = a where cond else b, numpy broadcasting of the three.

Imported models write clipping, leaky ReLU and ELU this way (ONNX's Where after a Less). `cond` is
a bool tensor; `a` and `b` share one dtype, which y has. Gradients: a's is dy where cond holds, b's
dy where it does not, each summed over the dims it was broadcast along; cond (and integer
operands) get None. It splits as `ElementBinary` does (`Broadcasting`).
"""

from __future__ import annotations

from dataclasses import dataclass

from .base import expect_count, expect_one_dtype, sum_to_shape
from .elementwise import Broadcasting, broadcast_shape
from .spec import ShapeError, TensorSpec


@dataclass(frozen=True)
class Where(Broadcasting):
    type_name = "Where"

    def infer(self, inputs):
        expect_count(inputs, 3, "where (cond, a, b)")
        cond, a, b = inputs
        if cond.dtype != "bool":
            raise ShapeError(f"where's condition must be a bool tensor, got {cond.dtype}")
        expect_one_dtype(a, b, "where's choices")
        shape = broadcast_shape(broadcast_shape(cond.shape, a.shape), b.shape)
        return (TensorSpec(shape, a.dtype),)

    def forward(self, xp, xs, ws, part):
        cond, a, b = xs
        return [xp.where(cond, a, b)], (cond, a.shape, a.dtype, b.shape)

    def backward(self, xp, dys, saved, part):
        cond, a_shape, dtype, b_shape = saved
        (dy,) = dys
        if dtype.kind != "f":
            return [None, None, None], []
        zero = xp.zeros((), dy.dtype)
        da = sum_to_shape(xp, xp.where(cond, dy, zero), a_shape)
        db = sum_to_shape(xp, xp.where(cond, zero, dy), b_shape)
        return [None, da, db], []

