"""What Dense and Conv2D share: a kernel and an optional bias with their initializers, and an
activation fused into the FFModel op where FFModel has it.

Keras's regularizers and constraints of these weights arrive as keyword arguments and are
refused when set: FlexFlow's layers have none.
"""

from __future__ import annotations

from .. import initializers
from .activations import LayerActivation
from .base_layer import Layer, refuse

UNSUPPORTED = ("kernel_regularizer", "bias_regularizer", "activity_regularizer",
               "kernel_constraint", "bias_constraint")


class KernelLayer(Layer):
    can_share_weights = True

    def __init__(self, default_name: str, layer_type: str, activation, use_bias,
                 kernel_initializer, bias_initializer, **kwargs):
        unsupported = {key: kwargs.pop(key, None) for key in UNSUPPORTED}
        super().__init__(default_name, layer_type, **kwargs)
        refuse(self.name, **unsupported)
        self.activation = LayerActivation.parse(activation, self.name)
        self.use_bias = bool(use_bias)
        self.kernel_initializer = initializers.get(kernel_initializer)
        self.bias_initializer = initializers.get(bias_initializer)

    def _initializer_handles(self) -> tuple:
        """The FFModel initializers of the kernel and the bias, in FFModel's argument order."""
        return self.kernel_initializer.ffhandle, self.bias_initializer.ffhandle

    def _activated(self, ffmodel, t):
        """The layer's outputs and shared op from the FFModel op's output `t`: the activation
        FFModel could not fuse is applied after it."""
        return [self.activation.apply_after(ffmodel, t, self.name)], t.owner_op
