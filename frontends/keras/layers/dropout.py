"""Dropout: during training, zero each element with probability `rate` and scale the rest by
1 / (1 - rate); the identity in evaluate/predict (FFModel.dropout)."""

from __future__ import annotations

from .base_layer import Layer, refuse


class Dropout(Layer):
    def __init__(self, rate, noise_shape=None, seed=None, **kwargs):
        super().__init__("dropout", "Dropout", **kwargs)
        refuse(self.name, noise_shape=noise_shape)
        if not 0.0 <= float(rate) < 1.0:
            raise ValueError(f"layer '{self.name}': rate must be in [0, 1), got {rate}")
        self.rate = float(rate)
        self.seed = 0 if seed is None else int(seed)

    def compute_output_shape(self, input_shapes):
        return [self.expect_inputs(input_shapes, 1)[0]]

    def _emit(self, ffmodel, inputs, shared_op):
        return [ffmodel.dropout(inputs[0], self.rate, self.seed, name=self.name)], None
