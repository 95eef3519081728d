"""A weight used as a tensor: a layer with no inputs whose output is its own weight.

Imported models (ONNX, PyTorch) use parameters as plain operands (a learned positional embedding
added to activations, a scale multiplied in); this operator puts such a tensor into the graph. A
trainable weight gets its gradient and is updated like any other; a frozen one (a constant that is
not a parameter) returns no gradient, so the optimizer leaves it alone.

Splits: every output dim is a dim of the weight, so each is a PARAMETER dim: a partition computes
its box of the output from the same box of the weight, with no communication.
"""

from __future__ import annotations

from dataclasses import dataclass

from .base import Operator, expect_count
from .spec import DimKind, ShapeError, TensorSpec, WeightSpec


@dataclass(frozen=True)
class Weight(Operator):
    shape: tuple[int, ...]
    trainable: bool = True

    type_name = "Weight"
    int_tuples = ("shape",)

    def infer(self, inputs):
        expect_count(inputs, 0, "weight")
        if not self.shape:
            raise ShapeError("weight shape must have at least one dim, got ()")
        return (TensorSpec(self.shape),)

    def weight_specs(self, inputs):
        fan_out = self.shape[0]
        fan_in = self.shape[-1] if len(self.shape) > 1 else 1
        # a trainable weight gets a Glorot default; a frozen one is a constant, zeros by default
        initializer = "glorot_uniform" if self.trainable else "zeros"
        return (WeightSpec(name="weight", shape=self.shape, initializer=initializer,
                           trainable=self.trainable, fan_in=fan_in, fan_out=fan_out),)

    def forward(self, xp, xs, ws, part):
        # a copy: the optimizer updates the weight in place after this iteration's forward
        return [ws[0].copy()], None

    def backward(self, xp, dys, saved, part):
        return [], [dys[0] if self.trainable else None]

    def dim_kinds(self, inputs):
        return (DimKind.PARAMETER,) * len(self.shape)

    def weight_box(self, out_box, inputs, index):
        return out_box

    def flops(self, inputs):
        return 0
