"""Element-wise power with a tensor exponent: y = x ** e, numpy broadcasting of x and e.

(`ElementUnary("pow", s)` covers a scalar exponent.) Gradients, as PyTorch defines them:
dx = dy * e * x ** (e - 1), taken as 0 where e == 0, and de = dy * y * log(x), taken as 0 at
x == 0 with e >= 0 (the limit of x ** e * log x) instead of the nan that log(0) would give. A
negative base has no real logarithm, so its exponent gradient is nan, as in PyTorch.

Splitting follows `ElementBinary`: every output dim splits; a broadcast operand is read whole
along its size-1 dims and its gradient summed there (and across partitions by the executor).
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

from .base import Operator, expect_count, expect_float, sum_to_shape
from .elementwise import broadcast_box, broadcast_shape, independent_dim_kinds
from .spec import ShapeError, TensorSpec


@dataclass(frozen=True)
class Power(Operator):
    type_name = "Power"

    def infer(self, inputs):
        expect_count(inputs, 2, "power (base, exponent)")
        expect_float(inputs, 0, "power base")
        expect_float(inputs, 1, "power exponent")
        x, e = inputs
        if x.dtype != e.dtype:
            raise ShapeError(f"power base and exponent must have one dtype, got {x.dtype} "
                             f"{x.shape} and {e.dtype} {e.shape}")
        return (TensorSpec(broadcast_shape(x.shape, e.shape), x.dtype),)

    def forward(self, xp, xs, ws, part):
        x, e = xs
        y = xp.power(x, e)
        return [y], (x, e, y)

    def backward(self, xp, dys, saved, part):
        x, e, y = saved
        (dy,) = dys
        with _quiet(xp):
            dx = xp.where(e == 0, 0, dy * e * xp.power(x, e - 1)).astype(dy.dtype, copy=False)
            zero_base = (x == 0) & (e >= 0)
            log_x = xp.log(xp.where(zero_base, 1, x))
            de = xp.where(zero_base, 0, dy * y * log_x).astype(dy.dtype, copy=False)
        return [sum_to_shape(xp, dx, x.shape), sum_to_shape(xp, de, e.shape)], []

    def dim_kinds(self, inputs):
        return independent_dim_kinds(self.infer(inputs)[0].ndim)

    def input_box(self, out_box, inputs, index):
        return broadcast_box(out_box, inputs[index].shape)

    def flops(self, inputs):
        return 3 * self.infer(inputs)[0].size


def _quiet(xp):
    """Silence numpy's invalid-value warning for log of a negative base (the nan is the answer);
    cupy does not warn, so there it is a no-op."""
    errstate = getattr(xp, "errstate", None)
    if errstate is None:
        return contextlib.nullcontext()
    return errstate(invalid="ignore", divide="ignore")
