"""Max and average pooling over channels-first (N, C, H, W) tensors (FFModel.pool2d).

`strides=None` means the pool size (Keras). Average pooling with padding='same' divides each
window by the number of its elements inside the input, as Keras does; with explicit padding it
divides by the window size (FlexFlow/cuDNN).
"""

from __future__ import annotations

from flexflow.core import PoolType

from . import geometry
from .base_layer import Layer


class Pooling2D(Layer):
    input_rank = 3

    def __init__(self, pool_size=(2, 2), strides=None, padding="valid", default_name="pool2d",
                 pool_type=PoolType.POOL_MAX, layer_type="Pooling2D", data_format=None,
                 **kwargs):
        super().__init__(default_name, layer_type, **kwargs)
        geometry.check_channels_first(data_format, self.name)
        self.pool_size = geometry.as_pair(pool_size, "pool_size", self.name)
        self.strides = geometry.as_pair(strides if strides is not None else pool_size, "strides",
                                        self.name)
        if min(self.pool_size) <= 0 or min(self.strides) <= 0:
            raise ValueError(f"layer '{self.name}': pool_size and strides must be positive, got "
                             f"{pool_size}, {strides}")
        self.padding = geometry.check_padding(padding, self.name)
        self.pool_type = pool_type

    def _pads(self, shape):
        return geometry.resolve(self.padding, shape[1:], self.pool_size, self.strides)

    def compute_output_shape(self, input_shapes):
        (shape,) = self.expect_inputs(input_shapes, 1)
        if len(shape) != 3:
            raise ValueError(f"{self.layer_type} needs 4-d inputs (batch, channels, height, "
                             f"width)")
        pads = self._pads(shape)
        if any(max(p) >= k for p, k in zip(pads, self.pool_size)):
            raise ValueError(f"padding {pads} must be smaller than the pool size "
                             f"{self.pool_size}")
        return [shape[:1] + geometry.output_size(shape[1:], self.pool_size, self.strides, pads)]

    def _emit(self, ffmodel, inputs, shared_op):
        (kh, kw), (sh, sw) = self.pool_size, self.strides
        ph, pw = self._pads(inputs[0].dims[1:])
        t = ffmodel.pool2d(inputs[0], kh, kw, sh, sw, ph, pw, self.pool_type, name=self.name,
                           count_include_pad=self.padding != "same")
        return [t], None


class MaxPooling2D(Pooling2D):
    def __init__(self, pool_size=(2, 2), strides=None, padding="valid", data_format=None,
                 **kwargs):
        super().__init__(pool_size, strides, padding, "maxpool2d", PoolType.POOL_MAX,
                         "MaxPooling2D", data_format, **kwargs)


class AveragePooling2D(Pooling2D):
    def __init__(self, pool_size=(2, 2), strides=None, padding="valid", data_format=None,
                 **kwargs):
        super().__init__(pool_size, strides, padding, "averagepool2d", PoolType.POOL_AVG,
                         "AveragePooling2D", data_format, **kwargs)
