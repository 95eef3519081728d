"""Element-wise power with a tensor exponent: y = x ** e, numpy broadcasting of x and e.

(`ElementUnary("pow", s)` covers a scalar exponent; both take the base's gradient from
`elementwise.pow_base_grad`.) Gradients, as PyTorch defines them:
dx = dy * e * x ** (e - 1), taken as 0 where e == 0, and de = dy * y * log(x), taken as 0 at
x == 0 with e >= 0 (the limit of x ** e * log x) instead of the nan that log(0) would give. A
negative base has no real logarithm, so its exponent gradient is nan, as in PyTorch.

It splits as `ElementBinary` does (`Broadcasting`).
"""

from __future__ import annotations

from dataclasses import dataclass

from .base import float_operands, quiet, sum_to_shape
from .elementwise import Broadcasting, broadcast_shape, pow_base_grad
from .spec import TensorSpec


@dataclass(frozen=True)
class Power(Broadcasting):
    type_name = "Power"

    def infer(self, inputs):
        x, e = float_operands(inputs, "power", ("base", "exponent"))
        return (TensorSpec(broadcast_shape(x.shape, e.shape), x.dtype),)

    def forward(self, xp, xs, ws, part):
        x, e = xs
        y = xp.power(x, e)
        return [y], (x, e, y)

    def backward(self, xp, dys, saved, part):
        x, e, y = saved
        (dy,) = dys
        dx = pow_base_grad(xp, dy, x, e)
        with quiet(xp):
            zero_base = (x == 0) & (e >= 0)
            log_x = xp.log(xp.where(zero_base, 1, x))
            de = xp.where(zero_base, 0, dy * y * log_x).astype(dy.dtype, copy=False)
        return [sum_to_shape(xp, dx, x.shape), sum_to_shape(xp, de, e.shape)], []

    def flops(self, inputs):
        return 3 * self.infer(inputs)[0].size
