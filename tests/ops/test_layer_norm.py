import pytest
import torch

from flexflow.ops.layer_norm import LayerNorm
from flexflow.ops.spec import DimKind, ShapeError, TensorSpec

from .op_check import check_op, check_partitioned, randn


@pytest.mark.parametrize("shape", [(4, 6), (2, 3, 8), (2, 3, 4, 5)])
@pytest.mark.parametrize("count", [1, 2])
@pytest.mark.parametrize("affine", [True, False])
@pytest.mark.parametrize("negative", [True, False])
def test_layer_norm_matches_torch(shape, count, affine, negative):
    rank = len(shape)
    axes = tuple(range(-count, 0)) if negative else tuple(range(rank - count, rank))
    op = LayerNorm(axes, affine, eps=1e-5)
    normalised = shape[rank - count:]
    x = randn(*shape, seed=1, scale=3.0) + 2.0
    ws = [randn(*normalised, seed=2) + 1.0, randn(*normalised, seed=3)] if affine else []

    def reference(x, gamma=None, beta=None):
        return torch.nn.functional.layer_norm(x, normalised, gamma, beta, eps=1e-5)

    check_op(op, [x], ws, reference)


def test_layer_norm_accepts_a_list_of_axes_in_any_order():
    op = LayerNorm([2, 1])
    assert op.axes == (2, 1) and hash(op)
    assert op.infer([TensorSpec((2, 3, 4))]) == (TensorSpec((2, 3, 4)),)
    assert [w.shape for w in op.weight_specs([TensorSpec((2, 3, 4))])] == [(3, 4), (3, 4)]


@pytest.mark.parametrize("dim", [0, 1, 2])
def test_layer_norm_partitions_tile_the_output(dim):
    op = LayerNorm((-1,))
    shape = (4, 3, 4, 5)
    assert op.dim_kinds([TensorSpec(shape)]) == (DimKind.SAMPLE, DimKind.ATTRIBUTE,
                                                 DimKind.ATTRIBUTE, None)
    check_partitioned(op, [randn(*shape, seed=1)], [randn(5, seed=2), randn(5, seed=3)], dim)


def test_layer_norm_normalised_dims_are_not_splittable():
    assert LayerNorm((1, 2)).dim_kinds([TensorSpec((2, 3, 4))]) == (DimKind.SAMPLE, None, None)
    assert LayerNorm((0, 1)).dim_kinds([TensorSpec((3, 4))]) == (None, None)


@pytest.mark.parametrize("axes", [(0,), (1,), (-2,), (2, 2), (3,), ()])
def test_layer_norm_rejects_axes_that_are_not_trailing(axes):
    with pytest.raises(ShapeError, match=r"\(2, 3, 4\)"):
        LayerNorm(axes).infer([TensorSpec((2, 3, 4))])


def test_layer_norm_rejects_integer_input():
    with pytest.raises(ShapeError, match="int32"):
        LayerNorm((-1,)).infer([TensorSpec((2, 3), "int32")])
