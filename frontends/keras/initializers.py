"""Keras initializers; `ffhandle` is the FlexFlow initializer they stand for.

A `seed=None` initializer gets the next seed of a per-process sequence, so a script draws the same
weights on every run (FlexFlow's runtime is deterministic too); `backend.clear_session()` starts the
sequence again, as Keras's resets its seed generator, so two identical scripts run one after the
other in a process initialise identically. `GlorotUniform(seed=None)` leaves
the choice to FFModel's default, which seeds each layer from its position and `--seed`.
"""

from __future__ import annotations

import itertools

from flexflow.core import (GlorotUniformInitializer, NormInitializer, UniformInitializer,
                           ZeroInitializer)
from flexflow.initializers import OnesInitializer

from .identifiers import resolve

_FIRST_SEED = 1000
_seeds = itertools.count(_FIRST_SEED)


def _seed(seed) -> int:
    return next(_seeds) if seed is None else int(seed)


def reset_seeds() -> None:
    """Start the sequence of seeds that `seed=None` initializers draw from afresh."""
    global _seeds
    _seeds = itertools.count(_FIRST_SEED)


class Initializer:
    def __init__(self, ffhandle=None):
        self._ffhandle = ffhandle

    @property
    def ffhandle(self):
        return self._ffhandle


class DefaultInitializer(Initializer):
    """FFModel's default for the weight's role (Glorot uniform kernels, zero biases)."""


class Zeros(Initializer):
    def __init__(self):
        super().__init__(ZeroInitializer())


class Ones(Initializer):
    def __init__(self):
        super().__init__(OnesInitializer())


class GlorotUniform(Initializer):
    def __init__(self, seed=None):
        super().__init__(None if seed is None else GlorotUniformInitializer(int(seed)))


class RandomUniform(Initializer):
    def __init__(self, minval=-0.05, maxval=0.05, seed=None):
        super().__init__(UniformInitializer(_seed(seed), minval, maxval))


class RandomNormal(Initializer):
    def __init__(self, mean=0.0, stddev=0.05, seed=None):
        if stddev < 0:
            raise ValueError(f"RandomNormal: stddev must not be negative, got {stddev}")
        super().__init__(NormInitializer(_seed(seed), mean, stddev))


_BY_NAME = {"glorot_uniform": GlorotUniform, "zeros": Zeros, "zero": Zeros, "ones": Ones,
            "random_uniform": RandomUniform, "uniform": RandomUniform,
            "random_normal": RandomNormal, "normal": RandomNormal}


def get(identifier) -> Initializer:
    """An Initializer from an instance, a name in `_BY_NAME`, or None (FFModel's default)."""
    if identifier is None:
        return DefaultInitializer()
    return resolve(identifier, Initializer, _BY_NAME, "unknown initializer")
