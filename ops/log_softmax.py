"""Log-softmax along one axis: y = x - max - log(sum(exp(x - max))).

Computed directly rather than as log(softmax(x)): softmax underflows to 0 for logits far below the
maximum (log then gives -inf), while x - max - log(sum(...)) stays finite, and subtracting the
maximum keeps exp from overflowing. Backward: dx = dy - exp(y) * sum(dy, axis).

Every dim but `axis` splits without communication; the axis itself is not split (its sums would
need a cross-partition reduction).
"""

from __future__ import annotations

from dataclasses import dataclass

from .base import AlongAxis
from .elementwise import independent_dim_kinds


@dataclass(frozen=True)
class LogSoftmax(AlongAxis):
    axis: int = -1

    type_name = "LogSoftmax"
    what = "log_softmax"

    def forward(self, xp, xs, ws, part):
        (x,) = xs
        axis = self._axis(x.ndim)
        shifted = x - x.max(axis=axis, keepdims=True)
        y = shifted - xp.log(xp.exp(shifted).sum(axis=axis, keepdims=True))
        return [y.astype(x.dtype, copy=False)], y

    def backward(self, xp, dys, saved, part):
        y = saved
        (dy,) = dys
        total = dy.sum(axis=self._axis(y.ndim), keepdims=True)
        return [dy - xp.exp(y) * total], []

    def dim_kinds(self, inputs):
        rank = inputs[0].ndim
        return independent_dim_kinds(rank, fixed=(self._axis(rank),))

    def flops(self, inputs):
        # max, subtract, exp, sum, log, subtract
        return 6 * inputs[0].size
