"""Dense: y = activation(x @ kernel.T + bias) over the last dim (FFModel.dense)."""

from __future__ import annotations

from .. import initializers
from .activations import LayerActivation
from .base_layer import Layer, refuse


class Dense(Layer):
    input_rank = 1
    can_share_weights = True

    def __init__(self, units, input_shape=None, activation=None, use_bias=True,
                 kernel_initializer="glorot_uniform", bias_initializer="zeros",
                 kernel_regularizer=None, bias_regularizer=None, activity_regularizer=None,
                 kernel_constraint=None, bias_constraint=None, **kwargs):
        super().__init__("dense", "Dense", input_shape=input_shape, **kwargs)
        refuse(self.name, kernel_regularizer=kernel_regularizer, bias_regularizer=bias_regularizer,
               activity_regularizer=activity_regularizer, kernel_constraint=kernel_constraint,
               bias_constraint=bias_constraint)
        if int(units) <= 0:
            raise ValueError(f"layer '{self.name}': units must be positive, got {units}")
        self.units = int(units)
        self.activation = LayerActivation.parse(activation, self.name)
        self.use_bias = bool(use_bias)
        self.kernel_initializer = initializers.get(kernel_initializer)
        self.bias_initializer = initializers.get(bias_initializer)

    def compute_output_shape(self, input_shapes):
        (shape,) = self.expect_inputs(input_shapes, 1)
        if not shape:
            raise ValueError("Dense needs inputs of at least 2 dims (batch, features)")
        return [shape[:-1] + (self.units,)]

    def _emit(self, ffmodel, inputs, shared_op):
        t = ffmodel.dense(inputs[0], self.units, self.activation.fused, self.use_bias, shared_op,
                          self.kernel_initializer.ffhandle, self.bias_initializer.ffhandle,
                          name=self.name)
        return [self.activation.apply_after(ffmodel, t, self.name)], t.owner_op
