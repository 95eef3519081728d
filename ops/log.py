"""The natural logarithm, element-wise: y = log(x).

Imported models need it on its own (ONNX's Log, and the log-sum-exp that exporters write out for
LogSoftmax). As in PyTorch, log(0) is -inf and a negative input gives nan, without warnings;
dx = dy * (1 / x). Every dim splits freely.
"""

from __future__ import annotations

from dataclasses import dataclass

from .base import quiet
from .elementwise import Pointwise


@dataclass(frozen=True)
class Log(Pointwise):
    type_name = "Log"
    what = "log"

    def apply(self, xp, x):
        with quiet(xp):
            return xp.log(x)

    def derivative(self, xp, x):
        with quiet(xp):
            return 1 / x
