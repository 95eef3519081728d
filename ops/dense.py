"""Dense (fully connected) layer over the last dimension: y = act(x @ kernel.T + bias)."""

from __future__ import annotations

from dataclasses import dataclass

from .activation import activate, activate_backward, check_activation
from .base import Operator, expect_float
from .box import Box
from .spec import DimKind, ShapeError, TensorSpec, WeightSpec


@dataclass(frozen=True)
class Dense(Operator):
    out_dim: int
    activation: str = "none"
    use_bias: bool = True

    type_name = "Dense"

    def infer(self, inputs):
        (x,) = inputs
        if x.ndim < 2:
            raise ShapeError(f"dense input must be at least 2-d, got shape {x.shape}")
        expect_float(inputs, 0, "dense input")
        if self.out_dim <= 0:
            raise ShapeError(f"dense out_dim must be positive, got {self.out_dim}")
        check_activation(self.activation)
        return (TensorSpec(x.shape[:-1] + (self.out_dim,), x.dtype),)

    def weight_specs(self, inputs):
        in_dim = inputs[0].shape[-1]
        kernel = WeightSpec("kernel", (self.out_dim, in_dim), "kernel", in_dim, self.out_dim)
        if not self.use_bias:
            return (kernel,)
        return kernel, WeightSpec("bias", (self.out_dim,), "bias")

    def forward(self, xp, xs, ws, part):
        (x,) = xs
        y = x @ ws[0].T
        if self.use_bias:
            y += ws[1]
        y, act_saved = activate(xp, self.activation, y)
        return [y], (x, ws[0], act_saved)

    def backward(self, xp, dys, saved, part):
        x, kernel, act_saved = saved
        dy = activate_backward(xp, self.activation, dys[0], act_saved)
        dy2 = dy.reshape(-1, dy.shape[-1])
        grads = [dy2.T @ x.reshape(-1, x.shape[-1])]
        if self.use_bias:
            grads.append(dy2.sum(axis=0))
        return [dy @ kernel if part.wants_grad(0) else None], grads

    def dim_kinds(self, inputs):
        rank = inputs[0].ndim
        return (DimKind.SAMPLE,) + (DimKind.ATTRIBUTE,) * (rank - 2) + (DimKind.PARAMETER,)

    def input_box(self, out_box, inputs, index):
        return out_box.replace(-1 % out_box.ndim, 0, inputs[0].shape[-1])

    def weight_box(self, out_box, inputs, index):
        start, stop = out_box.bounds[-1]
        if index == 0:
            return Box(((start, stop), (0, inputs[0].shape[-1])))
        return Box(((start, stop),))

    def flops(self, inputs):
        x = inputs[0]
        return 2 * x.size * self.out_dim
