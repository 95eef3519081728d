"""Dense (fully connected) layer over the last dimension: y = act(x @ kernel.T + bias).

Where torch is installed the products run in ATen (MKL on a CPU, cuBLAS on a GPU; ops/vendor.py)
with the bias folded into the forward product, as PyTorch does; numpy's BLAS would otherwise run
its own thread pool beside torch's, and the two pools' spinning threads slow each other down.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from . import vendor
from .activation import (activate, activate_backward, aten_activate, aten_activate_backward,
                         check_activation)
from .base import Contraction, Operator, activation_kept, expect_float
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
        kernel = WeightSpec(name="kernel", shape=(self.out_dim, in_dim),
                            initializer="glorot_uniform", fan_in=in_dim, fan_out=self.out_dim)
        if not self.use_bias:
            return (kernel,)
        return kernel, WeightSpec(name="bias", shape=(self.out_dim,))

    def forward(self, xp, xs, ws, part):
        """Split over input features (`contraction`), `part.reduced` is the sum of the
        partitions' products, bias added: what is left is the activation."""
        (x,) = xs
        aten = vendor.aten(xp)
        if aten is not None:
            return self._aten_forward(aten, x, ws, part.reduced)
        y = self._product(x, ws) if part.reduced is None else part.reduced.copy()
        y, act_saved = activate(xp, self.activation, y, overwrite=True)
        return [y], (x, ws[0], act_saved, len(ws) > 1)

    def forward_partial(self, xp, xs, ws, part):
        """This partition's share of the output under a contraction split: its input
        features' product, with the bias where it reads it (the first partition of a box)."""
        (x,) = xs
        aten = vendor.aten(xp)
        if aten is None:
            return self._product(x, ws)
        rows = aten.tensor(x).reshape(-1, x.shape[-1])
        return aten.array(self._aten_product(aten, rows, ws)).reshape(
            x.shape[:-1] + (ws[0].shape[0],))

    def contraction(self, inputs):
        x = inputs[0]
        return Contraction(size=x.shape[-1], inputs=((0, x.ndim - 1),), weights=((0, 1),),
                           first_only=(1,) if self.use_bias else ())

    def kept_for_backward(self, inputs):
        return replace(activation_kept(self.activation), inputs=(0,))

    def backward(self, xp, dys, saved, part):
        if isinstance(saved, vendor.Saved):
            return self._aten_backward(saved.aten, dys[0], *saved.values, part)
        x, kernel, act_saved, bias = saved
        dy = activate_backward(xp, self.activation, dys[0], act_saved)
        dy2 = dy.reshape(-1, dy.shape[-1])
        grads = [dy2.T @ x.reshape(-1, x.shape[-1])]
        if bias:
            grads.append(dy2.sum(axis=0))
        return [dy @ kernel if part.wants_grad(0) else None], grads

    @staticmethod
    def _product(x, ws):
        """x @ kernel.T, plus the bias where `ws` holds one."""
        y = x @ ws[0].T
        if len(ws) > 1:
            y += ws[1]
        return y

    @staticmethod
    def _aten_product(aten, rows, ws):
        kernel = aten.tensor(ws[0])
        if len(ws) > 1:  # the bias folded into the product
            return aten.torch.addmm(aten.tensor(ws[1]), rows, kernel.t())
        return aten.torch.mm(rows, kernel.t())

    def _aten_forward(self, aten, x, ws, reduced):
        rows = aten.tensor(x).reshape(-1, x.shape[-1])
        kernel = aten.tensor(ws[0])
        if reduced is None:
            y = self._aten_product(aten, rows, ws)
        else:
            y = aten.tensor(reduced).reshape(-1, kernel.shape[0]).clone()
        y, act_saved = aten_activate(aten, self.activation, y, overwrite=True)
        return ([aten.array(y).reshape(x.shape[:-1] + (kernel.shape[0],))],
                vendor.Saved(aten, (rows, kernel, act_saved, x.shape, len(ws) > 1)))

    def _aten_backward(self, aten, dy, rows, kernel, act_saved, in_shape, bias, part):
        dy = aten.tensor(dy).reshape(-1, kernel.shape[0])
        dy = aten_activate_backward(aten, self.activation, dy, act_saved)
        grads = [aten.array(aten.torch.mm(dy.t(), rows))]
        if bias:
            grads.append(aten.array(dy.sum(0)))
        dx = aten.array(aten.torch.mm(dy, kernel).reshape(in_shape)) if part.wants_grad(0) else None
        return [dx], grads

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
