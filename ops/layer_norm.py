"""Layer normalisation over the trailing dimensions of a tensor.

y = (x - mean) / sqrt(var + eps) * gamma + beta, with mean and (biased) variance taken per sample
over the normalised dims. The statistics never cross the leading dims, so those split without any
communication; splitting a normalised dim would need a reduction of the statistics across
partitions (and of `mean(dxhat)`, `mean(dxhat * xhat)` in the backward), which is not implemented,
so the normalised dims are declared unsplittable.
"""

from __future__ import annotations

from dataclasses import dataclass

from .base import Kept, Operator, expect_count, expect_float
from .spec import DimKind, ShapeError, TensorSpec, WeightSpec


@dataclass(frozen=True)
class LayerNorm(Operator):
    """`axes` are batch-first and may be negative; they must be the last `len(axes)` dims."""

    axes: tuple[int, ...]
    elementwise_affine: bool = True
    eps: float = 1e-5

    type_name = "LayerNorm"
    int_tuples = ("axes",)

    def _count(self, inputs) -> int:
        """How many trailing dims are normalised (validating `axes` against the input)."""
        shape = inputs[0].shape
        rank = len(shape)
        count = len(self.axes)
        trailing = set(range(rank - count, rank))
        if (count == 0 or len(set(self.axes)) != count
                or any(not -rank <= a < rank for a in self.axes)
                or {a % rank for a in self.axes} != trailing):
            raise ShapeError(f"layer_norm axes must be the last len(axes) dims of the input, "
                             f"without repeats; got axes {self.axes} for input shape {shape}")
        return count

    def _normalised_shape(self, inputs) -> tuple[int, ...]:
        return inputs[0].shape[inputs[0].ndim - self._count(inputs):]

    def infer(self, inputs):
        expect_count(inputs, 1, "layer_norm")
        expect_float(inputs, 0, "layer_norm input")
        self._count(inputs)
        return (TensorSpec(inputs[0].shape, inputs[0].dtype),)

    def weight_specs(self, inputs):
        if not self.elementwise_affine:
            return ()
        shape = self._normalised_shape(inputs)
        return (WeightSpec(name="gamma", shape=shape, initializer="ones"),
                WeightSpec(name="beta", shape=shape))

    def forward(self, xp, xs, ws, part):
        (x,) = xs
        axes = tuple(range(x.ndim - len(self.axes), x.ndim))
        centred = x - x.mean(axis=axes, keepdims=True)
        rstd = 1.0 / xp.sqrt((centred * centred).mean(axis=axes, keepdims=True) + self.eps)
        xhat = centred * rstd
        y = xhat * ws[0] + ws[1] if self.elementwise_affine else xhat
        return [y], (xhat, rstd, ws[0] if ws else None)

    def kept_for_backward(self, inputs):
        """The normalised input (as large as the output)."""
        return Kept(extra=inputs[0].itemsize)

    def backward(self, xp, dys, saved, part):
        xhat, rstd, gamma = saved
        (dy,) = dys
        axes = tuple(range(xhat.ndim - len(self.axes), xhat.ndim))
        leading = tuple(range(xhat.ndim - len(self.axes)))
        dxhat = dy * gamma if self.elementwise_affine else dy
        dx = rstd * (dxhat - dxhat.mean(axis=axes, keepdims=True)
                     - xhat * (dxhat * xhat).mean(axis=axes, keepdims=True))
        if not self.elementwise_affine:
            return [dx], []
        return [dx], [(dy * xhat).sum(axis=leading), dy.sum(axis=leading)]

    def dim_kinds(self, inputs):
        rank = inputs[0].ndim
        leading = rank - self._count(inputs)
        kinds = [DimKind.SAMPLE] + [DimKind.ATTRIBUTE] * (leading - 1) if leading else []
        return tuple(kinds) + (None,) * (rank - leading)

    def flops(self, inputs):
        # mean, centre, square, variance, scale: ~5 per element; affine adds 2
        return (7 if self.elementwise_affine else 5) * inputs[0].size
