import numpy as np
import pytest
import torch

from flexflow.ops.spec import DimKind, ShapeError, TensorSpec
from flexflow.ops.where import Where

from .op_check import (check_op, check_partitioned, ffmodel_with_input, layer_op, randn, run_op,
                       spec_of)

# (cond, a, b) shapes, each broadcast in turn
SHAPES = [((4, 6), (4, 6), (4, 6)), ((4, 6), (6,), (4, 1)), ((6,), (4, 6), (1,)),
          ((2, 1, 5), (3, 1), (2, 3, 5))]


def mask(*shape, seed=3):
    return randn(*shape, seed=seed) > 0


@pytest.mark.parametrize("cond_shape, a_shape, b_shape", SHAPES)
def test_where_matches_torch(cond_shape, a_shape, b_shape):
    xs = [mask(*cond_shape), randn(*a_shape, seed=1), randn(*b_shape, seed=2)]
    check_op(Where(), xs, [], torch.where)


def test_where_of_integers_passes_no_gradient():
    cond = np.array([[True, False]])
    a, b = np.array([[1, 2]], np.int32), np.array([[3, 4]], np.int32)
    (y,), dxs, _ = run_op(Where(), [cond, a, b], [], dys=[np.ones((1, 2), np.float32)])
    np.testing.assert_array_equal(y, [[1, 4]])
    assert y.dtype == np.int32 and dxs == [None, None, None]


@pytest.mark.parametrize("dim", [0, 1, 2])
def test_where_partitions_tile_the_output(dim):
    xs = [mask(2, 1, 5), randn(3, 1, seed=1), randn(2, 3, 5, seed=2)]
    assert Where().dim_kinds([spec_of(x) for x in xs]) == \
        (DimKind.SAMPLE,) + (DimKind.ATTRIBUTE,) * 2
    check_partitioned(Where(), xs, [], dim)


def test_where_rejects_bad_operands():
    with pytest.raises(ShapeError, match="bool"):
        Where().infer([TensorSpec((2,)), TensorSpec((2,)), TensorSpec((2,))])
    with pytest.raises(ShapeError, match="int32"):
        Where().infer([TensorSpec((2,), "bool"), TensorSpec((2,)), TensorSpec((2,), "int32")])
    with pytest.raises(ShapeError, match="broadcast"):
        Where().infer([TensorSpec((3,), "bool"), TensorSpec((2,)), TensorSpec((2,))])


def test_ffmodel_where_builds_the_layer():
    from flexflow.core import DataType

    ffmodel, x = ffmodel_with_input(2, 3)
    zero = ffmodel.create_constant([1], 0.0, DataType.DT_FLOAT)
    y = ffmodel.where(ffmodel.compare(x, zero, "less"), zero, x, name="w")
    assert y.dims == (2, 3) and isinstance(layer_op(y), Where)
