"""Reshape: regroup each sample's elements to `target_shape` (batch dim excluded; one dim may be
-1, inferred) (FFModel.reshape)."""

from __future__ import annotations

import math

from .base_layer import Layer


class Reshape(Layer):
    def __init__(self, target_shape, input_shape=None, **kwargs):
        super().__init__("reshape", "Reshape", input_shape=input_shape, **kwargs)
        self.target_shape = tuple(int(d) for d in target_shape)
        if self.target_shape.count(-1) > 1 or any(d == 0 or d < -1 for d in self.target_shape):
            raise ValueError(f"layer '{self.name}': target_shape {self.target_shape} must be "
                             f"positive sizes with at most one -1")

    def compute_output_shape(self, input_shapes):
        (shape,) = self.expect_inputs(input_shapes, 1)
        size, known = math.prod(shape), math.prod(d for d in self.target_shape if d != -1)
        if -1 in self.target_shape:
            if size % known:
                raise ValueError(f"cannot reshape {size} elements per sample to "
                                 f"{self.target_shape}")
            return [tuple(size // known if d == -1 else d for d in self.target_shape)]
        if known != size:
            raise ValueError(f"cannot reshape {size} elements per sample to {self.target_shape} "
                             f"({known} elements)")
        return [self.target_shape]

    def output_dtype(self, input_dtypes):
        return input_dtypes[0]

    def _emit(self, ffmodel, inputs, shared_op):
        batch, *sample = inputs[0].dims
        shape = (batch,) + self.compute_output_shape([tuple(sample)])[0]
        return [ffmodel.reshape(inputs[0], shape, name=self.name)], None
