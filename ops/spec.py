"""Value types that describe tensors and weights without holding data."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

FLOAT_DTYPES = ("float32", "float64")
INT_DTYPES = ("int32", "int64")
DTYPES = FLOAT_DTYPES + INT_DTYPES + ("bool",)
MAX_ELEMENTS = 1 << 40  # larger declared shapes come from mistakes or hostile files, not models


class ShapeError(ValueError):
    """A model was built with shapes or arguments an operator cannot accept.

    Operators raise it with what they expected and what they got; the graph builder prefixes the
    layer's name and type, so users see which layer of their model is wrong.
    """


class DimKind(Enum):
    """How an output dimension may be split (FlexFlow's SOAP vocabulary, minus operator)."""

    SAMPLE = "sample"
    ATTRIBUTE = "attribute"
    PARAMETER = "parameter"


@dataclass(frozen=True)
class TensorSpec:
    shape: tuple[int, ...]
    dtype: str = "float32"

    def __post_init__(self):
        if self.dtype not in DTYPES:
            raise ShapeError(f"unsupported dtype {self.dtype!r}; expected one of {DTYPES}")
        if any((not isinstance(n, int)) or n <= 0 for n in self.shape):
            raise ShapeError(f"dimensions must be positive integers, got {self.shape}")
        if self.size > MAX_ELEMENTS:
            raise ShapeError(f"shape {self.shape} has {self.size} elements, more than "
                             f"{MAX_ELEMENTS}")

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        size = 1
        for n in self.shape:
            size *= n
        return size

    @property
    def itemsize(self) -> int:
        return 1 if self.dtype == "bool" else int(self.dtype[-2:]) // 8

    @property
    def nbytes(self) -> int:
        return self.size * self.itemsize


@dataclass(frozen=True)
class WeightSpec:
    """A trainable tensor an operator owns.

    `role` picks the default initializer ("kernel": Glorot uniform over fan_in/fan_out, "bias":
    zeros, "scale": ones, "embedding": Glorot uniform); `fan_in`/`fan_out` feed Glorot.
    """

    name: str
    shape: tuple[int, ...]
    role: str
    fan_in: int = 1
    fan_out: int = 1
    dtype: str = "float32"

    @property
    def spec(self) -> TensorSpec:
        return TensorSpec(self.shape, self.dtype)
