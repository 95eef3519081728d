"""Value types that describe tensors and weights without holding data."""

from __future__ import annotations

import math

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
        return math.prod(self.shape)

    @property
    def itemsize(self) -> int:
        return 1 if self.dtype == "bool" else int(self.dtype[-2:]) // 8

    @property
    def nbytes(self) -> int:
        return self.size * self.itemsize


INITIALIZERS = ("glorot_uniform", "zeros", "ones")  # the defaults a weight may name


@dataclass(frozen=True, kw_only=True)
class WeightSpec:
    """A tensor an operator owns, declared by keyword as Keras's `add_weight` declares one.

    `initializer`: the default when the model gives none (one of `INITIALIZERS`; Glorot draws
    over `fan_in`/`fan_out`). `trainable`: the optimizer updates it; a buffer (batch norm's
    running statistics) or a constant gets no update task and no optimizer state, and the
    simulator charges it neither.
    """

    name: str
    shape: tuple[int, ...]
    initializer: str = "zeros"
    trainable: bool = True
    fan_in: int = 1
    fan_out: int = 1
    dtype: str = "float32"

    def __post_init__(self):
        if self.initializer not in INITIALIZERS:
            raise ValueError(f"weight {self.name!r}: unknown default initializer "
                             f"{self.initializer!r}; expected one of {INITIALIZERS}")

    @property
    def spec(self) -> TensorSpec:
        return TensorSpec(self.shape, self.dtype)
