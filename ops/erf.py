"""The error function, element-wise: y = erf(x).

Imported models need it on its own (ONNX's Erf, the exact GELU written out as x * (1 + erf(x /
sqrt 2)) / 2). numpy has no erf and kernels may not use scipy, so it is computed here, in float64
and rounded once, to within about one float32 ulp: the Maclaurin series below |x| = 1, and above
it 1 - erfc(|x|) with Numerical Recipes' Chebyshev fit of erfc (fractional error < 1.2e-7 of
erfc <= 0.16, so < 2e-8 of erf). (`activation.erf`, the fused GELU's cheaper approximation, is
off by up to 1.5e-7 absolute, a large relative error near 0.) The derivative is exact:
d erf(x) / dx = 2 / sqrt(pi) * exp(-x^2). Every dim splits freely.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from .base import Operator, expect_count, expect_float
from .elementwise import independent_dim_kinds
from .spec import TensorSpec

_TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)
_SERIES_TERMS = 16  # the 16th term is below 2e-15 for |x| < 1
_ERFC_FIT = (-1.26551223, 1.00002368, 0.37409196, 0.09678418, -0.18628806, 0.27886807,
             -1.13520398, 1.48851587, -0.82215223, 0.17087277)


def erf64(xp, x):
    """erf of a float64 array."""
    x2 = x * x
    term = x
    series = x
    for n in range(1, _SERIES_TERMS):
        term = term * (-x2 / n)
        series = series + term / (2 * n + 1)
    a = xp.abs(x)
    t = 1.0 / (1.0 + 0.5 * a)
    poly = _ERFC_FIT[-1]
    for c in reversed(_ERFC_FIT[:-1]):
        poly = c + t * poly
    erfc = t * xp.exp(-x2 + poly)
    return xp.where(a < 1.0, _TWO_OVER_SQRT_PI * series, xp.sign(x) * (1.0 - erfc))


@dataclass(frozen=True)
class Erf(Operator):
    type_name = "Erf"

    def infer(self, inputs):
        expect_count(inputs, 1, "erf")
        expect_float(inputs, 0, "erf input")
        return (TensorSpec(inputs[0].shape, inputs[0].dtype),)

    def forward(self, xp, xs, ws, part):
        (x,) = xs
        return [erf64(xp, x.astype("float64")).astype(x.dtype, copy=False)], x

    def backward(self, xp, dys, saved, part):
        x = saved
        slope = (_TWO_OVER_SQRT_PI * xp.exp(-x * x)).astype(x.dtype, copy=False)
        return [dys[0] * slope], []

    def dim_kinds(self, inputs):
        return independent_dim_kinds(inputs[0].ndim)

    def flops(self, inputs):
        return 45 * inputs[0].size  # the series, the fit and one exp
