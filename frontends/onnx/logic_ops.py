"""ONNX operators on bool and integer tensors, and conversions between data types.

Comparisons (Less, Greater, Equal, ...) give bool tensors and Where chooses between two tensors
by one: exporters write clipping, leaky ReLU and ELU this way, and masked attention (a Softmax
whose fully masked rows, NaN, IsNaN and Where set to 0). FFModel has equality of bools and
Where, from which the rest is exact: Not a = (a == false), Xor = Not (a == b), And a b =
where(a, b, false), Or a b = where(a, true, b), IsNaN x = Not (x == x), IsInf x = (x == inf)
or (x == -inf). Cast converts between FlexFlow's
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


def _bool_constant(cv, node, value: bool):
    return cv.operand(Const(np.array([value])), node, DataType.DT_BOOLEAN)


def _not(cv, node, a):
    return cv.ffmodel.compare(a, _bool_constant(cv, node, False), "equal", name=node.name)


@handles("Not")
def not_(cv, node, xs):
    return [_not(cv, node, cv.operand(xs[0], node, DataType.DT_BOOLEAN))]


@handles("And", "Or", "Xor")
def logical(cv, node, xs):
    a, b = (cv.operand(x, node, DataType.DT_BOOLEAN) for x in xs)
    if node.op_type == "Xor":
        return [_not(cv, node, cv.ffmodel.compare(a, b, "equal", name=node.name))]
    if node.op_type == "And":
        return [cv.ffmodel.where(a, b, _bool_constant(cv, node, False), name=node.name)]
    return [cv.ffmodel.where(a, _bool_constant(cv, node, True), b, name=node.name)]


@handles("IsNaN")
def is_nan(cv, node, xs):
    x = cv.tensor(xs[0], node)
    return [_not(cv, node, cv.ffmodel.compare(x, x, "equal", name=node.name))]


@handles("IsInf")
def is_inf(cv, node, xs):
    x = cv.tensor(xs[0], node)
    signs = [s for s, wanted in ((1.0, node.attr("detect_positive", 1)),
                                 (-1.0, node.attr("detect_negative", 1))) if wanted]
    found = [cv.ffmodel.compare(x, cv.tensor(Const(np.array([s * np.inf], np.float32)), node),
                                "equal", name=node.name) for s in signs]
    if not found:
        return [cv.ffmodel.compare(x, x, "less", name=node.name)]  # never: false everywhere
    if len(found) == 1:
        return found
    return [cv.ffmodel.where(found[0], _bool_constant(cv, node, True), found[1],
                             name=node.name)]


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
