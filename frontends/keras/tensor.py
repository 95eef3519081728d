"""Symbolic Keras tensors: a shape (without the batch dim) and a dtype, plus the layer call that
produced them. They hold no data; `compile` maps each one to an FFModel tensor (`ffhandle`).

The batch dim is FlexFlow's global batch size (`-b`), unknown until a model is compiled, so
`batch_shape[0]` is None until then.
"""

from __future__ import annotations

from flexflow.core import DataType

DTYPES = {"float32": DataType.DT_FLOAT, "float64": DataType.DT_DOUBLE,
          "int32": DataType.DT_INT32, "int64": DataType.DT_INT64}


def check_dtype(dtype, what: str) -> str:
    """The dtype's name ('float32' for None); a ValueError naming `what` if unsupported."""
    name = "float32" if dtype is None else getattr(dtype, "name", str(dtype))
    if name not in DTYPES:
        raise ValueError(f"{what}: unsupported dtype {dtype!r}; expected one of {sorted(DTYPES)}")
    return name


class Tensor:
    def __init__(self, shape, dtype="float32", from_layer=None, from_node=None, name=None):
        self.shape_without_batch = tuple(int(d) for d in shape)
        self.dtype_str = check_dtype(dtype, "Tensor")
        self.from_layer = from_layer
        self.from_node = from_node  # the Node (layer call) that produced it; None for inputs
        self.to_layers = []
        self.name = name
        self.batch_size = None
        self.ffhandle = None

    @property
    def batch_shape(self) -> tuple:
        return (self.batch_size,) + self.shape_without_batch

    shape = batch_shape

    @property
    def num_dims(self) -> int:
        return 1 + len(self.shape_without_batch)

    @property
    def dtype(self) -> DataType:
        return DTYPES[self.dtype_str]

    def __repr__(self) -> str:
        origin = f" from {self.from_layer.name}" if self.from_layer is not None else ""
        return f"<keras Tensor shape={self.batch_shape} dtype={self.dtype_str}{origin}>"

    # Operators build merge layers, as HEAD's Keras tensors do.
    def __add__(self, other):
        from .layers.merge import Add
        return Add()([self, other])

    def __sub__(self, other):
        from .layers.merge import Subtract
        return Subtract()([self, other])

    def __mul__(self, other):
        from .layers.merge import Multiply
        return Multiply()([self, other])

    def __matmul__(self, other):
        from .backend import batch_dot
        return batch_dot(self, other)

    def __pow__(self, exponent):
        from .backend import pow as power
        return power(self, exponent)
