"""torch.nn modules -> IR (op type and parameters).

torch.fx keeps the modules of `torch.nn` as single `call_module` nodes; each supported class has a
function here returning `(OpType, params)` (or a `TorchOp`, which the builder composes). Module
options FlexFlow's operators cannot express (dilation, ceil_mode, a cumulative batch-norm average,
a padding row of an embedding, ...) are refused with an error naming the node, instead of being
silently dropped. A Conv1d is FlexFlow's CONV2D over a height of 1 (kernel, stride and padding
(1, k), (1, s), (0, p)), which the builder runs on the (N, C, L) input as (N, C, 1, L).
"""

from __future__ import annotations

import torch.fx as fx
import torch.nn as nn

from flexflow.type import ActiMode, OpType, PoolType

from . import pooling
from .call import Call
from .functions import GELUS
from .ir import TorchOp

NO_ACTIVATION = ActiMode.AC_MODE_NONE.value
BN_EPS, BN_MOMENTUM = 1e-5, 0.1  # FlexFlow's fixed batch-norm settings (and torch's defaults)


def _linear(m: nn.Linear, call: Call):
    return OpType.LINEAR, (m.out_features, NO_ACTIVATION, int(m.bias is not None))


def _conv(m: nn.Conv1d | nn.Conv2d, call: Call):
    """CONV2D of a Conv2d, or of a Conv1d lifted to a height of 1 (so that one FlexFlow layer
    and one `.ff` line serve both)."""
    call.expect(all(d == 1 for d in m.dilation), f"dilation {m.dilation} is not supported")
    call.expect(m.padding_mode == "zeros", f"padding_mode {m.padding_mode!r} is not supported")
    padding = m.padding
    if padding == "valid":
        padding = (0,) * len(m.kernel_size)
    elif padding == "same":
        call.expect(all(k % 2 for k in m.kernel_size),
                    f"padding='same' with the even kernel {m.kernel_size} pads unevenly, which "
                    f"is not supported")
        padding = tuple(k // 2 for k in m.kernel_size)
    def lift(values, fill):
        return (fill,) * (2 - len(values)) + tuple(values)
    return OpType.CONV2D, (m.out_channels, *lift(m.kernel_size, 1), *lift(m.stride, 1),
                           *lift(padding, 0), NO_ACTIVATION, m.groups, int(m.bias is not None))


def _max_pool(m: nn.MaxPool2d, call: Call):
    return pooling.fixed(call, PoolType.POOL_MAX, m.kernel_size, m.stride, m.padding,
                         dilation=m.dilation, ceil_mode=m.ceil_mode,
                         return_indices=m.return_indices)


def _avg_pool(m: nn.AvgPool2d, call: Call):
    return pooling.fixed(call, PoolType.POOL_AVG, m.kernel_size, m.stride, m.padding,
                         ceil_mode=m.ceil_mode, count_include_pad=m.count_include_pad,
                         divisor_override=m.divisor_override)


def _adaptive_avg(m: nn.AdaptiveAvgPool2d, call: Call):
    return pooling.adaptive(call, PoolType.POOL_AVG, m.output_size)


def _adaptive_max(m: nn.AdaptiveMaxPool2d, call: Call):
    return pooling.adaptive(call, PoolType.POOL_MAX, m.output_size, m.return_indices)


def _batch_norm(m: nn.BatchNorm2d, call: Call):
    call.expect(m.affine, "affine=False is not supported (batch_norm always has a scale and bias)")
    call.expect(m.track_running_stats and m.momentum is not None,
                "batch norm without running statistics or with momentum=None (a cumulative "
                "average) is not supported")
    if (m.eps, m.momentum) == (BN_EPS, BN_MOMENTUM):
        return OpType.BATCH_NORM, ()
    return OpType.BATCH_NORM, (float(m.eps), float(m.momentum))


def _layer_norm(m: nn.LayerNorm, call: Call):
    """LayerNorm(bias=False): LAYER_NORM's fourth parameter (bias) False."""
    params = (tuple(m.normalized_shape), float(m.eps), m.elementwise_affine)
    return OpType.LAYER_NORM, params + ((False,) if m.elementwise_affine and m.bias is None
                                        else ())


def _group_norm(m: nn.GroupNorm, call: Call):
    return TorchOp.GROUP_NORM, (m.num_groups, m.num_channels, float(m.eps), m.affine)


def _hardtanh(m: nn.Hardtanh, call: Call):
    """Hardtanh and its subclass ReLU6 (min 0, max 6)."""
    return TorchOp.HARDTANH, (float(m.min_val), float(m.max_val))


def _lstm(m: nn.LSTM, call: Call):
    """An LSTM unrolled over the input's sequence length by the builder; `hx` (h0, c0) optional."""
    call.expect(not m.bidirectional, "bidirectional=True is not supported")
    call.expect(m.proj_size == 0, f"proj_size={m.proj_size} is not supported")
    call.tensor(0, "input")
    hx = call.arg(1, "hx", None)
    call.expect(hx is None or (isinstance(hx, (tuple, list)) and len(hx) == 2
                               and all(isinstance(t, fx.Node) for t in hx)),
                f"hx must be None or a pair (h0, c0) of tensors of the model, got {hx!r}")
    return TorchOp.LSTM, (m.input_size, m.hidden_size, m.num_layers, m.bias, m.batch_first,
                          float(m.dropout))


def _dropout(m: nn.Dropout, call: Call):
    return OpType.DROPOUT, (float(m.p),)


def _flatten(m: nn.Flatten, call: Call):
    return (OpType.FLAT, ()) if (m.start_dim, m.end_dim) == (1, -1) else (
        OpType.FLAT, (m.start_dim, m.end_dim))


def _elu(m: nn.ELU, call: Call):
    call.expect(m.alpha == 1.0, f"ELU(alpha={m.alpha}) is not supported (elu has alpha 1)")
    return OpType.ELU, ()


def _gelu(m: nn.GELU, call: Call):
    call.expect(m.approximate in GELUS, f"GELU(approximate={m.approximate!r}) is not supported")
    return GELUS[m.approximate], ()


def _softmax(m: nn.Softmax, call: Call):
    return (OpType.SOFTMAX, ()) if m.dim is None else (OpType.SOFTMAX, (m.dim,))


def _embedding(m: nn.Embedding, call: Call):
    call.expect(m.padding_idx is None, "padding_idx is not supported (its row would be trained)")
    call.expect(m.max_norm is None, "max_norm is not supported")
    call.expect(not m.scale_grad_by_freq, "scale_grad_by_freq is not supported")
    return OpType.EMBEDDING, (m.num_embeddings, m.embedding_dim)


def _attention(m: nn.MultiheadAttention, call: Call):
    for name, position in (("key_padding_mask", 3), ("attn_mask", 5)):
        call.expect(call.arg(position, name, None) is None, f"{name} is not supported")
    call.expect(not call.arg(7, "is_causal", False), "is_causal=True is not supported")
    for index, name in enumerate(("query", "key", "value")):
        call.tensor(index, name)
    return OpType.MULTIHEAD_ATTENTION, (
        m.embed_dim, m.num_heads, m.kdim, m.vdim, float(m.dropout), m.in_proj_bias is not None,
        m.bias_k is not None, m.add_zero_attn, m.batch_first)


def _no_params(op_type: OpType | TorchOp):
    return lambda m, call: (op_type, ())


MODULES = {
    nn.Linear: _linear, nn.Conv1d: _conv, nn.Conv2d: _conv, nn.MaxPool2d: _max_pool,
    nn.AvgPool2d: _avg_pool, nn.AdaptiveAvgPool2d: _adaptive_avg,
    nn.AdaptiveMaxPool2d: _adaptive_max,
    nn.BatchNorm1d: _batch_norm, nn.BatchNorm2d: _batch_norm, nn.LayerNorm: _layer_norm,
    nn.Dropout: _dropout, nn.Flatten: _flatten, nn.ReLU: _no_params(OpType.RELU),
    nn.Sigmoid: _no_params(OpType.SIGMOID), nn.Tanh: _no_params(OpType.TANH), nn.ELU: _elu,
    nn.GELU: _gelu, nn.Identity: _no_params(OpType.IDENTITY), nn.Softmax: _softmax,
    nn.Embedding: _embedding, nn.MultiheadAttention: _attention,
    nn.SiLU: _no_params(TorchOp.SILU), nn.ReLU6: _hardtanh, nn.Hardtanh: _hardtanh,
    nn.GroupNorm: _group_norm, nn.LSTM: _lstm,
}


def module_op(module: nn.Module, call: Call):
    """(OpType, params) of a call of `module`."""
    convert = MODULES.get(type(module))
    if convert is None:
        raise call.fail(f"{type(module).__name__} modules are not supported")
    return convert(module, call)


def module_state(module: nn.Module) -> dict:
    """The module's float parameters and buffers under torch's names, as float32 numpy arrays."""
    named = dict(module.named_parameters())
    named.update(module.named_buffers())
    return {name: t.detach().cpu().float().numpy().copy() for name, t in named.items()
            if t is not None and t.is_floating_point()}
