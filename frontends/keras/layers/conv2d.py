"""Conv2D over channels-first (N, C, H, W) tensors (FFModel.conv2d)."""

from __future__ import annotations

from . import geometry
from .kernel_layer import KernelLayer


class Conv2D(KernelLayer):
    input_rank = 3

    def __init__(self, filters, input_shape=None, kernel_size=0, strides=(1, 1), padding="valid",
                 data_format=None, dilation_rate=(1, 1), groups=1, activation=None,
                 use_bias=True, kernel_initializer="glorot_uniform", bias_initializer="zeros",
                 **kwargs):
        super().__init__("conv2d", "Conv2D", activation, use_bias, kernel_initializer,
                         bias_initializer, input_shape=input_shape, **kwargs)
        geometry.check_channels_first(data_format, self.name)
        if geometry.as_pair(dilation_rate, "dilation_rate", self.name) != (1, 1):
            raise ValueError(f"layer '{self.name}': dilation_rate={dilation_rate!r} is not "
                             f"supported (only (1, 1))")
        self.filters = int(filters)
        self.kernel_size = geometry.as_pair(kernel_size, "kernel_size", self.name)
        self.strides = geometry.as_pair(strides, "strides", self.name)
        if min(self.kernel_size) <= 0 or min(self.strides) <= 0 or self.filters <= 0:
            raise ValueError(f"layer '{self.name}': filters, kernel_size and strides must be "
                             f"positive, got {filters}, {kernel_size}, {strides}")
        self.padding = geometry.check_padding(padding, self.name)
        self.groups = int(groups)

    def _pads(self, shape):
        return geometry.resolve(self.padding, shape[1:], self.kernel_size, self.strides)

    def compute_output_shape(self, input_shapes):
        (shape,) = self.expect_inputs(input_shapes, 1)
        if len(shape) != 3:
            raise ValueError("Conv2D needs 4-d inputs (batch, channels, height, width)")
        if shape[0] % self.groups or self.filters % self.groups:
            raise ValueError(f"channels {shape[0]} and filters {self.filters} must be multiples "
                             f"of groups={self.groups}")
        hw = geometry.output_size(shape[1:], self.kernel_size, self.strides, self._pads(shape))
        return [(self.filters,) + hw]

    def _emit(self, ffmodel, inputs, shared_op):
        (kh, kw), (sh, sw) = self.kernel_size, self.strides
        ph, pw = self._pads(inputs[0].dims[1:])
        t = ffmodel.conv2d(inputs[0], self.filters, kh, kw, sh, sw, ph, pw,
                           self.activation.fused, self.groups, self.use_bias, shared_op,
                           *self._initializer_handles(), name=self.name)
        return self._activated(ffmodel, t)
