"""BatchNormalization over the channels (dim 1) of (N, C, H, W) or (N, C) tensors
(FFModel.batch_norm, without its fused ReLU).

`momentum` and `epsilon` have Keras's meaning (moving = momentum * moving + (1 - momentum) *
batch statistic). Statistics are per channel, dim 1, since tensors are channels-first; `axis`
must name that dim (1, or Keras's default -1, accepted for scripts written for FlexFlow, which
ignores it). A 2-d input is normalised per feature through a (N, C, 1, 1) view.
"""

from __future__ import annotations

from .base_layer import Layer, refuse

DEFAULT_INITIALIZERS = {"beta_initializer": "zeros", "gamma_initializer": "ones",
                        "moving_mean_initializer": "zeros", "moving_variance_initializer": "ones"}


class BatchNormalization(Layer):
    def __init__(self, axis=-1, momentum=0.99, epsilon=1e-3, center=True, scale=True,
                 beta_initializer="zeros", gamma_initializer="ones",
                 moving_mean_initializer="zeros", moving_variance_initializer="ones",
                 beta_regularizer=None, gamma_regularizer=None, beta_constraint=None,
                 gamma_constraint=None, **kwargs):
        super().__init__("batch_normalization", "BatchNormalization", **kwargs)
        refuse(self.name, beta_regularizer=beta_regularizer, gamma_regularizer=gamma_regularizer,
               beta_constraint=beta_constraint, gamma_constraint=gamma_constraint,
               center=not center, scale=not scale)
        given = {"beta_initializer": beta_initializer, "gamma_initializer": gamma_initializer,
                 "moving_mean_initializer": moving_mean_initializer,
                 "moving_variance_initializer": moving_variance_initializer}
        for key, value in given.items():
            if value != DEFAULT_INITIALIZERS[key]:
                raise ValueError(f"layer '{self.name}': {key}={value!r} is not supported (only "
                                 f"{DEFAULT_INITIALIZERS[key]!r})")
        if axis not in (1, -1):
            raise ValueError(f"layer '{self.name}': axis={axis} is not supported; statistics are "
                             f"per channel (axis 1, channels-first)")
        if not 0.0 <= float(momentum) <= 1.0 or float(epsilon) <= 0:
            raise ValueError(f"layer '{self.name}': momentum must be in [0, 1] and epsilon "
                             f"positive, got {momentum}, {epsilon}")
        self.axis, self.momentum, self.epsilon = axis, float(momentum), float(epsilon)

    def compute_output_shape(self, input_shapes):
        (shape,) = self.expect_inputs(input_shapes, 1)
        if len(shape) not in (1, 3):
            raise ValueError("BatchNormalization needs (batch, channels, height, width) or "
                             "(batch, features) inputs")
        return [shape]

    def _emit(self, ffmodel, inputs, shared_op):
        x = inputs[0]
        flat = x.num_dims == 2
        if flat:
            x = ffmodel.reshape(x, x.dims + (1, 1), name=f"{self.name}_to_nchw")
        y = ffmodel.batch_norm(x, relu=False, name=self.name, eps=self.epsilon,
                               momentum=1.0 - self.momentum)
        op = y.owner_op
        if flat:
            y = ffmodel.reshape(y, inputs[0].dims, name=f"{self.name}_from_nchw")
        return [y], op
