"""Embedding lookup, optionally aggregated over each row of indices (an embedding bag).

Input: integer indices (b, n). aggr "none" gives one vector per index, (b, n, dim); "sum" and
"avg" pool each row of n indices into one vector, (b, dim), as DLRM's sparse features do.

Splits: the batch (SAMPLE), the sequence dim when it is kept (ATTRIBUTE), and the embedding dim
(PARAMETER: each partition owns a column slice of the table). The bag dim n of "sum"/"avg" is
consumed whole by every partition, so no split needs a reduction of outputs.
"""

from __future__ import annotations

from dataclasses import dataclass

from . import vendor
from .base import Operator, expect_count
from .box import Box
from .spec import INT_DTYPES, DimKind, ShapeError, TensorSpec, WeightSpec

AGGR_MODES = ("none", "sum", "avg")


@dataclass(frozen=True)
class Embedding(Operator):
    num_embeddings: int
    embedding_dim: int
    aggr: str = "none"

    type_name = "Embedding"

    def infer(self, inputs):
        expect_count(inputs, 1, "embedding")
        (x,) = inputs
        if x.ndim != 2 or x.dtype not in INT_DTYPES:
            raise ShapeError(f"embedding input must be 2-d int32 or int64 indices (batch, n), got "
                             f"shape {x.shape} of {x.dtype}")
        if self.num_embeddings <= 0 or self.embedding_dim <= 0:
            raise ShapeError(f"embedding needs positive num_embeddings and embedding_dim, got "
                             f"({self.num_embeddings}, {self.embedding_dim})")
        if self.aggr not in AGGR_MODES:
            raise ShapeError(f"unknown embedding aggr {self.aggr!r}; expected one of {AGGR_MODES}")
        if self.aggr == "none":
            return (TensorSpec(x.shape + (self.embedding_dim,)),)
        return (TensorSpec((x.shape[0], self.embedding_dim)),)

    def weight_specs(self, inputs):
        return (WeightSpec(name="weight", shape=(self.num_embeddings, self.embedding_dim),
                           initializer="glorot_uniform", fan_in=self.num_embeddings,
                           fan_out=self.embedding_dim),)

    def forward(self, xp, xs, ws, part):
        (idx,) = xs
        (table,) = ws
        if vendor.holds_host_arrays(xp) or not part.is_fed(0):  # (else Load checked them)
            self.check_range(xp, idx)
        y = table[idx]
        if self.aggr == "sum":
            y = y.sum(axis=1)
        elif self.aggr == "avg":
            y = y.mean(axis=1)
        return [y], (idx, table.shape)

    def check_range(self, xp, idx) -> None:
        """Out-of-range indices would silently wrap (negative) or fault on a GPU; refuse them."""
        low, high = int(xp.min(idx)), int(xp.max(idx))
        if low < 0 or high >= self.num_embeddings:
            bad = low if low < 0 else high
            raise IndexError(f"embedding index {bad} is out of range for num_embeddings="
                             f"{self.num_embeddings} (valid: 0..{self.num_embeddings - 1})")

    def backward(self, xp, dys, saved, part):
        idx, table_shape = saved
        (dy,) = dys
        if self.aggr != "none":
            # every index of a bag receives the bag's gradient (divided by n for the mean)
            if self.aggr == "avg":
                dy = dy / idx.shape[1]
            dy = xp.broadcast_to(dy[:, None, :], idx.shape + dy.shape[-1:])
        dtable = xp.zeros(table_shape, dtype=dy.dtype)
        # rows repeat across indices, so a plain `dtable[idx] += dy` would drop duplicates
        xp.add.at(dtable, idx.reshape(-1), dy.reshape(-1, dy.shape[-1]))
        return [None], [dtable]

    def dim_kinds(self, inputs):
        if self.aggr == "none":
            return DimKind.SAMPLE, DimKind.ATTRIBUTE, DimKind.PARAMETER
        return DimKind.SAMPLE, DimKind.PARAMETER

    def input_box(self, out_box, inputs, index):
        if self.aggr == "none":
            return Box(out_box.bounds[:2])
        return Box((out_box.bounds[0], (0, inputs[0].shape[1])))

    def weight_box(self, out_box, inputs, index):
        return Box(((0, self.num_embeddings), out_box.bounds[-1]))

    def flops(self, inputs):
        # a lookup is data movement; only the bag reduction does arithmetic
        return 0 if self.aggr == "none" else inputs[0].size * self.embedding_dim
