import re

import numpy as np
import pytest
import torch

from flexflow.ops.attention import MultiHeadAttention
from flexflow.ops.base import Part
from flexflow.ops.spec import DimKind, ShapeError, TensorSpec

from .op_check import check_op, check_partitioned, randn, run_op

EMBED = 8


def torch_reference(op: MultiHeadAttention):
    """torch's functional attention taking our inputs and weights in weight_specs order."""

    def reference(query, key, value, *ws):
        ws = list(ws)
        kernels = ws[:3]
        biases = ws[3:6] if op.bias else None
        rest = ws[6:] if op.bias else ws[3:]
        bias_k, bias_v = rest[-2:] if op.add_bias_kv else (None, None)
        packed = op.key_dim == op.value_dim == op.embed_dim
        out, _ = torch.nn.functional.multi_head_attention_forward(
            query.transpose(0, 1), key.transpose(0, 1), value.transpose(0, 1),
            op.embed_dim, op.num_heads,
            in_proj_weight=torch.cat(kernels) if packed else None,
            in_proj_bias=torch.cat(biases) if op.bias else None,
            bias_k=bias_k, bias_v=bias_v, add_zero_attn=op.add_zero_attn, dropout_p=0.0,
            out_proj_weight=rest[0], out_proj_bias=rest[1] if op.bias else None,
            training=True, need_weights=False, use_separate_proj_weight=not packed,
            q_proj_weight=kernels[0], k_proj_weight=kernels[1], v_proj_weight=kernels[2])
        return out.transpose(0, 1)

    return reference


def weights(op, in_specs, seed=10):
    return [randn(*w.shape, seed=seed + i, scale=0.5)
            for i, w in enumerate(op.weight_specs(in_specs))]


def inputs(op, lq=3, lk=4, batch=2, self_attention=False):
    query = randn(batch, lq, op.embed_dim, seed=1)
    if self_attention:
        return [query, query.copy(), query.copy()]
    return [query, randn(batch, lk, op.key_dim, seed=2), randn(batch, lk, op.value_dim, seed=3)]


def specs(xs):
    return [TensorSpec(x.shape) for x in xs]


@pytest.mark.parametrize("kdim,vdim", [(0, 0), (3, 5)])
@pytest.mark.parametrize("heads", [1, 2, 4])
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("add_bias_kv", [False, True])
@pytest.mark.parametrize("add_zero_attn", [False, True])
def test_attention_matches_torch(kdim, vdim, heads, bias, add_bias_kv, add_zero_attn):
    op = MultiHeadAttention(EMBED, heads, kdim, vdim, bias=bias, add_bias_kv=add_bias_kv,
                            add_zero_attn=add_zero_attn)
    xs = inputs(op, self_attention=kdim == 0)
    check_op(op, xs, weights(op, specs(xs)), torch_reference(op))


@pytest.mark.parametrize("kdim,vdim", [(0, 0), (3, 5)])
def test_attention_takes_weights_copied_from_torch_module(kdim, vdim):
    torch.manual_seed(0)
    module = torch.nn.MultiheadAttention(EMBED, 2, bias=True, add_bias_kv=True, kdim=kdim or None,
                                         vdim=vdim or None, batch_first=True)
    op = MultiHeadAttention(EMBED, 2, kdim, vdim, add_bias_kv=True)
    if module._qkv_same_embed_dim:
        kernels = module.in_proj_weight.chunk(3)
    else:
        kernels = [module.q_proj_weight, module.k_proj_weight, module.v_proj_weight]
    ws = [*kernels, *module.in_proj_bias.chunk(3), module.out_proj.weight, module.out_proj.bias,
          module.bias_k, module.bias_v]
    xs = inputs(op)
    (y,), _, _ = run_op(op, xs, [w.detach().numpy() for w in ws])
    expected, _ = module(*(torch.tensor(x) for x in xs), need_weights=False)
    np.testing.assert_allclose(y, expected.detach().numpy(), rtol=1e-4, atol=1e-5)


def test_attention_weight_specs_follow_torch_layout():
    op = MultiHeadAttention(EMBED, 2, 3, 5, add_bias_kv=True)
    got = [(w.name, w.shape, w.initializer) for w in op.weight_specs(specs(inputs(op)))]
    glorot = "glorot_uniform"
    assert got == [("q_proj", (8, 8), glorot), ("k_proj", (8, 3), glorot),
                   ("v_proj", (8, 5), glorot), ("q_bias", (8,), "zeros"),
                   ("k_bias", (8,), "zeros"), ("v_bias", (8,), "zeros"),
                   ("out_proj", (8, 8), glorot), ("out_bias", (8,), "zeros"),
                   ("bias_k", (1, 1, 8), "zeros"), ("bias_v", (1, 1, 8), "zeros")]


