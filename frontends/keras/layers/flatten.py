"""Flatten: (batch, d1, d2, ...) -> (batch, d1 * d2 * ...) (FFModel.flat)."""

from __future__ import annotations

import math

from .base_layer import Layer
from .geometry import check_channels_first


class Flatten(Layer):
    def __init__(self, data_format=None, **kwargs):
        super().__init__("flat", "Flatten", **kwargs)
        check_channels_first(data_format, self.name)

    def compute_output_shape(self, input_shapes):
        (shape,) = self.expect_inputs(input_shapes, 1)
        return [(math.prod(shape),)]

    def output_dtype(self, input_dtypes):
        return input_dtypes[0]

    def _emit(self, ffmodel, inputs, shared_op):
        return [ffmodel.flat(inputs[0], name=self.name)], None
