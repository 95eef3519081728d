"""ONNX operators on bool and integer tensors, and conversions between data types.

Comparisons (Less, Greater, Equal, ...) give bool tensors and Where chooses between two tensors
by one: exporters write clipping, leaky ReLU and ELU this way. Cast converts between FlexFlow's
data types (float32, float64, int32, int64, bool); a cast of a constant is evaluated at import,
whatever the type.
"""

from __future__ import annotations

import numpy as np
from onnx import helper

from flexflow.core import DataType
from flexflow.type import NUMPY_DTYPE

from .registry import handles
from .values import Const, common_type, flexflow_type

_COMPARISONS = {"Less": "less", "LessOrEqual": "less_equal", "Greater": "greater",
                "GreaterOrEqual": "greater_equal", "Equal": "equal"}


@handles(*_COMPARISONS)
def compare(cv, node, xs):
    data_type = common_type(xs, node)
    a, b = (cv.operand(x, node, data_type) for x in xs)
    return [cv.ffmodel.compare(a, b, _COMPARISONS[node.op_type], name=node.name)]


@handles("Where")
def where(cv, node, xs):
    cond = cv.operand(xs[0], node, DataType.DT_BOOLEAN)
    data_type = common_type(xs[1:], node)
    a, b = (cv.operand(x, node, data_type) for x in xs[1:])
    return [cv.ffmodel.where(cond, a, b, name=node.name)]


@handles("Cast", "CastLike")
def cast(cv, node, xs):
    x = xs[0]
    if node.op_type == "Cast":
        target = np.dtype(helper.tensor_dtype_to_np_dtype(int(node.attr("to"))))
    else:
        like = xs[1]
        target = like.value.dtype if isinstance(like, Const) else np.dtype(
            NUMPY_DTYPE[like.data_type])
    if isinstance(x, Const):
        return [Const(x.value.astype(target), x.trainable and target.kind == "f")]
    data_type = flexflow_type(target, node, "the target type")
    if data_type == x.data_type:
        return [x]
    return [cv.ffmodel.cast(x, data_type, name=node.name)]
