"""Input: the placeholder a model reads its data through."""

from __future__ import annotations

from ..tensor import Tensor, check_dtype
from .base_layer import Layer


class InputLayer(Layer):
    """Produces one model input; not listed in `model.layers`."""

    def __init__(self, shape, dtype=None, name=None):
        super().__init__("input", "InputLayer", name=name, dtype=dtype)
        self.output_tensor = Tensor(shape, self._declared_dtype, from_layer=self, name=self.name)

    @property
    def output_tensors(self) -> list[Tensor]:
        return [self.output_tensor]

    @property
    def input_tensors(self) -> list[Tensor]:
        return []

    def compute_output_shape(self, input_shapes):
        raise ValueError("an InputLayer is not called on tensors")


def Input(shape=None, batch_size=None, dtype=None, sparse=False, tensor=None, ragged=False,
          name=None, batch_shape=None) -> Tensor:
    """A model input of per-sample `shape` (or `batch_shape`, whose batch dim is ignored: the
    batch size is FlexFlow's `-b`). dtype: 'float32' (default), 'float64', 'int32', 'int64'."""
    if sparse or ragged or tensor is not None:
        raise ValueError("Input: sparse, ragged and tensor= inputs are not supported")
    if shape is None and batch_shape is None:
        raise ValueError("Input needs shape= (without the batch dim) or batch_shape=")
    sample = tuple(batch_shape)[1:] if shape is None else (
        (shape,) if isinstance(shape, int) else tuple(shape))
    if any(d is None or int(d) <= 0 for d in sample):
        raise ValueError(f"Input: every dim of shape {sample} must be a positive int")
    check_dtype(dtype, "Input")
    return InputLayer(sample, dtype, name).output_tensor