@pytest.mark.parametrize("dim", [0, 1])
def test_attention_partitions_tile_the_output(dim):
    op = MultiHeadAttention(EMBED, 2, 3, 5, add_bias_kv=True, add_zero_attn=True)
    xs = inputs(op, lq=4, batch=4)
    assert op.dim_kinds(specs(xs)) == (DimKind.SAMPLE, DimKind.ATTRIBUTE, None)
    check_partitioned(op, xs, weights(op, specs(xs)), dim)


def dropped_reference(op: MultiHeadAttention, kept: np.ndarray):
    """Attention in torch's own operations (biases, no extra rows) with the attention weights
    multiplied by `kept`, our dropout's factors."""
    def reference(query, key, value, wq, wk, wv, bq, bk, bv, wo, bo):
        def heads(x, w, b):
            y = x @ w.T + b
            return y.reshape(*y.shape[:2], op.num_heads, -1).transpose(1, 2)
        q, k, v = heads(query, wq, bq), heads(key, wk, bk), heads(value, wv, bv)
        attn = torch.softmax(q @ k.transpose(-1, -2) / (q.shape[-1] ** 0.5), dim=-1)
        context = (attn * torch.tensor(kept)) @ v
        return context.transpose(1, 2).reshape(query.shape) @ wo.T + bo
    return reference


def kept_factors(op, xs, seed):
    in_specs = specs(xs)
    part = Part.whole(in_specs, op.infer(in_specs), seed=seed)
    return op._kept_factors(np, part, op.num_heads, xs[1].shape[1], np.float32)


@pytest.mark.parametrize("heads", [1, 2, 4])
@pytest.mark.parametrize("rate", [0.2, 0.6])
def test_attention_dropout_matches_torch_with_the_same_factors(heads, rate):
    op = MultiHeadAttention(EMBED, heads, dropout=rate)
    xs = inputs(op, lq=5, lk=6)
    kept = kept_factors(op, xs, seed=7)
    assert 0 < (kept == 0).sum() < kept.size
    check_op(op, xs, weights(op, specs(xs)), dropped_reference(op, kept), seed=7)


def test_attention_dropout_drops_about_its_rate_and_differs_by_seed():
    op = MultiHeadAttention(EMBED, 4, dropout=0.3)
    xs = inputs(op, lq=32, lk=40, batch=8)
    kept = kept_factors(op, xs, seed=1)
    assert abs((kept == 0).mean() - 0.3) < 0.02
    assert set(np.unique(kept)) == {0.0, np.float32(1 / 0.7)}
    assert 0.3 < ((kept_factors(op, xs, seed=2) == 0) != (kept == 0)).mean() < 0.5


def test_attention_dropout_is_off_in_inference():
    op = MultiHeadAttention(EMBED, 2, dropout=0.5)
    xs = inputs(op)
    check_op(op, xs, weights(op, specs(xs)), torch_reference(op), training=False,
             check_backward=False)


@pytest.mark.parametrize("dim", [0, 1])
def test_attention_dropout_partitions_draw_the_whole_tensors_factors(dim):
    op = MultiHeadAttention(EMBED, 2, 3, 5, dropout=0.4, add_bias_kv=True, add_zero_attn=True)
    xs = inputs(op, lq=4, batch=4)
    check_partitioned(op, xs, weights(op, specs(xs)), dim, seed=3)


@pytest.mark.parametrize("query,key,value", [
    ((2, 3, 6), (2, 4, 8), (2, 4, 8)),   # query dim != embed_dim
    ((2, 3, 8), (2, 4, 8), (2, 5, 8)),   # key/value lengths differ
    ((2, 3, 8), (3, 4, 8), (3, 4, 8)),   # batches differ
    ((2, 3, 8), (2, 4, 7), (2, 4, 8)),   # key dim != kdim
    ((3, 8), (3, 8), (3, 8)),            # not 3-d
])
def test_attention_rejects_mismatched_shapes(query, key, value):
    with pytest.raises(ShapeError, match=re.escape(f"query {query}, key {key}, value {value}")):
        MultiHeadAttention(EMBED, 2).infer([TensorSpec(query), TensorSpec(key), TensorSpec(value)])


@pytest.mark.parametrize("op,message", [
    (MultiHeadAttention(EMBED, 3), "num_heads (3)"),
    (MultiHeadAttention(EMBED, 2, dropout=1.5), "[0, 1), got 1.5"),
    (MultiHeadAttention(EMBED, 2, kdim=-1), "kdim -1"),
])
def test_attention_rejects_bad_arguments(op, message):
    x = TensorSpec((2, 3, EMBED))
    with pytest.raises(ShapeError, match=re.escape(message)):
        op.infer([x, x, x])
