"""Embedding: look up rows of a (input_dim, output_dim) table for integer indices
(FFModel.embedding).

By default the rows of each sample are summed, as FlexFlow's Keras Embedding does: input
(batch, input_length) -> output (batch, output_dim). `aggr` (ours) chooses: 'sum' (default),
'avg', or None for Keras's per-index output (batch, input_length, output_dim).
"""

from __future__ import annotations

from flexflow.core import AggrMode

from .. import initializers
from .base_layer import Layer, refuse

AGGR = {"sum": AggrMode.AGGR_MODE_SUM, "avg": AggrMode.AGGR_MODE_AVG,
        None: AggrMode.AGGR_MODE_NONE}


class Embedding(Layer):
    input_rank = 1
    can_share_weights = True

    def __init__(self, input_dim, output_dim, embeddings_initializer="uniform",
                 embeddings_regularizer=None, activity_regularizer=None,
                 embeddings_constraint=None, mask_zero=False, input_length=None, aggr="sum",
                 **kwargs):
        if input_length is not None and "input_shape" not in kwargs:
            kwargs["input_shape"] = (int(input_length),)
        kwargs.setdefault("dtype", "int32")
        super().__init__("embedding", "Embedding", **kwargs)
        refuse(self.name, embeddings_regularizer=embeddings_regularizer,
               activity_regularizer=activity_regularizer,
               embeddings_constraint=embeddings_constraint, mask_zero=mask_zero)
        if aggr not in AGGR:
            raise ValueError(f"layer '{self.name}': aggr must be one of {list(AGGR)}, got "
                             f"{aggr!r}")
        self.input_dim, self.output_dim = int(input_dim), int(output_dim)
        if self.input_dim <= 0 or self.output_dim <= 0:
            raise ValueError(f"layer '{self.name}': input_dim and output_dim must be positive")
        self.input_length = None if input_length is None else int(input_length)
        self.aggr = aggr
        self.embeddings_initializer = initializers.get(embeddings_initializer)

    def compute_output_shape(self, input_shapes):
        (shape,) = self.expect_inputs(input_shapes, 1)
        if len(shape) != 1:
            raise ValueError("Embedding needs 2-d integer inputs (batch, input_length)")
        if self.input_length is not None and shape[0] != self.input_length:
            raise ValueError(f"input_length={self.input_length} but the input has {shape[0]} "
                             f"indices per sample")
        return [shape + (self.output_dim,) if self.aggr is None else (self.output_dim,)]

    def output_dtype(self, input_dtypes):
        if input_dtypes[0] not in ("int32", "int64"):
            raise ValueError(f"Embedding needs int32 or int64 indices, got {input_dtypes[0]}")
        return "float32"

    def _emit(self, ffmodel, inputs, shared_op):
        t = ffmodel.embedding(inputs[0], self.input_dim, self.output_dim, AGGR[self.aggr],
                              shared_op, self.embeddings_initializer.ffhandle, name=self.name)
        return [t], t.owner_op
