"""The error function, element-wise: y = erf(x).

Imported models need it on its own (ONNX's Erf, the exact GELU written out as x * (1 + erf(x /
sqrt 2)) / 2). It is `activation.erf`, the one the fused GELU uses, accurate to about one float32
ulp. The derivative is exact: d erf(x) / dx = 2 / sqrt(pi) * exp(-x^2). Every dim splits freely.
"""

from __future__ import annotations

from dataclasses import dataclass

from .activation import TWO_OVER_SQRT_PI, erf
from .elementwise import Pointwise


@dataclass(frozen=True)
class Erf(Pointwise):
    type_name = "Erf"
    what = "erf"

    def apply(self, xp, x):
        return erf(xp, x)

    def derivative(self, xp, x):
        return (TWO_OVER_SQRT_PI * xp.exp(-x * x)).astype(x.dtype, copy=False)

    def flops(self, inputs):
        return 45 * inputs[0].size  # the series, the fit and one exp
