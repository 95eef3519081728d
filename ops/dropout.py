"""Inverted dropout: in training, zero each element with probability `rate` and scale the kept ones
by 1 / (1 - rate), so inference is the identity.

The keep/drop decision for an element is a hash of (op seed, iteration seed, the element's index in
the whole tensor), not a draw from a stateful generator. Any partition can therefore compute its own
piece of the mask from its box alone, and every split of the tensor, on any device and with either
array module, drops exactly the same elements as the single-device run; and backward draws the
mask again instead of keeping it.
"""

from __future__ import annotations

from dataclasses import dataclass

from .base import Kept, Operator, expect_count, expect_float
from .elementwise import independent_dim_kinds
from .spec import ShapeError, TensorSpec

_MASK32 = 0xFFFFFFFF


def _mix32(xp, h):
    """A bijective avalanche of uint32 words (MurmurHash3's 32-bit finalizer): every input bit
    flips each output bit with probability about 1/2, so consecutive indices look independent."""
    h = h ^ (h >> xp.uint32(16))
    h = h * xp.uint32(0x85EBCA6B)
    h = h ^ (h >> xp.uint32(13))
    h = h * xp.uint32(0xC2B2AE35)
    return h ^ (h >> xp.uint32(16))


def global_flat_index(xp, box, shape):
    """uint32 array (shaped like `box`) of each element's row-major index in a tensor of `shape`,
    modulo 2**32."""
    index = xp.zeros((1,) * len(shape), dtype=xp.uint32)
    stride = 1
    for d in reversed(range(len(shape))):
        start, stop = box.bounds[d]
        along = xp.arange(start, stop, dtype=xp.uint32) * xp.uint32(stride & _MASK32)
        index = index + along.reshape((-1,) + (1,) * (len(shape) - 1 - d))
        stride *= shape[d]
    return index


def uniform_hash(xp, seeds, box, shape):
    """Uniform float32 numbers in [0, 1) for the elements of `box`, a pure function of `seeds` and
    each element's global index."""
    keys = _mix32(xp, xp.asarray([s & _MASK32 for s in seeds], dtype=xp.uint32))
    h = global_flat_index(xp, box, shape)
    for k in range(len(seeds)):
        h = _mix32(xp, h ^ keys[k])
    # The top 24 bits convert to float32 exactly.
    return (h >> xp.uint32(8)).astype(xp.float32) * (1.0 / (1 << 24))


def kept_factors(xp, rate: float, seeds, box, shape, dtype):
    """Inverted dropout's factor of each element of `box` in a tensor of `shape`: 0 for a
    dropped one, 1 / (1 - rate) for a kept one, in `dtype` (so that x * factor keeps x's), a
    pure function of `seeds` and each element's global index (`uniform_hash`)."""
    return (uniform_hash(xp, seeds, box, shape) >= rate).astype(dtype) * (1.0 / (1.0 - rate))


@dataclass(frozen=True)
class Dropout(Operator):
    rate: float
    seed: int = 0

    type_name = "Dropout"

    def infer(self, inputs):
        expect_count(inputs, 1, "dropout")
        expect_float(inputs, 0, "dropout input")
        if not 0.0 <= self.rate < 1.0:
            raise ShapeError(f"dropout rate must be in [0, 1), got {self.rate}")
        return (TensorSpec(inputs[0].shape, inputs[0].dtype),)

    def forward(self, xp, xs, ws, part):
        (x,) = xs
        factors = self._factors(xp, part, x.dtype)
        return [x if factors is None else x * factors], None

    def _factors(self, xp, part, dtype):
        """This partition's `kept_factors`; None where nothing is dropped (inference, rate 0)."""
        if not part.training or self.rate == 0:
            return None
        return kept_factors(xp, self.rate, (self.seed, part.seed), part.out_box,
                            part.in_shapes[0], dtype)

    def kept_for_backward(self, inputs):
        """Nothing: backward draws the same factors again from the same seeds and box."""
        return Kept()

    def backward(self, xp, dys, saved, part):
        (dy,) = dys
        factors = self._factors(xp, part, dy.dtype)
        return [dy if factors is None else dy * factors], []

    def dim_kinds(self, inputs):
        return independent_dim_kinds(inputs[0].ndim)
