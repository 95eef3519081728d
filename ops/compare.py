"""Element-wise comparison of two broadcast tensors into a bool tensor: y = a < b, a <= b, a > b,
a >= b or a == b.

Imported models compute masks this way (ONNX's Less, Greater, Equal, ...), which `Where` then
uses to choose between two tensors. The result is piecewise constant in a and b, so their
gradients are zero (as PyTorch leaves them: no gradient flows through a comparison); integer and
bool operands get None. Splitting follows `ElementBinary`: every output dim splits, a broadcast
operand is read whole along its size-1 dims.
"""

from __future__ import annotations

from dataclasses import dataclass

from .base import Operator, expect_count
from .elementwise import broadcast_box, broadcast_shape, independent_dim_kinds
from .spec import ShapeError, TensorSpec

COMPARISONS = {"less": "Less", "less_equal": "LessEqual", "greater": "Greater",
               "greater_equal": "GreaterEqual", "equal": "Equal"}


@dataclass(frozen=True)
class Compare(Operator):
    """`func` is one of COMPARISONS (numpy's names)."""

    func: str

    @property
    def type_name(self) -> str:
        return COMPARISONS.get(self.func, "Compare")

    def infer(self, inputs):
        expect_count(inputs, 2, self.func)
        if self.func not in COMPARISONS:
            raise ShapeError(f"unknown comparison {self.func!r}; expected one of "
                             f"{tuple(COMPARISONS)}")
        a, b = inputs
        if a.dtype != b.dtype:
            raise ShapeError(f"{self.func} operands must have one dtype, got {a.dtype} {a.shape} "
                             f"and {b.dtype} {b.shape}")
        if a.dtype == "bool" and self.func != "equal":
            raise ShapeError(f"{self.func} of bool tensors: only equal compares bools")
        return (TensorSpec(broadcast_shape(a.shape, b.shape), "bool"),)

    def forward(self, xp, xs, ws, part):
        a, b = xs
        return [getattr(xp, self.func)(a, b)], (a.shape, a.dtype, b.shape, b.dtype)

    def backward(self, xp, dys, saved, part):
        a_shape, a_dtype, b_shape, b_dtype = saved
        return [xp.zeros(shape, dtype) if dtype.kind == "f" else None
                for shape, dtype in ((a_shape, a_dtype), (b_shape, b_dtype))], []

    def dim_kinds(self, inputs):
        return independent_dim_kinds(self.infer(inputs)[0].ndim)

    def input_box(self, out_box, inputs, index):
        return broadcast_box(out_box, inputs[index].shape)
