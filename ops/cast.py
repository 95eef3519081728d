"""Element-wise conversion to another data type: y = x.astype(dtype).

Imported models convert between FlexFlow's data types (ONNX's Cast): float32 <-> float64, floats
to int32/int64 (truncating toward zero) and bool (nonzero is True), integers and bools to floats.
A float-to-float cast passes the gradient back converted to x's dtype, as PyTorch does; through a
cast to an integer or bool no gradient flows, so a float x gets zeros and an integer or bool x
gets None. Every dim splits freely.
"""

from __future__ import annotations

from dataclasses import dataclass

from .base import Operator, expect_count
from .elementwise import independent_dim_kinds
from .spec import DTYPES, ShapeError, TensorSpec


@dataclass(frozen=True)
class Cast(Operator):
    """`dtype` is one of spec.DTYPES."""

    dtype: str

    type_name = "Cast"

    def infer(self, inputs):
        expect_count(inputs, 1, "cast")
        if self.dtype not in DTYPES:
            raise ShapeError(f"cast to {self.dtype!r}: the data types are {DTYPES}")
        return (TensorSpec(inputs[0].shape, self.dtype),)

    def forward(self, xp, xs, ws, part):
        (x,) = xs
        return [x.astype(self.dtype)], (x.shape, x.dtype)

    def backward(self, xp, dys, saved, part):
        shape, dtype = saved
        if dtype.kind != "f":
            return [None], []
        if not self.dtype.startswith("float"):
            return [xp.zeros(shape, dtype)], []
        return [dys[0].astype(dtype)], []

    def dim_kinds(self, inputs):
        return independent_dim_kinds(inputs[0].ndim)
