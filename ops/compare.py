"""Element-wise comparison of two broadcast tensors into a bool tensor: y = a < b, a <= b, a > b,
a >= b or a == b.

Imported models compute masks this way (ONNX's Less, Greater, Equal, ...), which `Where` then
uses to choose between two tensors. The result is piecewise constant in a and b, so their
gradients are zero (as PyTorch leaves them: no gradient flows through a comparison); integer and
bool operands get None. It splits as `ElementBinary` does (`Broadcasting`).
"""

from __future__ import annotations

from dataclasses import dataclass

from .base import expect_count, expect_one_dtype
from .elementwise import Broadcasting, FuncFamily, broadcast_shape
from .spec import ShapeError, TensorSpec

COMPARISONS = {"less": "Less", "less_equal": "LessEqual", "greater": "Greater",
               "greater_equal": "GreaterEqual", "equal": "Equal"}


@dataclass(frozen=True)
class Compare(FuncFamily, Broadcasting):
    """`func` is one of COMPARISONS (numpy's names)."""

    FUNCS = COMPARISONS
    FAMILY = "comparison"

    def infer(self, inputs):
        expect_count(inputs, 2, self.func)
        self.expect_known_func()
        a, b = inputs
        expect_one_dtype(a, b, f"{self.func} operands")
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

