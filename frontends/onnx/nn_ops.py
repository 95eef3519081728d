"""Neural-network ONNX operators: matrix products, convolution, pooling, normalisation, softmax,
dropout.

Weights given as constants (initializers, or values folded from them) become the weights of the
FFModel layer (dense, conv2d, batch_norm, layer_norm, embedding); a 1-d convolution or pooling
runs as its 2-d form over a height of 1, and a normalisation over other ranks through a reshape to
NCHW. Compositions, all exact: LRN = x * (bias + alpha * avg_pool(x^2 over channels))^-beta;
BatchNormalization in training mode whose running statistics are read = the batch statistics
written out; LayerNormalization's Mean/InvStdDev outputs likewise; InstanceNormalization and
GroupNormalization = the standardisation written out (over the spatial dims, or over each group
of channels reshaped to one dim) times the scale plus the bias, as tensors along the channels
(or, before opset 21, the groups), trainable where they are parameters (parameters.py).
"""

from __future__ import annotations

import numpy as np

from flexflow.core import DataType, PoolType, Tensor

from .compose import arith, matmul, reduce_max
from .registry import AUTO_PAD, handles, one_of
from .values import Const, const_float, require_const
from .windows import Window, argmax_by_taps, conv_by_taps, pool_by_taps


# ---- matrix products ----------------------------------------------------------------------------
def dense(cv, node, x: Tensor, kernel: np.ndarray, bias: np.ndarray | None) -> Tensor:
    """x @ kernel.T + bias over the last dim, kernel (out, in) as FlexFlow lays it out."""
    vector = x.num_dims == 1
    if vector:
        x = cv.reshape(x, (1,) + tuple(x.dims), node)
    y = cv.ffmodel.dense(x, kernel.shape[0], use_bias=bias is not None, name=node.name)
    cv.load(y, [kernel] if bias is None else [kernel, bias])
    return cv.reshape(y, (kernel.shape[0],), node) if vector else y


@handles("MatMul")
def matmul_(cv, node, xs):
    a, b = xs
    if isinstance(a, Tensor) and isinstance(b, Const) and b.value.ndim == 2:
        return [dense(cv, node, cv.tensor(a, node), b.value.T, None)]
    return [matmul(cv, node, a, b)]


@handles("Gemm")
def gemm(cv, node, xs):
    """alpha * A' @ B' + beta * C; with B a constant, a dense layer (C folded into its bias
    when it is a row vector and alpha == 1)."""
    a, b, c = (xs + [None])[:3]
    alpha, beta = float(node.attr("alpha", 1.0)), float(node.attr("beta", 1.0))
    if node.attr("transA", 0):
        a = _transposed(cv, node, a)
    if isinstance(a, Tensor) and isinstance(b, Const):
        kernel = b.value if node.attr("transB", 0) else b.value.T
        bias = _row(c, kernel.shape[0]) if alpha == 1.0 else None
        y = dense(cv, node, cv.tensor(a, node), kernel, None if bias is None else beta * bias)
        if bias is not None:
            return [y]
    else:
        b = _transposed(cv, node, b) if node.attr("transB", 0) else b
        y = matmul(cv, node, a, b)
    if alpha != 1.0:
        y = cv.ffmodel.scalar_multiply(y, alpha, name=node.name)
    if c is None:
        return [y]
    if isinstance(c, Const):
        c = Const(beta * c.value, c.trainable)
    elif beta != 1.0:
        c = cv.ffmodel.scalar_multiply(c, beta, name=node.name)
    return [arith(cv, node, "Add", y, c)]


def _transposed(cv, node, x):
    if isinstance(x, Const):
        return Const(x.value.T, x.trainable)
    return cv.ffmodel.transpose(cv.tensor(x, node), (1, 0), name=node.name)


def _row(c, n: int) -> np.ndarray | None:
    """C as a (n,) bias when it broadcasts to every row of the (m, n) product, else None."""
    if not isinstance(c, Const) or c.value.size not in (1, n) or (
            c.value.ndim == 2 and c.value.shape[0] != 1) or c.value.ndim > 2:
        return None
    return np.broadcast_to(c.value.reshape(-1), (n,))


# ---- convolution and pooling --------------------------------------------------------------------
def _as_2d(cv, node, x: Tensor) -> tuple[Tensor, bool]:
    """x as NCHW: an NCL tensor gets a height of 1. Returns (tensor, was it 1-d)."""
    if x.num_dims == 3:
        return cv.reshape(x, tuple(x.dims[:2]) + (1, x.dims[2]), node), True
    return x, False


