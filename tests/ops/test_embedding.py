import re

import numpy as np
import pytest
import torch

from flexflow.ops.base import Part
from flexflow.ops.embedding import Embedding
from flexflow.ops.spec import DimKind, ShapeError, TensorSpec

from .op_check import check_op, check_partitioned, randn

TORCH_AGGR = {
    "none": torch.nn.functional.embedding,
    "sum": lambda idx, w: torch.nn.functional.embedding_bag(idx, w, mode="sum"),
    "avg": lambda idx, w: torch.nn.functional.embedding_bag(idx, w, mode="mean"),
}


def indices(shape, vocab, dtype="int64", seed=0):
    # more indices than rows, so rows repeat and the gradient must accumulate duplicates
    return np.random.default_rng(seed).integers(0, vocab, size=shape).astype(dtype)


@pytest.mark.parametrize("aggr", list(TORCH_AGGR))
@pytest.mark.parametrize("dtype", ["int32", "int64"])
@pytest.mark.parametrize("shape", [(4, 6), (1, 1), (3, 9)])
def test_embedding_matches_torch(aggr, dtype, shape):
    op = Embedding(7, 5, aggr)
    check_op(op, [indices(shape, 7, dtype, seed=1)], [randn(7, 5, seed=2)], TORCH_AGGR[aggr])


def test_embedding_shapes_and_weight():
    x = [TensorSpec((4, 6), "int64")]
    assert Embedding(10, 3).infer(x) == (TensorSpec((4, 6, 3)),)
    assert Embedding(10, 3, "sum").infer(x) == (TensorSpec((4, 3)),)
    (weight,) = Embedding(10, 3, "avg").weight_specs(x)
    assert (weight.name, weight.shape, weight.initializer, weight.trainable, weight.fan_in,
            weight.fan_out) == ("weight", (10, 3), "glorot_uniform", True, 10, 3)


@pytest.mark.parametrize("aggr,dims", [("none", [0, 1, 2]), ("sum", [0, 1]), ("avg", [0, 1])])
def test_embedding_partitions_tile_the_output(aggr, dims):
    op = Embedding(9, 6, aggr)
    x = indices((4, 5), 9, seed=3)
    kinds = op.dim_kinds([TensorSpec(x.shape, "int64")])
    assert kinds[0] == DimKind.SAMPLE and kinds[-1] == DimKind.PARAMETER
    for dim in dims:
        check_partitioned(op, [x], [randn(9, 6, seed=4)], dim, parts=3)


@pytest.mark.parametrize("bad", [7, 12, -1])
def test_embedding_rejects_out_of_range_indices(bad):
    op = Embedding(7, 3)
    x = indices((2, 4), 7)
    x[1, 2] = bad
    spec = TensorSpec(x.shape, "int64")
    part = Part.whole([spec], op.infer([spec]))
    with pytest.raises(IndexError, match=rf"{bad}.*num_embeddings=7"):
        op.forward(np, [x], [randn(7, 3)], part)


@pytest.mark.parametrize("spec", [TensorSpec((4, 6)), TensorSpec((4,), "int64"),
                                  TensorSpec((2, 3, 4), "int32")])
def test_embedding_rejects_float_or_non_2d_input(spec):
    with pytest.raises(ShapeError, match=re.escape(str(spec.shape))):
        Embedding(10, 3).infer([spec])


@pytest.mark.parametrize("op,named", [(Embedding(10, 3, "max"), "'max'"),
                                      (Embedding(0, 3), "(0, 3)"), (Embedding(10, 0), "(10, 0)")])
def test_embedding_rejects_bad_arguments(op, named):
    with pytest.raises(ShapeError, match=re.escape(named)):
        op.infer([TensorSpec((4, 6), "int64")])
