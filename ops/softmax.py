"""Softmax along one axis.

The backward is the true softmax Jacobian-vector product, dx = y * (dy - sum(dy * y, axis)), not
FlexFlow's pass-through (which assumes a cross-entropy loss follows and folds its gradient in); the
loss module owns that shortcut if it wants it.

Every dim except `axis` splits without communication. `axis` splits too, as a reduction dim:
each partition's forward partial is its (max, sum of exp(x - max)) per row, merged as a
log-sum-exp; the backward partial is its sum(dy * y) per row, merged by summing. An unsplit
axis runs torch's softmax and its backward where torch is installed (ops/vendor.py).
"""

from __future__ import annotations

from dataclasses import dataclass

from . import vendor
from .base import AlongAxis, Kept
from .elementwise import independent_dim_kinds


@dataclass(frozen=True)
class Softmax(AlongAxis):
    axis: int = -1

    type_name = "Softmax"
    what = "softmax"

    @property
    def reduction_dims(self):
        return (self.axis,)

    def forward_partial(self, xp, xs, ws, part):
        (x,) = xs
        axis = self._axis(x.ndim)
        # Subtracting the max keeps exp from overflowing; it cancels in the ratio.
        peak = x.max(axis=axis, keepdims=True)
        return xp.stack([peak, xp.exp(x - peak).sum(axis=axis, keepdims=True)])

    def adds_partials(self, phase: str) -> bool:
        return phase == "backward"  # forward's are rescaled to their common peak first

    def combine(self, xp, partials, phase):
        if phase == "backward":
            return super().combine(xp, partials, phase)
        peaks = xp.stack([p[0] for p in partials])
        peak = peaks.max(axis=0)
        total = sum(p[1] * xp.exp(p[0] - peak) for p in partials)
        return xp.stack([peak, total])

    def forward(self, xp, xs, ws, part):
        (x,) = xs
        aten = vendor.aten(xp)
        if aten is not None and part.reduced is None:
            y = aten.torch.softmax(aten.tensor(x), self._axis(x.ndim))
            return [aten.array(y)], vendor.Saved(aten, (y,))
        peak, total = (part.reduced if part.reduced is not None
                       else self.forward_partial(xp, xs, ws, part))
        y = (xp.exp(x - peak) / total).astype(x.dtype, copy=False)
        return [y], y

    def kept_for_backward(self, inputs):
        return Kept(outputs=(0,))

    def backward_partial(self, xp, dys, saved, part):
        return (dys[0] * saved).sum(axis=self._axis(saved.ndim), keepdims=True)

    def backward(self, xp, dys, saved, part):
        if isinstance(saved, vendor.Saved):
            aten, (y,) = saved.aten, saved.values
            dx = aten.ops._softmax_backward_data(aten.tensor(dys[0]), y, self._axis(y.ndim),
                                                 y.dtype)
            return [aten.array(dx)], []
        y = saved
        dot = part.reduced if part.reduced is not None else self.backward_partial(
            xp, dys, saved, part)
        return [y * (dys[0] - dot)], []

    def dim_kinds(self, inputs):
        return independent_dim_kinds(inputs[0].ndim)

    def flops(self, inputs):
        # max, subtract, exp, sum, divide
        return 5 * inputs[0].size
