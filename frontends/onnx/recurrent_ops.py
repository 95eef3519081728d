"""ONNX's LSTM, unrolled over its (static) sequence into FFModel layers.

Each step computes the gates from the step's input and the previous hidden state, with ONNX's
default activations (sigmoid for the input, output and forget gates, tanh for the cell), in
ONNX's gate order i, o, f, c:

    g = x_t W^T + h R^T + Wb + Rb;  c = f * c + i * tanh(g_c);  h = o * tanh(c)

W, R and B become tensors once (weights, trainable where they are parameters, or whatever layers
computed them: torch's legacy exporter reorders the gates of its parameters with Slice and
Concat), so that every step reads the same weights. Wb and Rb stay two tensors, as torch's two
biases are. What is not supported (a reverse or bidirectional LSTM, peepholes, other
activations, clipping, coupled gates, sequence lengths shorter than the sequence) is refused
with the node named.
"""

from __future__ import annotations

import numpy as np

from flexflow.core import Tensor

from .compose import matmul
from .registry import handles, one_of
from .values import Const

DEFAULT_ACTIVATIONS = ("Sigmoid", "Tanh", "Tanh")


@handles("LSTM", limits={"direction": one_of("forward"), "input_forget": one_of(0),
                         "layout": one_of(0, 1),
                         "activations": ((lambda a: tuple(a) == DEFAULT_ACTIVATIONS),
                                         "Sigmoid, Tanh, Tanh")})
def lstm(cv, node, xs):
    xs = list(xs) + [None] * (8 - len(xs))
    x, w, r, b, lengths, h0, c0, peepholes = xs[:8]
    if peepholes is not None or node.attr("clip") is not None:
        raise node.error("peepholes (input P) and clip are not supported")
    batch_first = bool(node.attr("layout", 0))
    x = cv.tensor(x, node)
    steps, batch = (x.dims[1], x.dims[0]) if batch_first else x.dims[:2]
    _full_lengths(node, lengths, steps)
    hidden = int(node.attr("hidden_size"))
    w_t, r_t = (_transposed_weight(cv, node, v, 4 * hidden) for v in (w, r))
    biases = _biases(cv, node, b, hidden)
    h, c = (_initial(cv, node, v, batch, hidden) for v in (h0, c0))
    inputs = cv.ffmodel.split(x, steps, 1 if batch_first else 0, name=node.name)
    outputs = []
    for x_t in inputs:
        x_t = cv.reshape(x_t, (batch, x.dims[2]), node)
        h, c = _step(cv, node, x_t, h, c, w_t, r_t, biases, hidden)
        outputs.append(h)
    return _outputs(cv, node, outputs, h, c, batch_first)


def _step(cv, node, x_t, h, c, w_t, r_t, biases, hidden):
    ff = cv.ffmodel
    gates = ff.add(matmul(cv, node, x_t, w_t), matmul(cv, node, h, r_t), name=node.name)
    for bias in biases:
        gates = ff.add(gates, bias, name=node.name)
    i, o, f, g = ff.split(gates, 4, 1, name=node.name)
    i, o, f = (ff.sigmoid(v, name=node.name) for v in (i, o, f))
    c = ff.add(ff.multiply(f, c, name=node.name),
               ff.multiply(i, ff.tanh(g, name=node.name), name=node.name), name=node.name)
    return ff.multiply(o, ff.tanh(c, name=node.name), name=node.name), c


def _transposed_weight(cv, node, value, rows: int) -> Tensor:
    """W or R, (1, 4H, n), as the (n, 4H) tensor a step multiplies by."""
    tensor = cv.tensor(value, node)
    if tensor.num_dims != 3 or tensor.dims[0] != 1 or tensor.dims[1] != rows:
        raise node.error(f"W and R must be (1, {rows}, n) for one direction, got "
                         f"{tuple(tensor.dims)}")
    flat = cv.reshape(tensor, tensor.dims[1:], node)
    return cv.ffmodel.transpose(flat, (1, 0), name=node.name)


def _biases(cv, node, value, hidden: int) -> list[Tensor]:
    """Wb and Rb, each (4H,), from B (1, 8H); none without B."""
    if value is None:
        return []
    tensor = cv.tensor(value, node)
    if tuple(tensor.dims) != (1, 8 * hidden):
        raise node.error(f"B must be (1, {8 * hidden}), got {tuple(tensor.dims)}")
    flat = cv.reshape(tensor, (8 * hidden,), node)
    return list(cv.ffmodel.split(flat, 2, 0, name=node.name))


def _initial(cv, node, value, batch: int, hidden: int) -> Tensor:
    if value is None:
        return cv.tensor(Const(np.zeros((batch, hidden), np.float32)), node)
    tensor = cv.tensor(value, node)
    if tuple(tensor.dims) != (1, batch, hidden):
        raise node.error(f"initial_h and initial_c must be (1, {batch}, {hidden}), got "
                         f"{tuple(tensor.dims)}")
    return cv.reshape(tensor, (batch, hidden), node)


def _full_lengths(node, lengths, steps: int) -> None:
    if lengths is None:
        return
    if not isinstance(lengths, Const) or not bool(np.all(lengths.value == steps)):
        raise node.error(f"sequence_lens must be a constant of the full length {steps}")


def _outputs(cv, node, hs, h, c, batch_first: bool) -> list[Tensor]:
    """Y (seq, 1, batch, H), or (batch, seq, 1, H) with layout 1; Y_h and Y_c (1, batch, H),
    or (batch, 1, H)."""
    batch, hidden = h.dims
    step_shape = (batch, 1, 1, hidden) if batch_first else (1, 1, batch, hidden)
    y = cv.ffmodel.concat([cv.reshape(v, step_shape, node) for v in hs], 1 if batch_first else 0,
                          name=node.name)
    last_shape = (batch, 1, hidden) if batch_first else (1, batch, hidden)
    return [y, cv.reshape(h, last_shape, node), cv.reshape(c, last_shape, node)]
