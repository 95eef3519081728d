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
TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)  # d erf(x) / dx = TWO_OVER_SQRT_PI * exp(-x^2)
_SERIES_TERMS = 16  # the 16th term is below 2e-15 for |x| < 1
_ERFC_FIT = (-1.26551223, 1.00002368, 0.37409196, 0.09678418, -0.18628806, 0.27886807,
             -1.13520398, 1.48851587, -0.82215223, 0.17087277)


def erf(xp, x):
    """The error function of a float array, in its dtype, to within about one float32 ulp.

    numpy has no erf, and kernels must not import scipy or cupyx, so it is computed here, in
    float64 and rounded once: the Maclaurin series below |x| = 1, and above it 1 - erfc(|x|)
    with Numerical Recipes' Chebyshev fit of erfc (fractional error < 1.2e-7 of erfc <= 0.16, so
    < 2e-8 of erf). GELU and the Erf operator both use it.
    """
    x64 = x.astype("float64")
    x2 = x64 * x64
    term = x64
    series = x64
    for n in range(1, _SERIES_TERMS):
        term = term * (-x2 / n)
        series = series + term / (2 * n + 1)
    a = xp.abs(x64)
    t = 1.0 / (1.0 + 0.5 * a)
    poly = _ERFC_FIT[-1]
    for c in reversed(_ERFC_FIT[:-1]):
        poly = c + t * poly
    erfc = t * xp.exp(-x2 + poly)
    y = xp.where(a < 1.0, TWO_OVER_SQRT_PI * series, xp.sign(x64) * (1.0 - erfc))
    return y.astype(x.dtype, copy=False)


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
