"""Activation: an element-wise function, or softmax over the last dim, as its own layer. The
layer's default name is the activation's ('relu', 'softmax', ...), as in FlexFlow."""

from __future__ import annotations

from .activations import NAMES, emit_activation
from .base_layer import Layer


class Activation(Layer):
    def __init__(self, activation=None, **kwargs):
        if activation not in NAMES:
            raise ValueError(f"Activation: unsupported activation {activation!r}; expected one "
                             f"of {NAMES}")
        super().__init__(activation, "Activation", **kwargs)
        self.activation = activation

    def compute_output_shape(self, input_shapes):
        (shape,) = self.expect_inputs(input_shapes, 1)
        if self.activation == "softmax" and not shape:
            raise ValueError("softmax needs inputs of at least 2 dims")
        return [shape]

    def _emit(self, ffmodel, inputs, shared_op):
        return [emit_activation(ffmodel, inputs[0], self.activation, self.name)], None
