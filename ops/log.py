"""The natural logarithm, element-wise: y = log(x).

Imported models need it on its own (ONNX's Log, and the log-sum-exp that exporters write out for
LogSoftmax). As in PyTorch, log(0) is -inf and a negative input gives nan, without warnings;
dx = dy / x. Every dim splits freely.
"""

from __future__ import annotations

from dataclasses import dataclass

from .base import quiet
from .elementwise import Pointwise


@dataclass(frozen=True)
class Log(Pointwise):
    type_name = "Log"
    what = "log"

    def forward(self, xp, xs, ws, part):
        (x,) = xs
        with quiet(xp):
            return [xp.log(x)], x

    def backward(self, xp, dys, saved, part):
        with quiet(xp):
            return [dys[0] / saved], []
