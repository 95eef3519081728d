"""Torch constructs FFModel has no layer for (`ir.TorchOp`), each composed from layers it has.

One function per op, called by the builder as `build(builder, node, args, params)` with the
node's input values and parameters; helper layers are named `<node>_<purpose>`. The parameters
(the `.ff` line after the op type) and the inputs, in order:

* `SILU` (no parameters; input x): x * sigmoid(x).
* `HARDTANH; min; max` (floats, min < max; input x): max(min(x, max), min), from FFModel's
  element-wise max/min with constants, so the value is exact; ReLU6 is `HARDTANH; 0.0; 6.0`.
  At x == min or x == max exactly the gradient is halved (FFModel's max/min share ties), where
  torch's passes none.
* `CHUNK; chunks; dim` (ints; input x): torch.chunk's pieces, ceil(size / chunks) each, the last
  one shorter, so there may be fewer than `chunks`; the value is a list of tensors.
* `GROUP_NORM; groups; channels; eps; affine` (int, int or None, float, bool; inputs x and
  optionally weight and bias tensors): x (N, C, ...) viewed as (N, groups, rest) and normalised
  over `rest` by a layer norm without affine, viewed back, then scaled and shifted per channel.
  `channels` None takes C from x (F.group_norm). The scale and shift are the weight and bias
  inputs when given, else with `affine` the node's own trainable weights (C,), from torch's
  `weight` and `bias`, else torch's initial ones and zeros.
* `SCALED_DOT_PRODUCT_ATTENTION; dropout_p; is_causal; scale` (float, bool, float or None;
  inputs q (..., L, E), k (..., S, E), v (..., S, Ev) with equal leading dims, and optionally a
  mask broadcasting to (..., L, S)): softmax(q @ k^T * scale + mask) @ v, scale None meaning
  1/sqrt(E). `is_causal` adds a constant (L, S) mask, -inf above the diagonal, held by a frozen
  weight; a bool mask keeps the scores where it is True (-inf elsewhere), a float one is added.
  `dropout_p` drops attention probabilities in training only (FFModel's dropout).
* `LSTM; input; hidden; layers; bias; batch_first; dropout` (int, int, int, bool, bool, float;
  inputs x and optionally h0, c0 of (layers, N, hidden)): torch's LSTM unrolled over x's (static)
  sequence length: per layer a dense input projection of the whole sequence (W_ih, b_ih) and, per
  time step, a dense projection of h (W_hh, b_hh, the same layer at every step), the gates i, f,
  g, o of torch's order, c = f * c + i * g and h = o * tanh(c). Without h0, c0 the states start
  at zero. `dropout` applies between layers in training only. The value is (output, (h_n, c_n)),
  as torch returns it. Weights come from torch's `weight_ih_l<k>`, `weight_hh_l<k>`,
  `bias_ih_l<k>`, `bias_hh_l<k>`, or FFModel's default initializers without them.
* `GELU_TANH` (no parameters; input x): gelu's tanh approximation written out,
  0.5 * x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x^3))), as torch computes it.

A `LAYER_NORM; shape; eps; True; False` node (a layer norm with a weight and no bias, which
FFModel's layer norm has no form for) is the plain layer norm times the node's own trainable
weight (`scaled_layer_norm` below).

A second call of a module with weights (GroupNorm, LSTM) shares the first call's weights.
"""

from __future__ import annotations

import math

import numpy as np

from flexflow.initializers import ArrayInitializer, OnesInitializer, ZeroInitializer
from flexflow.tensor import Tensor
from flexflow.type import DataType

from .ir import IRNode, TorchOp
from .logic import LOGIC

GELU_SCALE = math.sqrt(2 / math.pi)
GELU_CUBE = 0.044715


