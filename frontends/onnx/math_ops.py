"""Element-wise ONNX operators and reductions.

ONNX operators FFModel has no layer for are composed exactly from layers it has:
Sqrt = pow(x, 0.5), Reciprocal = pow(x, -1), LeakyRelu = max(x, alpha * x) (min when alpha > 1),
Elu with alpha != 1 = relu(x) + alpha * min(elu(x), 0) (as -alpha * relu(-elu(x))),
Gelu's tanh form written out, Clip = min(max(x, lo), hi), ReduceSum = count * mean,
ReduceMax = a max pool spanning the reduced dims (`compose.reduce_max`), ReduceMin = -ReduceMax(-x).
"""

from __future__ import annotations

import math

import numpy as np

from flexflow.core import DataType, Tensor

from .compose import arith, computes_in_float32, in_float64, reduce_max
from .registry import handles, one_of
from .values import Const, const_ints, scalar_of

_UNARY = {"Relu": "relu", "Sigmoid": "sigmoid", "Tanh": "tanh", "Exp": "exp", "Erf": "erf",
          "Log": "log"}
_POWER = {"Sqrt": 0.5, "Reciprocal": -1.0}


@handles("Add", "Sub", "Mul", "Div")
def binary(cv, node, xs):
    return [arith(cv, node, node.op_type, xs[0], xs[1])]


@handles("Sum")
def variadic_sum(cv, node, xs):
    total = xs[0]
    for x in xs[1:]:
        total = arith(cv, node, "Add", total, x)
    return [cv.tensor(total, node)]


@handles("Max", "Min")
def extreme(cv, node, xs):
    """The element-wise maximum (minimum) of any number of broadcast operands."""
    pick = cv.ffmodel.max if node.op_type == "Max" else cv.ffmodel.min
    result = cv.tensor(xs[0], node)
    for x in xs[1:]:
        result = pick(result, cv.tensor(x, node), name=node.name)
    return [result]


@handles(*_UNARY)
def unary(cv, node, xs):
    return [getattr(cv.ffmodel, _UNARY[node.op_type])(cv.tensor(xs[0], node), name=node.name)]


@handles(*_POWER)
def power_of(cv, node, xs):
    return [cv.ffmodel.pow(cv.tensor(xs[0], node), _POWER[node.op_type], name=node.name)]


@handles("Pow")
def pow_(cv, node, xs):
    x, exponent = xs
    if not computes_in_float32(x, exponent):
        return [in_float64(cv, node, lambda a, e: cv.ffmodel.pow(a, e, name=node.name), xs)]
    s = scalar_of(exponent, len(x.dims) if isinstance(x, Tensor) else 0)
    if isinstance(x, Tensor) and s is not None:
        return [cv.ffmodel.pow(cv.tensor(x, node), s, name=node.name)]
    return [cv.ffmodel.pow(cv.tensor(x, node), cv.tensor(exponent, node), name=node.name)]


@handles("Neg")
def neg(cv, node, xs):
    if not computes_in_float32(xs[0]):
        return [in_float64(cv, node, lambda x: cv.ffmodel.scalar_multiply(x, -1.0,
                                                                           name=node.name), xs)]
    return [cv.ffmodel.scalar_multiply(cv.tensor(xs[0], node), -1.0, name=node.name)]


@handles("Identity")
def identity(cv, node, xs):
    return [xs[0]]


@handles("Elu")
def elu(cv, node, xs):
    ff, alpha = cv.ffmodel, float(node.attr("alpha", 1.0))
    x = cv.tensor(xs[0], node)
    y = ff.elu(x, name=node.name)
    if alpha == 1.0:
        return [y]
    # elu(x) is x above 0 and expm1(x) below: scale only its negative part
    negative_part = ff.relu(ff.scalar_multiply(y, -1.0, name=node.name), name=node.name)
    scaled = ff.scalar_multiply(negative_part, -alpha, name=node.name)
    return [ff.add(ff.relu(x, name=node.name), scaled, name=node.name)]


