"""The Keras backend module: `backend()` is 'flexflow'. The tensor functions build layers (see
`internal.py`); importing this module prints FlexFlow's `Using flexflow backend.` to stderr."""

import sys

from ..initializers import reset_seeds
from ..layers.base_layer import reset_names
from .internal import BatchMatmul, Exp, Pow, ReduceSum, Rsqrt

print("Using flexflow backend.", file=sys.stderr)


def backend() -> str:
    return "flexflow"


def get_value(x):
    return x


def set_value(x, value) -> None:
    """A no-op, as in FlexFlow: there are no backend variables to set."""


def clear_session() -> None:
    """Start default layer names (dense, dense_1, ... again) and the seeds of `seed=None`
    initializers afresh."""
    reset_names()
    reset_seeds()


def batch_dot(x, y, name=None):
    return BatchMatmul(name=name)([x, y])


def exp(x, name=None):
    return Exp(name=name)(x)


def pow(x, a, name=None):
    return Pow(a, name=name)(x)


def sum(x, axis=None, keepdims=False, name=None):
    return ReduceSum(axis, keepdims, name=name)(x)


def rsqrt(x, name=None):
    return Rsqrt(name=name)(x)
