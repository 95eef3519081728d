"""Dense: y = activation(x @ kernel.T + bias) over the last dim (FFModel.dense)."""

from __future__ import annotations

from .kernel_layer import KernelLayer


class Dense(KernelLayer):
    input_rank = 1

    def __init__(self, units, input_shape=None, activation=None, use_bias=True,
                 kernel_initializer="glorot_uniform", bias_initializer="zeros", **kwargs):
        super().__init__("dense", "Dense", activation, use_bias, kernel_initializer,
                         bias_initializer, input_shape=input_shape, **kwargs)
        if int(units) <= 0:
            raise ValueError(f"layer '{self.name}': units must be positive, got {units}")
        self.units = int(units)

    def compute_output_shape(self, input_shapes):
        (shape,) = self.expect_inputs(input_shapes, 1)
        if not shape:
            raise ValueError("Dense needs inputs of at least 2 dims (batch, features)")
        return [shape[:-1] + (self.units,)]

    def _emit(self, ffmodel, inputs, shared_op):
        t = ffmodel.dense(inputs[0], self.units, self.activation.fused, self.use_bias, shared_op,
                          *self._initializer_handles(), name=self.name)
        return self._activated(ffmodel, t)