def _from_2d(cv, node, y: Tensor, one_d: bool) -> Tensor:
    return cv.reshape(y, tuple(y.dims[:2]) + (y.dims[3],), node) if one_d else y


def _lift(values, fill):
    """A per-spatial-dim list for a 1-d window lifted to 2-d (height 1)."""
    return [fill] + list(values) if len(values) == 1 else list(values)


def _spatial(node, x: Tensor) -> None:
    if x.num_dims < 3:
        raise node.error(f"the input must be (N, C, spatial...), got shape {tuple(x.dims)}")


@handles("Conv", limits={"auto_pad": AUTO_PAD})
def conv(cv, node, xs):
    x = cv.tensor(xs[0], node)
    _spatial(node, x)
    weight = require_const(xs[1], node, "the weight W")
    bias = None if len(xs) < 3 or xs[2] is None else require_const(xs[2], node, "the bias B")
    window = Window.of(node, x.dims[2:], weight.shape[2:])
    groups = int(node.attr("group", 1))
    if not window.plain:
        return [conv_by_taps(cv, node, x, weight, bias, window, groups)]
    x4, one_d = _as_2d(cv, node, x)
    kernel, strides = _lift(window.kernel, 1), _lift(window.strides, 1)
    pads = _lift(window.pads, (0, 0))
    weight4 = weight.reshape(weight.shape[:2] + tuple(kernel))
    y = cv.ffmodel.conv2d(x4, weight.shape[0], kernel[0], kernel[1], strides[0], strides[1],
                          pads[0], pads[1], groups=groups, use_bias=bias is not None,
                          name=node.name)
    cv.load(y, [weight4] if bias is None else [weight4, bias])
    return [_from_2d(cv, node, y, one_d)]


@handles("MaxPool", "AveragePool",
         limits={"auto_pad": AUTO_PAD, "storage_order": one_of(0, 1)})
def pool(cv, node, xs):
    x = cv.tensor(xs[0], node)
    _spatial(node, x)
    window = Window.of(node, x.dims[2:], node.ints("kernel_shape"),
                       bool(node.attr("ceil_mode", 0)))
    y = _pool(cv, node, x, window)
    if not node.wanted(1):  # MaxPool's Indices
        return [y]
    column_major = bool(node.attr("storage_order", 0))
    return [y, argmax_by_taps(cv, node, x, window, y, column_major)]


def _pool(cv, node, x: Tensor, window: Window) -> Tensor:
    is_max = node.op_type == "MaxPool"
    include_pad = bool(node.attr("count_include_pad", 0))
    past_padding = any(r[1] > p[1] for r, p in zip(window.reach, window.pads))
    if not window.plain or (include_pad and not is_max and past_padding):
        # pool2d would count the ceil_mode overhang as padding
        return pool_by_taps(cv, node, x, window, is_max, include_pad)
    x4, one_d = _as_2d(cv, node, x)
    kernel, strides = _lift(window.kernel, 1), _lift(window.strides, 1)
    pads = _lift([(before, max(after, reach)) for (before, after), (_, reach)
                  in zip(window.pads, window.reach)], (0, 0))
    y = cv.ffmodel.pool2d(x4, kernel[0], kernel[1], strides[0], strides[1], pads[0], pads[1],
                          PoolType.POOL_MAX if is_max else PoolType.POOL_AVG, name=node.name,
                          count_include_pad=include_pad)
    return _from_2d(cv, node, y, one_d)


@handles("GlobalAveragePool")
def global_average_pool(cv, node, xs):
    x = cv.tensor(xs[0], node)
    return [cv.ffmodel.mean(x, list(range(2, x.num_dims)), True, name=node.name)]


@handles("GlobalMaxPool")
def global_max_pool(cv, node, xs):
    x = cv.tensor(xs[0], node)
    return [reduce_max(cv, node, x, list(range(2, x.num_dims)), True)]


