"""Multi-head attention with the semantics and weight layout of torch.nn.MultiheadAttention.

Inputs are batch-first: query (b, Lq, embed_dim), key (b, Lk, kdim), value (b, Lk, vdim); kdim and
vdim of 0 mean embed_dim. Each is projected to embed_dim, split into `num_heads` heads of
embed_dim / num_heads, attended with softmax(Q K^T / sqrt(head_dim)) V, merged and projected by
`out_proj`. The weights keep torch's layout ((out, in) kernels), so a torch module's weights copy
over directly. `add_bias_kv` appends a learned row to the projected keys and values, then
`add_zero_attn` appends a zero row, in torch's order.

Splits: the batch (SAMPLE) and the query length (ATTRIBUTE: each query row attends over all keys,
so every partition reads key and value whole, and the executor sums their partial gradients).
The heads split as Megatron's attention does (`contraction`): each of a box's partitions
projects, attends and merges its share of the heads with its slices of the q/k/v projections
(their rows) and of `out_proj` (its columns), and the partitions' products with `out_proj`
are summed (the out bias added by the first alone); each partition keeps its own heads'
projections and weights (`MadePartial`), and the input gradients it makes are partial sums,
which the executor adds.

Dropout (torch's `dropout`) zeroes attention weights in training, as ops/dropout.py zeroes
elements: each weight's fate is a hash of the layer's iteration seed and its place in the whole
(batch, heads, queries, keys) tensor, so every split, heads included, drops the same weights as
one device. Backward draws the same factors again rather than keeping them: dropout costs no
memory here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from .base import Contraction, Kept, MadePartial, Operator, expect_count, expect_float
from .box import Box
from .dropout import kept_factors
from .spec import DimKind, ShapeError, TensorSpec, WeightSpec
from .vendor import matmul


def _split_heads(x, heads: int):
    """(b, L, E) -> (b, heads, L, E / heads)."""
    b, length, embed = x.shape
    return x.reshape(b, length, heads, embed // heads).transpose(0, 2, 1, 3)


def _merge_heads(x):
    """(b, heads, L, d) -> (b, L, heads * d)."""
    b, heads, length, d = x.shape
    return x.transpose(0, 2, 1, 3).reshape(b, length, heads * d)


def _linear_backward(xp, dy, x, kernel, with_bias: bool):
    """Gradients of y = x @ kernel.T (+ bias) over (b, L, features): (dx, [dkernel, dbias])."""
    dy2 = dy.reshape(-1, dy.shape[-1])
    grads = [matmul(xp, dy2.T, x.reshape(-1, x.shape[-1]))]
    if with_bias:
        grads.append(dy2.sum(axis=0))
    return matmul(xp, dy, kernel), grads


@dataclass(frozen=True)
class MultiHeadAttention(Operator):
    embed_dim: int
    num_heads: int
    kdim: int = 0
    vdim: int = 0
    dropout: float = 0.0
    bias: bool = True
    add_bias_kv: bool = False
    add_zero_attn: bool = False

    type_name = "MultiHeadAttention"

    @property
    def key_dim(self) -> int:
        return self.kdim or self.embed_dim

    @property
    def value_dim(self) -> int:
        return self.vdim or self.embed_dim

    def infer(self, inputs):
        expect_count(inputs, 3, "multihead_attention (query, key, value)")
        for i, what in enumerate(("query", "key", "value")):
            expect_float(inputs, i, f"multihead_attention {what}")
        q, k, v = inputs
        shapes = f"query {q.shape}, key {k.shape}, value {v.shape}"
        if self.embed_dim <= 0 or self.num_heads <= 0 or self.embed_dim % self.num_heads:
            raise ShapeError(f"multihead_attention embed_dim ({self.embed_dim}) must be a positive "
                             f"multiple of num_heads ({self.num_heads})")
        if self.kdim < 0 or self.vdim < 0:
            raise ShapeError(f"multihead_attention kdim/vdim must be >= 0 (0: embed_dim), got "
                             f"kdim {self.kdim}, vdim {self.vdim}")
        if not 0.0 <= self.dropout < 1.0:
            raise ShapeError(f"multihead_attention dropout must be in [0, 1), got {self.dropout}")
        if q.ndim != 3 or k.ndim != 3 or v.ndim != 3:
            raise ShapeError(f"multihead_attention inputs must be 3-d (batch, seq, dim), got "
                             f"{shapes}")
        expected = ((q.shape[0], q.shape[1], self.embed_dim),
                    (q.shape[0], k.shape[1], self.key_dim),
                    (q.shape[0], k.shape[1], self.value_dim))
        if (q.shape, k.shape, v.shape) != expected:
            raise ShapeError(f"multihead_attention expects query (b, Lq, embed_dim="
                             f"{self.embed_dim}), key (b, Lk, kdim={self.key_dim}), value (b, Lk, "
                             f"vdim={self.value_dim}), got {shapes}")
        return (TensorSpec(q.shape, q.dtype),)

    def weight_specs(self, inputs):
        e = self.embed_dim
        specs = [_projection("q_proj", e, e), _projection("k_proj", e, self.key_dim),
                 _projection("v_proj", e, self.value_dim)]
        if self.bias:
            specs += [WeightSpec(name=name, shape=(e,)) for name in ("q_bias", "k_bias", "v_bias")]
        specs.append(_projection("out_proj", e, e))
        if self.bias:
            specs.append(WeightSpec(name="out_bias", shape=(e,)))
        if self.add_bias_kv:
            specs += [WeightSpec(name=name, shape=(1, 1, e)) for name in ("bias_k", "bias_v")]
        return tuple(specs)

    def _unpack(self, ws):
        """Weights in spec order -> (kernels q/k/v, biases q/k/v or Nones, out kernel, out bias
        or None, bias_k, bias_v); a head split's later partitions have no out bias."""
        ws = list(ws)
        kernels = ws[:3]
        biases = ws[3:6] if self.bias else [None] * 3
        rest = ws[6:] if self.bias else ws[3:]
        bias_kv = tuple(rest[-2:]) if self.add_bias_kv else (None, None)
        rest = rest[:-2] if self.add_bias_kv else rest
        out_kernel = rest[0]
        out_bias = rest[1] if len(rest) > 1 else None
        return kernels, biases, out_kernel, out_bias, bias_kv

    def forward(self, xp, xs, ws, part):
        """The whole output; under a head split (`part.reduced`: the partitions' products
        summed) that sum, and what this partition's heads keep (made by its `forward_partial`,
        or again here where the forward is recomputed)."""
        if part.reduced is None:
            return self._attend(xp, xs, ws, part)
        saved = part.made if part.made is not None else self._attend(xp, xs, ws, part)[1]
        return [part.reduced], saved

    def forward_partial(self, xp, xs, ws, part):
        """A head split's share of the output: its heads' product with its columns of
        `out_proj`, and what they keep for backward."""
        (out,), saved = self._attend(xp, xs, ws, part)
        return MadePartial(out, saved)

    def _attend(self, xp, xs, ws, part):
        """Attention over the heads `ws` holds (all, or a head split's share, their projections'
        rows and `out_proj`'s columns), the out bias added where `ws` holds it."""
        kernels, biases, out_kernel, out_bias, bias_kv = self._unpack(ws)
        projected = []
        for x, kernel, bias in zip(xs, kernels, biases):
            y = matmul(xp, x, kernel.T)
            projected.append(y + bias if self.bias else y)
        q, k, v = projected
        batch, width = q.shape[0], q.shape[-1]
        heads = width // (self.embed_dim // self.num_heads)
        extra = []  # rows appended to the projected keys and values: bias_kv, then zeros
        if self.add_bias_kv:
            extra.append(bias_kv)
        if self.add_zero_attn:
            zero = xp.zeros((1, 1, width), dtype=k.dtype)
            extra.append((zero, zero))
        if extra:
            k = xp.concatenate([k] + [xp.broadcast_to(bk, (batch, 1, width))
                                      for bk, _ in extra], axis=1)
            v = xp.concatenate([v] + [xp.broadcast_to(bv, (batch, 1, width))
                                      for _, bv in extra], axis=1)
        qh, kh, vh = (_split_heads(t, heads) for t in (q, k, v))
        scale = 1.0 / math.sqrt(self.embed_dim // self.num_heads)
        scores = matmul(xp, qh, kh.swapaxes(-1, -2)) * scale
        scores = xp.exp(scores - scores.max(axis=-1, keepdims=True))
        attn = scores / scores.sum(axis=-1, keepdims=True)
        kept = self._kept_factors(xp, part, heads, kh.shape[2], attn.dtype)
        context = _merge_heads(matmul(xp, attn if kept is None else attn * kept, vh))
        out = matmul(xp, context, out_kernel.T)
        if out_bias is not None:
            out = out + out_bias
        return [out], (xs, kernels, out_kernel, qh, kh, vh, attn, context, scale,
                       out_bias is not None)

    def _kept_factors(self, xp, part, heads: int, keys: int, dtype):
        """Dropout's `kept_factors` of the attention weights of this partition's batch rows,
        query rows and `heads` (a head split's share), over all keys; None where nothing is
        dropped."""
        if not part.training or self.dropout == 0.0:
            return None
        first = part.share * heads
        batch, queries = part.out_box.bounds[:2]
        box = Box((batch, (first, first + heads), queries, (0, keys)))
        whole = (part.in_shapes[0][0], self.num_heads, part.in_shapes[0][1], keys)
        return kept_factors(xp, self.dropout, (part.seed,), box, whole, dtype)

    def contraction(self, inputs):
        """The heads: the q/k/v projections' rows (and biases), `out_proj`'s columns and
        bias_k/bias_v's features cut into the count's shares; the out bias read once."""
        bias, extra = (3, 1) if self.bias else (0, 0)
        out = 3 + bias
        cut = [(0, 0), (1, 0), (2, 0)] + [(3 + i, 0) for i in range(bias)] + [(out, 1)]
        if self.add_bias_kv:
            cut += [(out + extra + 1, 2), (out + extra + 2, 2)]
        return Contraction(size=self.num_heads, inputs=(), weights=tuple(cut),
                           first_only=(out + 1,) if self.bias else (), kept_cut=True,
                           what="heads")

    def kept_for_backward(self, inputs):
        """Its inputs, the projected queries, keys and values, the attention weights
        (heads x keys per output row) and the merged context (as large as the output)."""
        query, key = inputs[0], inputs[1]
        keys = key.shape[1] + self.add_bias_kv + self.add_zero_attn
        per_element = (2 * keys / query.shape[1] + 2 + self.num_heads * keys / self.embed_dim)
        return Kept(inputs=(0, 1, 2), extra=query.itemsize * per_element)

    def backward(self, xp, dys, saved, part):
        xs, kernels, out_kernel, qh, kh, vh, attn, context, scale, out_bias = saved
        (dy,) = dys
        dcontext, out_grads = _linear_backward(xp, dy, context, out_kernel, out_bias)
        dctx = _split_heads(dcontext, qh.shape[1])
        dattn = matmul(xp, dctx, vh.swapaxes(-1, -2))
        kept = self._kept_factors(xp, part, qh.shape[1], kh.shape[2], attn.dtype)  # again
        if kept is not None:
            dattn = dattn * kept
        dvh = matmul(xp, (attn if kept is None else attn * kept).swapaxes(-1, -2), dctx)
        dscores = attn * (dattn - (dattn * attn).sum(axis=-1, keepdims=True)) * scale
        dq = _merge_heads(matmul(xp, dscores, kh))
        dk = _merge_heads(matmul(xp, dscores.swapaxes(-1, -2), qh))
        dv = _merge_heads(dvh)
        length = xs[1].shape[1]
        # the rows after the real keys/values: bias_k/bias_v get the sum over the batch of theirs,
        # the zero rows are constants
        bias_kv_grads = [dk[:, length:length + 1].sum(axis=0, keepdims=True),
                         dv[:, length:length + 1].sum(axis=0, keepdims=True)]
        dk, dv = dk[:, :length], dv[:, :length]
        dxs, kernel_grads, bias_grads = [], [], []
        for dproj, x, kernel in zip((dq, dk, dv), xs, kernels):
            dx, grads = _linear_backward(xp, dproj, x, kernel, self.bias)
            dxs.append(dx)
            kernel_grads.append(grads[0])
            bias_grads += grads[1:]
        grads = kernel_grads + bias_grads + out_grads
        if self.add_bias_kv:
            grads += bias_kv_grads
        return dxs, grads

    def dim_kinds(self, inputs):
        return DimKind.SAMPLE, DimKind.ATTRIBUTE, None

    def input_box(self, out_box, inputs, index):
        batch = out_box.bounds[0]
        if index == 0:
            return out_box
        _, length, dim = inputs[index].shape
        return Box((batch, (0, length), (0, dim)))

    def flops(self, inputs):
        q, k, v = inputs
        b, lq, e = q.shape
        lk = k.shape[1] + self.add_bias_kv + self.add_zero_attn
        projections = 2 * e * (q.size + k.size + v.size + b * lq * e)
        attention = 4 * b * lq * lk * e  # Q K^T and attn V
        weights = b * self.num_heads * lq * lk
        return projections + attention + (5 + 3 * (self.dropout > 0)) * weights  # softmax, dropout


def _projection(name: str, out_dim: int, in_dim: int) -> WeightSpec:
    return WeightSpec(name=name, shape=(out_dim, in_dim), initializer="glorot_uniform",
                      fan_in=in_dim, fan_out=out_dim)
