"""Activation functions shared by fused activations (dense, conv2d) and the unary operators.

Each activation is a pair (forward, backward-from-saved); `saved` is what the backward needs,
chosen so no activation recomputes its forward. `activate`/`activate_backward` are the reference
kernels on arrays of `xp`; `aten_activate`/`aten_activate_backward` are the same activations on
torch tensors (ops/vendor.py), one ATen kernel each way.
"""

from __future__ import annotations

import math

ACTIVATIONS = ("none", "relu", "sigmoid", "tanh", "gelu", "elu")

_SQRT_HALF = 1.0 / math.sqrt(2.0)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)


def erf(xp, x):
    """Error function to float32 precision (Abramowitz & Stegun 7.1.26, |error| < 1.5e-7).

    numpy has no erf, and kernels must not import scipy or cupyx, so it is computed here.
    """
    sign = xp.sign(x)
    a = xp.abs(x)
    t = 1.0 / (1.0 + 0.3275911 * a)
    poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027
                                                                          + t * 1.061405429))))
    return (sign * (1.0 - poly * xp.exp(-a * a))).astype(x.dtype, copy=False)


def activate(xp, mode: str, x, overwrite: bool = False):
    """Returns (y, saved). With `overwrite` (x is a fresh result nothing else reads) a ReLU
    runs in place, one pass over memory."""
    if mode == "none":
        return x, None
    if mode == "relu":
        y = xp.maximum(x, 0, out=x if overwrite else None)
        return y, y
    if mode == "sigmoid":
        y = 1.0 / (1.0 + xp.exp(-x))
        return y.astype(x.dtype, copy=False), y
    if mode == "tanh":
        y = xp.tanh(x)
        return y, y
    if mode == "gelu":
        return (0.5 * x * (1.0 + erf(xp, x * _SQRT_HALF))).astype(x.dtype, copy=False), x
    if mode == "elu":
        y = xp.where(x > 0, x, xp.expm1(xp.minimum(x, 0))).astype(x.dtype, copy=False)
        return y, y
    raise ValueError(f"unknown activation {mode!r}; expected one of {ACTIVATIONS}")


def activate_backward(xp, mode: str, dy, saved):
    if mode == "none":
        return dy
    if mode == "relu":  # zero where the input was not positive, whatever dy is, as PyTorch's
        return xp.where(saved > 0, dy, dy.dtype.type(0))
    if mode == "sigmoid":
        return dy * saved * (1.0 - saved)
    if mode == "tanh":
        return dy * (1.0 - saved * saved)
    if mode == "gelu":
        x = saved
        cdf = 0.5 * (1.0 + erf(xp, x * _SQRT_HALF))
        pdf = _INV_SQRT_2PI * xp.exp(-0.5 * x * x)
        return (dy * (cdf + x * pdf)).astype(dy.dtype, copy=False)
    if mode == "elu":
        return dy * xp.where(saved > 0, 1.0, saved + 1.0).astype(dy.dtype, copy=False)
    raise ValueError(f"unknown activation {mode!r}; expected one of {ACTIVATIONS}")


def aten_activate(aten, mode: str, t, overwrite: bool = False):
    """`activate` on a torch tensor; returns (y, saved). With `overwrite` the activations whose
    backward needs only their result run in place."""
    torch = aten.torch
    if mode == "none":
        return t, None
    if mode == "gelu":
        return torch.nn.functional.gelu(t), t
    if mode == "relu":
        y = torch.relu_(t) if overwrite else torch.relu(t)
    elif mode == "sigmoid":
        y = torch.sigmoid_(t) if overwrite else torch.sigmoid(t)
    elif mode == "tanh":
        y = torch.tanh_(t) if overwrite else torch.tanh(t)
    elif mode == "elu":
        y = torch.nn.functional.elu(t, inplace=overwrite)
    else:
        raise ValueError(f"unknown activation {mode!r}; expected one of {ACTIVATIONS}")
    return y, y


def aten_activate_backward(aten, mode: str, dy, saved):
    """`activate_backward` on torch tensors."""
    ops = aten.ops
    if mode == "none":
        return dy
    if mode == "relu":
        return ops.threshold_backward(dy, saved, 0)
    if mode == "sigmoid":
        return ops.sigmoid_backward(dy, saved)
    if mode == "tanh":
        return ops.tanh_backward(dy, saved)
    if mode == "gelu":
        return ops.gelu_backward(dy, saved)
    if mode == "elu":
        return ops.elu_backward(dy, 1.0, 1.0, 1.0, True, saved)
    raise ValueError(f"unknown activation {mode!r}; expected one of {ACTIVATIONS}")


def check_activation(mode: str) -> None:
    from .spec import ShapeError

    if mode not in ACTIVATIONS:
        raise ShapeError(f"unknown activation {mode!r}; expected one of {ACTIVATIONS}")