@handles("LRN")
def lrn(cv, node, xs):
    """y = x / (bias + alpha / size * sum of x^2 over a window of `size` channels)^beta; the
    window sum is size * an average pool over the channels (count_include_pad)."""
    ff, x = cv.ffmodel, cv.tensor(xs[0], node)
    size = int(node.attr("size"))
    alpha, beta = float(node.attr("alpha", 1e-4)), float(node.attr("beta", 0.75))
    bias = float(node.attr("bias", 1.0))
    n, c = x.dims[:2]
    area = int(np.prod(x.dims[2:]))
    squares = cv.reshape(ff.multiply(x, x, name=node.name), (n, 1, c, area), node)
    before = (size - 1) // 2
    mean = ff.pool2d(squares, size, 1, 1, 1, (before, size - 1 - before), 0, PoolType.POOL_AVG,
                     name=node.name, count_include_pad=True)
    base = ff.scalar_add(ff.scalar_multiply(mean, alpha, name=node.name), bias, name=node.name)
    scale = cv.reshape(ff.pow(base, -beta, name=node.name), tuple(x.dims), node)
    return [ff.multiply(x, scale, name=node.name)]


# ---- normalisation ------------------------------------------------------------------------------
@handles("BatchNormalization", limits={"spatial": one_of(1)})
def batch_norm(cv, node, xs):
    x = cv.tensor(xs[0], node)
    scale, bias, mean, var = (require_const(v, node, what) for v, what in
                              zip(xs[1:5], ("scale", "B", "input_mean", "input_var")))
    eps, momentum = float(node.attr("epsilon", 1e-5)), float(node.attr("momentum", 0.9))
    if x.num_dims < 2:
        raise node.error(f"the input must be at least 2-d (N, C, ...), got {tuple(x.dims)}")
    if node.attr("training_mode", 0) and (node.wanted(1) or node.wanted(2)):
        return _batch_norm_statistics(cv, node, x, scale, bias, mean, var, eps, momentum)
    n, c = x.dims[:2]
    x4 = x if x.num_dims == 4 else cv.reshape(x, (n, c, int(np.prod(x.dims[2:])), 1), node)
    # ONNX's momentum keeps that much of the running value; FlexFlow's (PyTorch's) is 1 - that
    y = cv.ffmodel.batch_norm(x4, relu=False, name=node.name, eps=eps, momentum=1.0 - momentum)
    cv.load(y, [scale, bias, mean, var])
    return [cv.reshape(y, tuple(x.dims), node)]


def _batch_norm_statistics(cv, node, x, scale, bias, mean, var, eps, momentum):
    """Training mode with its running statistics as outputs: normalise with the batch's mean
    and (biased) variance and return the updated running mean and variance."""
    ff = cv.ffmodel
    axes = [0] + list(range(2, x.num_dims))
    y, batch_mean, batch_var, _ = _standardised(cv, node, x, axes, eps)
    y = _affine(cv, node, y, Const(scale, True), Const(bias, True))
    running = []
    for statistic, previous in ((batch_mean, mean), (batch_var, var)):
        flat = cv.reshape(statistic, (x.dims[1],), node)
        kept = ff.scalar_multiply(flat, 1.0 - momentum, name=node.name)
        running.append(arith(cv, node, "Add", kept, Const(momentum * previous)))
    return [y] + running


@handles("LayerNormalization")
def layer_norm(cv, node, xs):
    x = cv.tensor(xs[0], node)
    rank = x.num_dims
    axis = int(node.attr("axis", -1)) % rank
    eps = float(node.attr("epsilon", 1e-5))
    normalised = tuple(x.dims[axis:])
    gamma = np.broadcast_to(require_const(xs[1], node, "the Scale input"), normalised)
    beta = (np.zeros(normalised, np.float32) if len(xs) < 3 or xs[2] is None else
            np.broadcast_to(require_const(xs[2], node, "the B input"), normalised))
    axes = list(range(axis, rank))
    y = cv.ffmodel.layer_norm(x, axes, True, eps, name=node.name)
    cv.load(y, [gamma, beta])
    if not (node.wanted(1) or node.wanted(2)):
        return [y]
    _, mean, _, inv_std = _standardised(cv, node, x, axes, eps)
    return [y, mean, inv_std]


@handles("InstanceNormalization")
def instance_norm(cv, node, xs):
    """Each sample's channel standardised over its spatial dims, then scaled and shifted per
    channel (torch's exporters write GroupNorm as one over the channels grouped)."""
    x = cv.tensor(xs[0], node)
    _spatial(node, x)
    y = _standardised(cv, node, x, list(range(2, x.num_dims)),
                      float(node.attr("epsilon", 1e-5)))[0]
    return [_affine(cv, node, y, *(_operand(v, node, what) for v, what in
                                   zip(xs[1:3], ("the scale", "the B input"))))]


