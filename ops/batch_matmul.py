"""Batched matrix product: A (..., m, k) @ B (..., k, n) -> (..., m, n), equal leading dims.

Splits: the leading dims (the first is the batch, SAMPLE; the others ATTRIBUTE), the rows m of A
and the columns n of B (both ATTRIBUTE: neither operand is a weight). The contraction dim k is not
an output dim, so no split ever needs a reduction of outputs; a partition of (m, n) reads a row
band of A and a column band of B, and the executor sums the partial input gradients.
"""

from __future__ import annotations

from dataclasses import dataclass

from .base import Operator, float_operands
from .spec import DimKind, ShapeError, TensorSpec
from .vendor import matmul


@dataclass(frozen=True)
class BatchMatmul(Operator):
    """`a_seq_length_dim`/`b_seq_length_dim` name the sequence dims FlexFlow truncates when
    `forward(seq_length=...)` is given. They are recorded only; no truncation is applied yet."""

    a_seq_length_dim: int | None = None
    b_seq_length_dim: int | None = None

    type_name = "BatchMatmul"

    def infer(self, inputs):
        a, b = float_operands(inputs, "batch_matmul", ("A", "B"))
        if (a.ndim < 3 or a.ndim != b.ndim or a.shape[:-2] != b.shape[:-2]
                or a.shape[-1] != b.shape[-2]):
            raise ShapeError(f"batch_matmul expects A (..., m, k) and B (..., k, n) of rank >= 3 "
                             f"with equal leading dims, got A {a.shape} and B {b.shape}")
        return (TensorSpec(a.shape[:-1] + b.shape[-1:], a.dtype),)

    def forward(self, xp, xs, ws, part):
        a, b = xs
        return [matmul(xp, a, b)], (a, b)

    def backward(self, xp, dys, saved, part):
        a, b = saved
        (dy,) = dys
        return [matmul(xp, dy, b.swapaxes(-1, -2)), matmul(xp, a.swapaxes(-1, -2), dy)], []

    def dim_kinds(self, inputs):
        rank = inputs[0].ndim
        return (DimKind.SAMPLE,) + (DimKind.ATTRIBUTE,) * (rank - 1)

    def input_box(self, out_box, inputs, index):
        k = inputs[0].shape[-1]
        if index == 0:
            return out_box.replace(out_box.ndim - 1, 0, k)
        return out_box.replace(out_box.ndim - 2, 0, k)

    def flops(self, inputs):
        a, b = inputs
        return 2 * a.size * b.shape[-1]
