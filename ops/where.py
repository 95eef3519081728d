"""Element-wise choice: y = a where cond else b, numpy broadcasting of the three.

Imported models write clipping, leaky ReLU and ELU this way (ONNX's Where after a Less). `cond` is
a bool tensor; `a` and `b` share one dtype, which y has. Gradients: a's is dy where cond holds, b's
dy where it does not, each summed over the dims it was broadcast along; cond (and integer
operands) get None. Every output dim splits; a broadcast operand is read whole along its size-1
dims and its gradient summed there (and across partitions by the executor).
"""

from __future__ import annotations

from dataclasses import dataclass

from .base import Operator, expect_count, sum_to_shape
from .elementwise import broadcast_box, broadcast_shape, independent_dim_kinds
from .spec import ShapeError, TensorSpec


@dataclass(frozen=True)
class Where(Operator):
    type_name = "Where"

    def infer(self, inputs):
        expect_count(inputs, 3, "where (cond, a, b)")
        cond, a, b = inputs
        if cond.dtype != "bool":
            raise ShapeError(f"where's condition must be a bool tensor, got {cond.dtype}")
        if a.dtype != b.dtype:
            raise ShapeError(f"where's choices must have one dtype, got {a.dtype} {a.shape} "
                             f"and {b.dtype} {b.shape}")
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

    def dim_kinds(self, inputs):
        return independent_dim_kinds(self.infer(inputs)[0].ndim)

    def input_box(self, out_box, inputs, index):
        return broadcast_box(out_box, inputs[index].shape)
