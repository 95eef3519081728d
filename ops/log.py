"""The natural logarithm, element-wise: y = log(x).

Imported models need it on its own (ONNX's Log, and the log-sum-exp that exporters write out for
LogSoftmax). As in PyTorch, log(0) is -inf and a negative input gives nan, without warnings;
dx = dy / x. Every dim splits freely.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

from .base import Operator, expect_count, expect_float
from .elementwise import independent_dim_kinds
from .spec import TensorSpec


def quiet(xp):
    """numpy's errstate silencing the divide-by-zero and invalid-value warnings of log(0) and
    log(-1) (the -inf and nan are the answers); cupy does not warn, so there it is a no-op."""
    errstate = getattr(xp, "errstate", None)
    if errstate is None:
        return contextlib.nullcontext()
    return errstate(invalid="ignore", divide="ignore")


@dataclass(frozen=True)
class Log(Operator):
    type_name = "Log"

    def infer(self, inputs):
        expect_count(inputs, 1, "log")
        expect_float(inputs, 0, "log input")
        return (TensorSpec(inputs[0].shape, inputs[0].dtype),)

    def forward(self, xp, xs, ws, part):
        (x,) = xs
        with quiet(xp):
            return [xp.log(x)], x

    def backward(self, xp, dys, saved, part):
        with quiet(xp):
            return [dys[0] / saved], []

    def dim_kinds(self, inputs):
        return independent_dim_kinds(inputs[0].ndim)
