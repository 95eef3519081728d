"""FlexFlow's default values for operands without values (unvalued.py), as a node is built.

`resolve` replaces each `Unvalued` input of a node with a constant: a kernel (Conv's W, Gemm's
and MatMul's B) drawn by FlexFlow's default Glorot-uniform initializer (seeded by the weight's
name, so runs repeat), a bias zeros, batch norm's scale and variance ones and its bias and mean
zeros, layer norm's scale ones and bias zeros; they are trainable as initializers are. Their
shapes follow the layer being built: the input channels and features from its input tensor,
the kernel from `kernel_shape`, the output width from the first of: the weight's declared dims,
its bias's, the node output's declared dims. A Reshape's target shape is the output's declared
dims (its batch dim and its last dim following the input where those no longer fit). When a
shape cannot be known the error names the node and the operand.
"""

from __future__ import annotations

import math
import zlib

import numpy as np

from flexflow.initializers import GlorotUniformInitializer
from flexflow.ops.spec import WeightSpec

from .fold_limits import MAX_FOLDED_BYTES
from .node import Node
from .unvalued import Unvalued
from .values import Const, shape


def resolve(cv, node: Node, inputs: list) -> list:
    """`inputs` with every Unvalued one replaced by its default constant."""
    if not any(isinstance(x, Unvalued) for x in inputs):
        return inputs
    return RULES[node.op_type](cv, node, list(inputs))


# ---- values -------------------------------------------------------------------------------------
def _checked(node: Node, name: str, dims) -> tuple[int, ...]:
    """`dims` of a default weight, refused when a file's declared dims make it absurd."""
    dims = tuple(int(d) for d in dims)
    if any(d <= 0 for d in dims) or math.prod(dims) * 4 > MAX_FOLDED_BYTES:
        raise node.error(f"the default value of '{name}' would have shape {dims}: a dim below 1 "
                         f"or more than {MAX_FOLDED_BYTES} bytes of float32")
    return dims


def _glorot(node: Node, name: str, dims, fan_in: int, fan_out: int) -> Const:
    spec = WeightSpec(name=name, shape=_checked(node, name, dims), initializer="glorot_uniform",
                      fan_in=max(fan_in, 1), fan_out=max(fan_out, 1))
    return Const(GlorotUniformInitializer(zlib.crc32(name.encode()))(spec), True, name)


def _filled(node: Node, name: str, dims, value: float) -> Const:
    return Const(np.full(_checked(node, name, dims), value, np.float32), True, name)


def _fill(inputs: list, index: int, make) -> None:
    if index < len(inputs) and isinstance(inputs[index], Unvalued):
        inputs[index] = make(inputs[index].name)


def _width(cv, node: Node, inputs: list, sources) -> int:
    """The layer's output width: the first known dim among `sources`, (input index or None for
    the node's output, axis) pairs, read from a constant's shape or from declared dims."""
    for index, axis in sources:
        if index is None:
            dims = cv.info.declared.get(node.outputs[0])
        elif index >= len(inputs) or inputs[index] is None:
            continue
        else:
            value = inputs[index]
            dims = value.dims if isinstance(value, Unvalued) else shape(value)
        if dims and -len(dims) <= axis < len(dims) and dims[axis]:
            return int(dims[axis])
    missing = next(x.name for x in inputs if isinstance(x, Unvalued))
    raise node.error(f"'{missing}' has no value (the file was exported without parameters) and "
                     f"no declared shape, nor does the node's output: the layer's width cannot "
                     f"be known")


# ---- per operator -------------------------------------------------------------------------------
def _conv(cv, node, inputs):
    channels = shape(inputs[0])[1]
    groups = int(node.attr("group", 1))
    out = _width(cv, node, inputs, ((1, 0), (2, 0), (None, 1)))
    declared = inputs[1].dims if isinstance(inputs[1], Unvalued) else shape(inputs[1])
    kernel = node.ints("kernel_shape") or (declared[2:] if declared and all(declared) else None)
    if not kernel:
        raise node.error(f"'{inputs[1].name}' has no value and the node no kernel_shape: the "
                         f"kernel's size cannot be known")
    area = int(np.prod(kernel))
    _fill(inputs, 1, lambda name: _glorot(node, name, (out, channels // groups, *kernel),
                                          channels // groups * area, out * area))
    _fill(inputs, 2, lambda name: _filled(node, name, (out,), 0.0))
    return inputs


def _gemm(cv, node, inputs):
    a = shape(inputs[0])
    features = a[0] if node.attr("transA", 0) else a[-1]
    trans_b = bool(node.attr("transB", 0))
    out = _width(cv, node, inputs, ((1, 0 if trans_b else 1), (2, -1), (None, -1)))
    dims = (out, features) if trans_b else (features, out)
    _fill(inputs, 1, lambda name: _glorot(node, name, dims, features, out))
    _fill(inputs, 2, lambda name: _filled(node, name, (out,), 0.0))
    return inputs


def _matmul(cv, node, inputs):
    features = shape(inputs[0])[-1]
    out = _width(cv, node, inputs, ((1, -1), (None, -1)))
    _fill(inputs, 1, lambda name: _glorot(node, name, (features, out), features, out))
    return inputs


def _batch_norm(cv, node, inputs):
    channels = (shape(inputs[0])[1],)
    for index, value in ((1, 1.0), (2, 0.0), (3, 0.0), (4, 1.0)):
        _fill(inputs, index, lambda name, value=value: _filled(node, name, channels, value))
    return inputs


def _layer_norm(cv, node, inputs):
    dims = shape(inputs[0])
    normalised = dims[int(node.attr("axis", -1)) % len(dims):]
    _fill(inputs, 1, lambda name: _filled(node, name, normalised, 1.0))
    _fill(inputs, 2, lambda name: _filled(node, name, normalised, 0.0))
    return inputs


def _reshape(cv, node, inputs):
    target = cv.info.declared.get(node.outputs[0])
    if not target or not all(target):
        raise node.error(f"its shape '{inputs[1].name}' has no value (the file was exported "
                         f"without parameters) and the output declares no static shape")
    dims = shape(inputs[0])
    before = cv.info.declared.get(node.inputs[0])
    target = list(target)
    if int(np.prod(target)) != int(np.prod(dims)):
        if before and before[0] == target[0]:  # the batch dim was kept: it follows the input
            target[0] = dims[0]
        if int(np.prod(target)) != int(np.prod(dims)):
            target[-1] = -1  # the export's last dim was the rest (a flatten)
    inputs[1] = Const(np.array(target, np.int64), False, inputs[1].name)
    return inputs


RULES = {"Conv": _conv, "Gemm": _gemm, "MatMul": _matmul, "BatchNormalization": _batch_norm,
         "LayerNormalization": _layer_norm, "Reshape": _reshape}
