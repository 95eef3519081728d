"""Layers behind the backend functions (FlexFlow HEAD's `keras.backend.internal`): batched
matrix product, exp, pow, reduce-sum and rsqrt as Keras layers."""

from __future__ import annotations

import math

from ..layers.base_layer import Layer


class _Unary(Layer):
    def compute_output_shape(self, input_shapes):
        return [self.expect_inputs(input_shapes, 1)[0]]


class Exp(_Unary):
    def __init__(self, **kwargs):
        super().__init__("exp", "Exp", **kwargs)

    def _emit(self, ffmodel, inputs, shared_op):
        return [ffmodel.exp(inputs[0], name=self.name)], None


class Rsqrt(_Unary):
    def __init__(self, **kwargs):
        super().__init__("rsqrt", "Rsqrt", **kwargs)

    def _emit(self, ffmodel, inputs, shared_op):
        return [ffmodel.rsqrt(inputs[0], name=self.name)], None


class Pow(_Unary):
    def __init__(self, a, **kwargs):
        super().__init__("pow", "Pow", **kwargs)
        self.a = float(a)

    def _emit(self, ffmodel, inputs, shared_op):
        return [ffmodel.pow(inputs[0], self.a, name=self.name)], None


class BatchMatmul(Layer):
    """(batch, ..., m, k) x (batch, ..., k, n) -> (batch, ..., m, n)."""

    def __init__(self, **kwargs):
        super().__init__("batch_matmul", "BatchMatmul", **kwargs)

    def compute_output_shape(self, input_shapes):
        a, b = self.expect_inputs(input_shapes, 2)
        if len(a) < 2 or len(a) != len(b) or a[:-2] != b[:-2] or a[-1] != b[-2]:
            raise ValueError(f"cannot multiply {a} by {b} (batch dims excluded): expected "
                             f"(..., m, k) and (..., k, n) with equal leading dims")
        return [a[:-1] + b[-1:]]

    def _emit(self, ffmodel, inputs, shared_op):
        return [ffmodel.batch_matmul(inputs[0], inputs[1], name=self.name)], None


class ReduceSum(Layer):
    """Sum over `axis` (an int or a list; the batch dim is 0 and cannot be reduced), as the
    FFModel mean times the number of summed elements."""

    def __init__(self, axis=None, keepdims=False, **kwargs):
        super().__init__("reduce_sum", "ReduceSum", **kwargs)
        self.axis = axis
        self.keepdims = bool(keepdims)

    def _axes(self, rank: int) -> tuple:
        """The reduced dims, batch included in the numbering (so all >= 1)."""
        axes = range(1, rank) if self.axis is None else (
            [self.axis] if isinstance(self.axis, int) else list(self.axis))
        resolved = sorted({a + rank if a < 0 else a for a in axes})
        if not resolved or resolved[0] < 1 or resolved[-1] >= rank:
            raise ValueError(f"axis {self.axis} must name sample dims 1..{rank - 1} (the batch "
                             f"dim 0 cannot be summed)")
        return tuple(resolved)

    def compute_output_shape(self, input_shapes):
        (shape,) = self.expect_inputs(input_shapes, 1)
        axes = [a - 1 for a in self._axes(len(shape) + 1)]
        if self.keepdims:
            return [tuple(1 if d in axes else n for d, n in enumerate(shape))]
        return [tuple(n for d, n in enumerate(shape) if d not in axes)]

    def _emit(self, ffmodel, inputs, shared_op):
        axes = self._axes(inputs[0].num_dims)
        mean = ffmodel.mean(inputs[0], axes, self.keepdims, name=f"{self.name}_mean")
        count = math.prod(inputs[0].dims[a] for a in axes)
        return [ffmodel.scalar_multiply(mean, float(count), name=self.name)], None
