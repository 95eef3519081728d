"""What an ONNX value name stands for during import: an FFModel `Tensor`, or a `Const`.

Constants are initializers, `Constant` nodes, shapes, and everything computed from constants
only (folded at import). They stay numpy arrays until an operator needs them as a tensor operand;
operators that own weights (Gemm, Conv, BatchNormalization, ...) take them as their weights.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from flexflow.core import DataType, Tensor
from flexflow.type import DATA_TYPE

from .node import Node


@dataclass(frozen=True, eq=False)
class Const:
    value: np.ndarray
    trainable: bool = False   # an initializer (a parameter of the exported model) or made from one
    name: str | None = None   # the ONNX value holding exactly this array, if any

    def __post_init__(self):
        object.__setattr__(self, "value", np.asarray(self.value))

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.value.shape)


Value = Tensor | Const


def shape(value: Value) -> tuple[int, ...]:
    return value.shape if isinstance(value, Const) else tuple(value.dims)


# ---- data types ---------------------------------------------------------------------------------
def data_type_of(value: Value, node: Node) -> DataType:
    """The FlexFlow type a value computes in: a tensor's own; for a constant, float32 for any
    float (as every constant operand of a float operator) and its own type otherwise."""
    if isinstance(value, Tensor):
        return value.data_type
    if value.value.dtype.kind == "f":
        return DataType.DT_FLOAT
    return flexflow_type(value.value.dtype, node, "a constant input")


def flexflow_type(dtype, node: Node, what: str) -> DataType:
    name = str(np.dtype(dtype))
    if name not in DATA_TYPE:
        raise node.error(f"{what} is {name}, not one of FlexFlow's data types "
                         f"({', '.join(sorted(DATA_TYPE))})")
    return DATA_TYPE[name]


def common_type(values, node: Node) -> DataType:
    """The type of the tensors among `values` (the first one's), which constants take on."""
    tensors = [v for v in values if isinstance(v, Tensor)]
    return tensors[0].data_type if tensors else data_type_of(values[0], node)


# ---- reading constant operands ------------------------------------------------------------------
def scalar_of(value: Value, other_rank: int) -> float | None:
    """The number a constant holds when it acts as a scalar on a tensor of rank `other_rank`
    (one element, no more dims than the tensor, not a parameter); else None."""
    if (isinstance(value, Const) and value.value.size == 1 and not value.trainable
            and value.value.ndim <= other_rank and value.value.dtype.kind in "fiub"):
        return float(value.value.reshape(()))
    return None


def const_ints(value: Value | None, node: Node, what: str) -> tuple[int, ...] | None:
    """An integer list given as a constant input (None when the input is absent)."""
    if value is None:
        return None
    if not isinstance(value, Const):
        raise node.error(f"{what} must be a constant (an initializer or computed from "
                         f"constants), not a tensor computed by the model")
    return tuple(int(v) for v in value.value.reshape(-1))


def const_float(value: Value | None, node: Node, what: str, default: float) -> float:
    if value is None:
        return default
    if not isinstance(value, Const) or value.value.size != 1:
        raise node.error(f"{what} must be a constant scalar")
    return float(value.value.reshape(()))


def require_const(value: Value | None, node: Node, what: str) -> np.ndarray:
    if not isinstance(value, Const):
        raise node.error(f"{what} must be a constant (an initializer), not a tensor computed by "
                         f"the model")
    return value.value