@handles("LeakyRelu")
def leaky_relu(cv, node, xs):
    ff, alpha = cv.ffmodel, float(node.attr("alpha", 0.01))
    x = cv.tensor(xs[0], node)
    scaled = ff.scalar_multiply(x, alpha, name=node.name)
    pick = ff.max if alpha <= 1.0 else ff.min
    return [pick(x, scaled, name=node.name)]


@handles("Gelu", limits={"approximate": one_of("none", "tanh")})
def gelu(cv, node, xs):
    ff, x = cv.ffmodel, cv.tensor(xs[0], node)
    if node.attr("approximate", "none") == "none":
        return [ff.gelu(x, name=node.name)]
    # 0.5 * x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x^3)))
    cubic = ff.scalar_multiply(ff.pow(x, 3.0, name=node.name), 0.044715, name=node.name)
    inner = ff.scalar_multiply(ff.add(x, cubic, name=node.name), math.sqrt(2.0 / math.pi),
                               name=node.name)
    gate = ff.scalar_add(ff.tanh(inner, name=node.name), 1.0, name=node.name)
    return [ff.scalar_multiply(ff.multiply(x, gate, name=node.name), 0.5, name=node.name)]


@handles("Clip")
def clip(cv, node, xs):
    ff, x = cv.ffmodel, cv.tensor(xs[0], node)
    bounds = [node.attr("min"), node.attr("max")]  # attributes before opset 11, inputs after
    for k, bound in enumerate(xs[1:3]):
        if bound is not None:
            bounds[k] = bound
    low, high = bounds
    y = x
    for bound, pick in ((low, ff.max), (high, ff.min)):
        if bound is None:
            continue
        if isinstance(bound, Tensor):
            operand = cv.tensor(bound, node)
        else:
            value = bound.value if isinstance(bound, Const) else bound
            operand = ff.create_constant((1,) * x.num_dims, float(np.asarray(value).reshape(())),
                                         DataType.DT_FLOAT)
        y = pick(y, operand, name=node.name)
    return [y]


def _reduced_axes(node, xs, rank: int) -> list[int] | None:
    """The axes a Reduce* node reduces, sorted (None: none, the node is the identity), from
    its axes attribute (before opset 18) or input."""
    axes = node.ints("axes")
    if axes is None and len(xs) > 1:
        axes = const_ints(xs[1], node, "the axes input")
    if not axes:
        return None if node.attr("noop_with_empty_axes", 0) else list(range(rank))
    return sorted({a % rank for a in axes})


def _reduce(cv, node, xs, build):
    """A Reduce* node: `build(x, axes, keepdims)` on its input, the identity without axes, a
    held 0-d value when every dim goes."""
    x = cv.tensor(xs[0], node)
    axes = _reduced_axes(node, xs, x.num_dims)
    if axes is None:
        return [x]
    keepdims = bool(node.attr("keepdims", 1))
    if not keepdims and len(axes) == x.num_dims:
        return [cv.as_0d(build(x, axes, True), node)]
    return [build(x, axes, keepdims)]


@handles("ReduceMean", "ReduceSum")
def reduce_mean_or_sum(cv, node, xs):
    ff = cv.ffmodel

    def build(x, axes, keepdims):
        y = ff.mean(x, axes, keepdims, name=node.name)
        if node.op_type == "ReduceMean":
            return y
        count = int(np.prod([x.dims[a] for a in axes]))
        return ff.scalar_multiply(y, float(count), name=node.name)
    return _reduce(cv, node, xs, build)


@handles("ReduceMax", "ReduceMin")
def reduce_max_or_min(cv, node, xs):
    """ReduceMin(x) = -ReduceMax(-x), exactly."""
    ff, is_max = cv.ffmodel, node.op_type == "ReduceMax"

    def build(x, axes, keepdims):
        if is_max:
            return reduce_max(cv, node, x, axes, keepdims)
        negated = ff.scalar_multiply(x, -1.0, name=node.name)
        return ff.scalar_multiply(reduce_max(cv, node, negated, axes, keepdims), -1.0,
                                  name=node.name)
    return _reduce(cv, node, xs, build)
