"""Weight initializers (reference 2.8), run on the host, seeded and deterministic.

A layer given no initializer gets the default its weights declare (`WeightSpec.initializer`), as
FlexFlow chooses them: Glorot uniform for kernels and embeddings (seeded from the model seed and
the layer's guid, so runs repeat exactly), zeros for biases, ones for normalisation scales and
running variances.
"""

from __future__ import annotations

import numpy as np

from .ops.spec import WeightSpec


class Initializer:
    def __call__(self, spec: WeightSpec) -> np.ndarray:
        raise NotImplementedError


class GlorotUniformInitializer(Initializer):
    def __init__(self, seed: int = 0):
        self.seed = int(seed)

    def __call__(self, spec):
        limit = np.sqrt(6.0 / (spec.fan_in + spec.fan_out))
        return np.random.default_rng(self.seed).uniform(-limit, limit, spec.shape).astype(
            np.float32)


class ZeroInitializer(Initializer):
    def __call__(self, spec):
        return np.zeros(spec.shape, np.float32)


class OnesInitializer(Initializer):
    def __call__(self, spec):
        return np.ones(spec.shape, np.float32)


class UniformInitializer(Initializer):
    def __init__(self, seed: int = 0, minv: float = -0.05, maxv: float = 0.05):
        if minv > maxv:
            raise ValueError(f"UniformInitializer: minv {minv} is greater than maxv {maxv}")
        self.seed, self.minv, self.maxv = int(seed), float(minv), float(maxv)

    def __call__(self, spec):
        return np.random.default_rng(self.seed).uniform(self.minv, self.maxv, spec.shape).astype(
            np.float32)


class NormInitializer(Initializer):
    def __init__(self, seed: int = 0, mean: float = 0.0, stddev: float = 1.0, **legacy):
        self.seed = int(seed)
        self.mean = float(legacy.pop("meanv", mean))  # r21.09 spelled it meanv
        self.stddev = float(stddev)
        if legacy:
            raise TypeError(f"NormInitializer got unknown arguments {sorted(legacy)}")

    def __call__(self, spec):
        return np.random.default_rng(self.seed).normal(self.mean, self.stddev, spec.shape).astype(
            np.float32)


class ArrayInitializer(Initializer):
    """(ours) A given value, e.g. a weight imported from another framework, or the value
    `Parameter.set_weights` assigned before compile()."""

    def __init__(self, array):
        self.array = np.array(array, dtype=np.float32)  # a copy: later edits of the caller's
        # array must not change the weight

    def __call__(self, spec):
        if self.array.shape != tuple(spec.shape):
            raise ValueError(f"ArrayInitializer: weight {spec.name} has shape {spec.shape}, the "
                             f"array has {self.array.shape}")
        return self.array.copy()


def default_initializer(spec: WeightSpec, seed: int) -> Initializer:
    if spec.initializer == "glorot_uniform":
        return GlorotUniformInitializer(seed)
    if spec.initializer == "ones":
        return OnesInitializer()
    return ZeroInitializer()
