"""Permute: reorder the dims of each sample (FFModel.transpose).

`dims` is Keras's form (the sample dims numbered from 1, batch excluded, e.g. (2, 1)) or
FlexFlow's (all dims with the batch first, e.g. (0, 2, 1)); the length tells them apart.
"""

from __future__ import annotations

from .base_layer import Layer


class Permute(Layer):
    def __init__(self, dims, input_shape=None, **kwargs):
        super().__init__("permute", "Permute", input_shape=input_shape, **kwargs)
        self.dims = tuple(int(d) for d in dims)

    def perm(self, rank: int) -> tuple:
        """The permutation of all `rank` dims, batch included."""
        if len(self.dims) == rank - 1 and sorted(self.dims) == list(range(1, rank)):
            return (0,) + self.dims
        if len(self.dims) == rank and self.dims[0] == 0 and sorted(self.dims) == list(range(rank)):
            return self.dims
        raise ValueError(f"dims {self.dims} is not a permutation of 1..{rank - 1} (or of "
                         f"0..{rank - 1} with 0 first)")

    def compute_output_shape(self, input_shapes):
        (shape,) = self.expect_inputs(input_shapes, 1)
        perm = self.perm(len(shape) + 1)
        full = (None,) + shape
        return [tuple(full[p] for p in perm[1:])]

    def output_dtype(self, input_dtypes):
        return input_dtypes[0]

    def _emit(self, ffmodel, inputs, shared_op):
        return [ffmodel.transpose(inputs[0], self.perm(inputs[0].num_dims), name=self.name)], None