@handles("GroupNormalization")
def group_norm(cv, node, xs):
    """Each sample's channels standardised in `num_groups` groups (over the group's channels
    and the spatial dims), then scaled and shifted: per group before opset 21, per channel
    from it."""
    x = cv.tensor(xs[0], node)
    groups = int(node.attr("num_groups"))
    if x.num_dims < 2 or groups < 1 or x.dims[1] % groups:
        raise node.error(f"num_groups={groups} must divide the channels of an (N, C, ...) "
                         f"input, got shape {tuple(x.dims)}")
    n = x.dims[0]
    grouped = cv.reshape(x, (n, groups, int(np.prod(x.dims[1:])) // groups), node)
    y = _standardised(cv, node, grouped, [2], float(node.attr("epsilon", 1e-5)))[0]
    scale, bias = (_operand(v, node, what) for v, what in zip(xs[1:3], ("scale", "bias")))
    if node.opset < 21:
        return [cv.reshape(_affine(cv, node, y, scale, bias), tuple(x.dims), node)]
    return [_affine(cv, node, cv.reshape(y, tuple(x.dims), node), scale, bias)]


def _operand(value, node, what: str) -> Const:
    """The constant `value` itself (its `trainable` with it), else an error naming `what`."""
    require_const(value, node, what)
    return value


def _standardised(cv, node, x: Tensor, axes, eps: float):
    """((x - mean) / sqrt(var + eps), mean, var, 1 / sqrt(var + eps)) over `axes`, with the
    biased variance, as every normalisation computes it."""
    ff = cv.ffmodel
    mean = ff.mean(x, axes, True, name=node.name)
    centred = ff.subtract(x, mean, name=node.name)
    var = ff.mean(ff.multiply(centred, centred, name=node.name), axes, True, name=node.name)
    inv_std = ff.rsqrt(ff.scalar_add(var, eps, name=node.name), name=node.name)
    return ff.multiply(centred, inv_std, name=node.name), mean, var, inv_std


def _affine(cv, node, y: Tensor, scale: Const, bias: Const) -> Tensor:
    """y * scale + bias, both vectors along dim 1 of y."""
    channel = (1, y.dims[1]) + (1,) * (y.num_dims - 2)
    if scale.value.size != y.dims[1] or bias.value.size != y.dims[1]:
        raise node.error(f"the scale and bias must have {y.dims[1]} elements, got "
                         f"{scale.value.size} and {bias.value.size}")
    y = arith(cv, node, "Mul", y, Const(scale.value.reshape(channel), scale.trainable))
    return arith(cv, node, "Add", y, Const(bias.value.reshape(channel), bias.trainable))


# ---- softmax and dropout ------------------------------------------------------------------------
@handles("Softmax", "LogSoftmax")
def softmax(cv, node, xs):
    """Opset 13 normalises along `axis` (default -1); earlier opsets over all dims from `axis`
    on (default 1), i.e. along the last dim of the input flattened to 2-d there."""
    x = cv.tensor(xs[0], node)
    build = cv.ffmodel.softmax if node.op_type == "Softmax" else cv.ffmodel.log_softmax
    rank = x.num_dims
    axis = int(node.attr("axis", -1 if node.opset >= 13 else 1)) % rank
    if node.opset >= 13 or axis == rank - 1:
        return [build(x, axis, name=node.name)]
    flat = cv.reshape(x, (int(np.prod(x.dims[:axis])), int(np.prod(x.dims[axis:]))), node)
    return [cv.reshape(build(flat, -1, name=node.name), tuple(x.dims), node)]


@handles("Dropout")
def dropout(cv, node, xs):
    """FlexFlow's dropout: active when the model trains, the identity in inference. (ONNX's
    training_mode input is the exporter's mode; FlexFlow's own mode decides here.) When the
    mask is read too, the dropout is applied to ones: that gives each element's factor (0, or
    1 / (1 - ratio) where kept), so x * factor is the dropout of x and factor > 0 its mask, in
    training and inference alike."""
    ff, x = cv.ffmodel, cv.tensor(xs[0], node)
    ratio = node.attr("ratio", 0.5)
    if len(xs) > 1 and xs[1] is not None:
        ratio = const_float(xs[1], node, "the ratio input", 0.5)
    if not node.wanted(1):
        return [ff.dropout(x, float(ratio), 0, name=node.name)]
    ones = ff.create_constant(x.dims, 1.0, DataType.DT_FLOAT)
    factor = ff.dropout(ones, float(ratio), 0, name=node.name)
    zero = ff.create_constant((1,), 0.0, DataType.DT_FLOAT)
    return [ff.multiply(x, factor, name=node.name),
            ff.compare(factor, zero, "greater", name=node.name)]
