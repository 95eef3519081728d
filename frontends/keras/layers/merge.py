"""Layers that combine several tensors: Concatenate, and the element-wise Add, Subtract,
Multiply, Maximum and Minimum (with broadcasting of size-1 dims), plus their functional forms.

`axis` counts the batch dim as 0, so axis=1 is the first sample dim (the channels of an NCHW
tensor); it defaults to 1, as FlexFlow's `concatenate` does.
"""

from __future__ import annotations

import numpy as np

from .base_layer import Layer


class _Merge(Layer):
    min_inputs, max_inputs = 2, None

    def compute_output_shape(self, input_shapes):
        n = len(input_shapes)
        if n < self.min_inputs or (self.max_inputs is not None and n > self.max_inputs):
            expected = (f"exactly {self.min_inputs}" if self.max_inputs == self.min_inputs
                        else f"at least {self.min_inputs}")
            raise ValueError(f"expects {expected} input tensors, got {n}")
        return [self.merged_shape(input_shapes)]

    def output_dtype(self, input_dtypes):
        if len(set(input_dtypes)) != 1:
            raise ValueError(f"inputs must have one dtype, got {input_dtypes}")
        return input_dtypes[0]

    def merged_shape(self, shapes: list[tuple]) -> tuple:
        raise NotImplementedError


class Concatenate(_Merge):
    def __init__(self, axis=1, **kwargs):
        super().__init__("concatenate", "Concatenate", **kwargs)
        self.axis = int(axis)

    def _sample_axis(self, rank: int) -> int:
        """The axis within a sample (0-based, batch excluded) for tensors of `rank` dims."""
        axis = self.axis + rank if self.axis < 0 else self.axis
        if not 1 <= axis < rank:
            raise ValueError(f"axis {self.axis} is not a sample dim of {rank}-d tensors (the "
                             f"batch dim 0 cannot be concatenated)")
        return axis - 1

    def merged_shape(self, shapes):
        if len({len(s) for s in shapes}) != 1:
            raise ValueError("inputs must have the same number of dims")
        axis = self._sample_axis(len(shapes[0]) + 1)
        rest = {s[:axis] + s[axis + 1:] for s in shapes}
        if len(rest) != 1:
            raise ValueError(f"inputs must match in every dim but axis {self.axis}")
        first = shapes[0]
        return first[:axis] + (sum(s[axis] for s in shapes),) + first[axis + 1:]

    def _emit(self, ffmodel, inputs, shared_op):
        axis = self._sample_axis(inputs[0].num_dims) + 1
        return [ffmodel.concat(inputs, axis, name=self.name)], None


class _ElementWise(_Merge):
    """Inputs combined pairwise, left to right, by FFModel's `ff_method`. The layer type is the
    class name, and default layer names its lower case ("add", "add_1", ...)."""

    ff_method = ""

    def __init__(self, **kwargs):
        super().__init__(type(self).__name__.lower(), type(self).__name__, **kwargs)

    def merged_shape(self, shapes):
        try:
            return tuple(np.broadcast_shapes(*shapes))
        except ValueError:
            raise ValueError(f"input shapes {shapes} do not broadcast") from None

    def _emit(self, ffmodel, inputs, shared_op):
        op = getattr(ffmodel, self.ff_method)
        out = inputs[0]
        for k, other in enumerate(inputs[1:]):
            name = self.name if k == len(inputs) - 2 else f"{self.name}_{k}"
            out = op(out, other, name=name)
        return [out], None


class Add(_ElementWise):
    ff_method = "add"


class Subtract(_ElementWise):
    """The first input minus the second."""

    ff_method = "subtract"
    max_inputs = 2


class Multiply(_ElementWise):
    ff_method = "multiply"


class Maximum(_ElementWise):
    ff_method = "max"


class Minimum(_ElementWise):
    ff_method = "min"


def concatenate(input_tensors, axis=1, _axis=None, **kwargs):
    return Concatenate(axis if _axis is None else _axis, **kwargs)(input_tensors)


def _functional(layer: type):
    """Keras's functional form of an element-wise merge layer: `layer(**kwargs)` applied to the
    list of input tensors."""
    def apply(input_tensors, **kwargs):
        return layer(**kwargs)(input_tensors)
    apply.__name__ = apply.__qualname__ = layer.__name__.lower()
    apply.__doc__ = f"`{layer.__name__}(**kwargs)(input_tensors)`."
    return apply


add, subtract, multiply, maximum, minimum = map(_functional, (Add, Subtract, Multiply, Maximum,
                                                              Minimum))