def pieces(length: int, size: int) -> list[int]:
    """Sizes of the pieces of `size` that cut `length` (the last one shorter), as torch's split
    with an int and torch.chunk cut a dim."""
    return [size] * (length // size) + ([length % size] if length % size else [])


def _torch_weights(b, node: IRNode, shapes: dict[str, tuple]) -> dict[str, np.ndarray] | None:
    """The node's torch tensors named in `shapes`, which must have those shapes (those the node
    declares); None when the model came without weights (a `.ff` file without its `.npz`)."""
    named = b.state.tensors.get(node.name)
    if named is None:
        return None
    got = {name: tuple(named[name].shape) for name in shapes if name in named}
    if got != shapes:
        raise node.error(f"the weights hold {sorted(named)} of shapes {got}; the node needs "
                         f"{shapes}")
    return {name: np.asarray(named[name], dtype=np.float32) for name in shapes}


def silu(b, node, args, params):
    """x * sigmoid(x), torch's SiLU (swish)."""
    x = b._tensor(node, args[0])
    return b.ff.multiply(x, b.ff.sigmoid(x, name=f"{node.name}_sigmoid"), name=node.name)


def gelu_tanh(b, node, args, params):
    """0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))): FFModel's gelu is the exact (erf) one."""
    x = b._tensor(node, args[0])
    ff, name = b.ff, node.name
    cube = ff.scalar_multiply(ff.pow(x, 3.0, name=f"{name}_cube"), GELU_CUBE,
                              name=f"{name}_cube_scaled")
    inner = ff.scalar_multiply(ff.add(x, cube, name=f"{name}_inner"), GELU_SCALE,
                               name=f"{name}_inner_scaled")
    half = ff.scalar_multiply(x, 0.5, name=f"{name}_half")
    return ff.multiply(half, ff.scalar_add(ff.tanh(inner, name=f"{name}_tanh"), 1.0,
                                           name=f"{name}_one_plus"), name=name)


def scaled_layer_norm(b, node, x: Tensor, axes: list[int], eps: float) -> Tensor:
    """A layer norm without affine times a trainable weight of the normalised shape: torch's
    layer norm with a weight and no bias. The weight is torch's `weight` when given, else ones;
    a second call of the module shares it."""
    shape = tuple(x.dims[a] for a in axes)
    normal = b.ff.layer_norm(x, axes=axes, elementwise_affine=False, eps=eps,
                             name=f"{node.name}_norm")
    weight = b._shared(node)
    if weight is None:
        arrays = _torch_weights(b, node, {"weight": shape})
        weight = b.ff.create_weight(list(shape), initializer=OnesInitializer() if arrays is None
                                    else ArrayInitializer(arrays["weight"]),
                                    name=f"{node.name}_weight")
    b.weight_ops[node.name] = weight
    return b.ff.multiply(normal, weight, name=node.name)


def hardtanh(b, node, args, params):
    """x clamped to [min, max] with FFModel's max and min against constants."""
    low, high = (float(p) for p in params)
    if not low < high:
        raise node.error(f"min {low} must be below max {high}")
    x = b._tensor(node, args[0])
    floor = b.ff.max(x, b.ff.create_constant([1], low), name=f"{node.name}_floor")
    return b.ff.min(floor, b.ff.create_constant([1], high), name=node.name)


def chunk(b, node, args, params):
    chunks, dim = params
    x = b._tensor(node, args[0])
    if not isinstance(chunks, int) or isinstance(chunks, bool) or chunks <= 0:
        raise node.error(f"chunks must be a positive int, got {chunks!r}")
    axis = node.dim(dim, x.num_dims)
    length = x.dims[axis]
    sizes = pieces(length, -(-length // chunks))
    return b.ff.split(input=x, sizes=sizes, axis=axis, name=node.name)


def group_norm(b, node, args, params):
    """Normalise groups of channels as rows of a layer norm, then the per-channel affine."""
    groups, channels, eps, affine = params
    x = b._tensor(node, args[0])
    if x.num_dims < 2 or (channels is not None and x.dims[1] != channels):
        raise node.error(f"expected an input (N, {channels}, ...), got {x.dims}")
    c = x.dims[1]
    if not isinstance(groups, int) or groups <= 0 or c % groups:
        raise node.error(f"{c} channels cannot be cut into {groups!r} groups")
    rows = b._reshape(x, (x.dims[0], groups, math.prod(x.dims[1:]) // groups),
                      f"{node.name}_groups")
    normal = b.ff.layer_norm(rows, axes=[2], elementwise_affine=False, eps=float(eps),
                             name=f"{node.name}_norm")
    plain = len(args) == 1 and not affine
    y = b._reshape(normal, x.dims, node.name if plain else f"{node.name}_back")
    if plain:
        return y
    lift = (c,) + (1,) * (x.num_dims - 2)
    scale, shift = (b._reshape(t, lift, f"{node.name}_{what}_c")
                    for t, what in zip(_affine(b, node, args, c), ("weight", "bias")))
    return b.ff.add(b.ff.multiply(y, scale, name=f"{node.name}_scale"), shift, name=node.name)


def _affine(b, node, args, channels: int) -> tuple[Tensor, Tensor]:
    """GroupNorm's scale and shift: F.group_norm's weight and bias inputs, else the module's own
    weights (those of its earlier call if it was called before)."""
    if len(args) == 3:
        return tuple(b._tensor(node, a, "weight and bias") for a in args[1:])
    if len(args) != 1:
        raise node.error(f"expects an input and optionally weight and bias, got {len(args)} "
                         f"inputs")
    held = b._shared(node)
    if held is None:
        arrays = _torch_weights(b, node, {"weight": (channels,), "bias": (channels,)})
        held = tuple(
            b.ff.create_weight([channels], initializer=default if arrays is None
                               else ArrayInitializer(arrays[name]), name=f"{node.name}_{name}")
            for name, default in (("weight", OnesInitializer()), ("bias", ZeroInitializer())))
    b.weight_ops[node.name] = held
    return held


def attention(b, node, args, params):
    """softmax(q @ k^T * scale + mask) @ v over the last two dims."""
    dropout_p, causal, scale = params
    q, k, v = (b._tensor(node, a, "query, key and value") for a in args[:3])
    rank = q.num_dims
    if (rank < 3 or k.num_dims != rank or v.num_dims != rank or k.dims[:-1] != v.dims[:-1]
            or q.dims[:-2] != k.dims[:-2] or q.dims[-1] != k.dims[-1]):
        raise node.error(f"expects q (..., L, E), k (..., S, E), v (..., S, Ev) of rank >= 3 "
                         f"with equal leading dims, got {q.dims}, {k.dims}, {v.dims}")
    swap = list(range(rank - 2)) + [rank - 1, rank - 2]
    keys = b.ff.transpose(k, swap, name=f"{node.name}_keys")
    scores = b.ff.scalar_multiply(
        b.ff.batch_matmul(q, keys, name=f"{node.name}_scores"),
        1 / math.sqrt(q.dims[-1]) if scale is None else float(scale), name=f"{node.name}_scaled")
    if causal:
        scores = b.ff.add(scores, _causal_mask(b, node, q.dims[-2], k.dims[-2]),
                          name=f"{node.name}_causal")
    if len(args) == 4:
        scores = _masked(b, node, scores, b._tensor(node, args[3], "attn_mask"))
    weights = b.ff.softmax(scores, axis=rank - 1, name=f"{node.name}_softmax")
    if dropout_p:
        weights = b.ff.dropout(weights, float(dropout_p), seed=0, name=f"{node.name}_dropout")
    return b.ff.batch_matmul(weights, v, name=node.name)


def _causal_mask(b, node, queries: int, keys: int) -> Tensor:
    """(L, S): 0 where query i may see key j (j <= i, as torch's is_causal), -inf elsewhere; a
    frozen weight, so that it never trains."""
    mask = np.triu(np.full((queries, keys), -np.inf, dtype=np.float32), k=1)
    return b.ff.create_weight([queries, keys], trainable=False,
                              initializer=ArrayInitializer(mask), name=f"{node.name}_mask")


def _masked(b, node, scores: Tensor, mask: Tensor) -> Tensor:
    if mask.data_type == DataType.DT_BOOLEAN:
        hidden = b.ff.create_constant([1], -math.inf)
        return b.ff.where(mask, scores, hidden, name=f"{node.name}_masked")
    return b.ff.add(scores, mask, name=f"{node.name}_masked")


def lstm(b, node, args, params):
    """The layers one after the other, each over the whole sequence."""
    inputs, hidden, layers, bias, batch_first, dropout = params
    x = b._tensor(node, args[0])
    if x.num_dims != 3 or x.dims[-1] != inputs:
        order = "(N, T, input)" if batch_first else "(T, N, input)"
        raise node.error(f"expects a batched input {order} with input = {inputs}, got {x.dims}")
    time = 1 if batch_first else 0
    batch = x.dims[1 - time]
    cell = _Cell(b, node, hidden, bool(bias), batch)
    states = cell.initial_states(args[1:], layers)
    finals = []
    for layer in range(layers):
        if layer and dropout:
            x = b.ff.dropout(x, float(dropout), seed=0, name=f"{node.name}_l{layer}_dropout")
        x, h, c = cell.layer(layer, x, time, *states[layer])
        finals.append((h, c))
    b.weight_ops[node.name] = cell.held
    return (x, tuple(cell.stack(list(s), name) for s, name in zip(zip(*finals), ("h_n", "c_n"))))


class _Cell:
    """The layers of one LSTM node: the dense projections it holds (created at first use, shared
    at every later time step and by later calls of the same module) and the step arithmetic."""

    def __init__(self, b, node: IRNode, hidden: int, bias: bool, batch: int):
        self.b, self.ff, self.node = b, b.ff, node
        self.hidden, self.bias, self.batch = hidden, bias, batch
        self.held = b._shared(node) or {}
        self.arrays = None if self.held else self._arrays()

    def _arrays(self):
        layers, inputs = self.node.params[2], self.node.params[0]
        shapes = {}
        for k in range(layers):
            for kind, width in (("ih", inputs if k == 0 else self.hidden), ("hh", self.hidden)):
                shapes[f"weight_{kind}_l{k}"] = (4 * self.hidden, width)
                if self.bias:
                    shapes[f"bias_{kind}_l{k}"] = (4 * self.hidden,)
        return _torch_weights(self.b, self.node, shapes)

    def initial_states(self, given: list, layers: int) -> list[tuple[Tensor, Tensor]]:
        """(h0, c0) of each layer: slices of the given (layers, N, hidden) tensors, or zeros."""
        shape = (layers, self.batch, self.hidden)
        if not given:
            zeros = self.ff.create_constant([self.batch, self.hidden], 0.0)
            return [(zeros, zeros)] * layers
        states = [self.b._tensor(self.node, t, "h0 and c0") for t in given]
        if len(states) != 2 or any(t.dims != shape for t in states):
            raise self.node.error(f"h0 and c0 must be two tensors {shape}, got "
                                  f"{[t.dims for t in states]}")
        per_layer = [self.ff.split(t, layers, axis=0, name=f"{self.node.name}_{what}")
                     for t, what in zip(states, ("h0", "c0"))]
        return [tuple(self.b._reshape(s[k], shape[1:], f"{self.node.name}_{what}_l{k}")
                      for s, what in zip(per_layer, ("h0", "c0"))) for k in range(layers)]

    def project(self, x: Tensor, key: str, name: str) -> Tensor:
        """Dense layer `key` (`ih0`, `hh0`, `ih1`, ...) to the 4 gates: W_<key> x + b_<key>."""
        shared = self.held.get(key)
        suffix = f"{key[:2]}_l{key[2:]}"
        init = {}
        if shared is None and self.arrays is not None:
            init["kernel_initializer"] = ArrayInitializer(self.arrays[f"weight_{suffix}"])
            if self.bias:
                init["bias_initializer"] = ArrayInitializer(self.arrays[f"bias_{suffix}"])
        y = self.ff.dense(x, 4 * self.hidden, use_bias=self.bias, shared_op=shared, name=name,
                          **init)
        self.held.setdefault(key, y.owner_op)
        return y

    def layer(self, layer: int, x: Tensor, time: int, h: Tensor, c: Tensor):
        """One layer over the sequence x: its output sequence and its last h and c."""
        prefix = f"{self.node.name}_l{layer}"
        projected = self.project(x, f"ih{layer}", f"{prefix}_ih")
        steps = self.ff.split(projected, x.dims[time], axis=time, name=f"{prefix}_steps")
        outputs = []
        for t, step in enumerate(steps):
            name = f"{prefix}_t{t}"
            gates = self.ff.add(self.b._reshape(step, (self.batch, 4 * self.hidden), f"{name}_x"),
                                self.project(h, f"hh{layer}", f"{name}_hh"), name=f"{name}_gates")
            h, c = self.step(gates, c, name)
            outputs.append(self.b._reshape(h, step.dims[:-1] + (self.hidden,), f"{name}_out"))
        if len(outputs) == 1:
            return outputs[0], h, c
        return self.ff.concat(outputs, axis=time, name=f"{prefix}_output"), h, c

    def step(self, gates: Tensor, c: Tensor, name: str) -> tuple[Tensor, Tensor]:
        """h and c after one time step, from the gates' pre-activations (N, 4 * hidden)."""
        ff = self.ff
        i, f, g, o = ff.split(gates, 4, axis=1, name=f"{name}_split")
        i, f, o = (ff.sigmoid(t, name=f"{name}_{gate}") for t, gate in ((i, "i"), (f, "f"),
                                                                         (o, "o")))
        g = ff.tanh(g, name=f"{name}_g")
        c = ff.add(ff.multiply(f, c, name=f"{name}_keep"), ff.multiply(i, g, name=f"{name}_new"),
                   name=f"{name}_c")
        return ff.multiply(o, ff.tanh(c, name=f"{name}_tanh"), name=f"{name}_h"), c

    def stack(self, states: list[Tensor], what: str) -> Tensor:
        """The layers' last h (or c) as torch's (layers, N, hidden)."""
        lifted = [self.b._reshape(s, (1,) + s.dims, f"{self.node.name}_{what}_{k}")
                  for k, s in enumerate(states)]
        if len(lifted) == 1:
            return lifted[0]
        return self.ff.concat(lifted, axis=0, name=f"{self.node.name}_{what}")


COMPOSED = {TorchOp.SILU: silu, TorchOp.HARDTANH: hardtanh, TorchOp.CHUNK: chunk,
            TorchOp.GROUP_NORM: group_norm, TorchOp.SCALED_DOT_PRODUCT_ATTENTION: attention,
            TorchOp.LSTM: lstm, TorchOp.GELU_TANH: gelu_tanh, **LOGIC}
