import numpy as np
import pytest
import torch

from flexflow.ops.compare import COMPARISONS, Compare
from flexflow.ops.spec import DimKind, ShapeError, TensorSpec

from .op_check import check_op, check_partitioned, ffmodel_with_input, layer_op, randn, spec_of

TORCH = {"less": torch.lt, "less_equal": torch.le, "greater": torch.gt,
         "greater_equal": torch.ge, "equal": torch.eq}
SHAPES = [((4, 6), (4, 6)), ((4, 6), (6,)), ((2, 3, 5), (3, 1)), ((1, 5), (3, 1))]


def with_ties(a_shape, b_shape):
    """Operands on a coarse grid, so equal elements (the ties <= and == care about) occur."""
    return [np.round(randn(*a_shape, seed=1)), np.round(randn(*b_shape, seed=2))]


@pytest.mark.parametrize("a_shape, b_shape", SHAPES)
@pytest.mark.parametrize("func", sorted(COMPARISONS))
def test_compare_matches_torch(func, a_shape, b_shape):
    op = Compare(func)
    assert op.type_name == COMPARISONS[func]
    (y,) = check_op(op, with_ties(a_shape, b_shape), [], TORCH[func])
    assert y.dtype == np.bool_


def test_compare_of_integers_has_no_gradient():
    from .op_check import run_op

    a = np.array([[1, 5, 3]], np.int64)
    b = np.array([[2, 5, 1]], np.int64)
    (y,), dxs, _ = run_op(Compare("less_equal"), [a, b], [], dys=[np.ones((1, 3), np.float32)])
    np.testing.assert_array_equal(y, [[True, True, False]])
    assert dxs == [None, None]


@pytest.mark.parametrize("dim", [0, 1, 2])
def test_compare_partitions_tile_the_output(dim):
    op = Compare("greater")
    xs = with_ties((2, 3, 4), (3, 1))
    assert op.dim_kinds([spec_of(x) for x in xs]) == (DimKind.SAMPLE,) + (DimKind.ATTRIBUTE,) * 2
    check_partitioned(op, xs, [], dim)


def test_compare_rejects_bad_operands():
    with pytest.raises(ShapeError, match="broadcast"):
        Compare("less").infer([TensorSpec((2, 3)), TensorSpec((4,))])
    with pytest.raises(ShapeError, match="int32"):
        Compare("less").infer([TensorSpec((2, 3)), TensorSpec((3,), "int32")])
    with pytest.raises(ShapeError, match="bool"):
        Compare("less").infer([TensorSpec((2,), "bool"), TensorSpec((2,), "bool")])
    with pytest.raises(ShapeError, match="unknown comparison"):
        Compare("lt").infer([TensorSpec((2,)), TensorSpec((2,))])


def test_ffmodel_compare_builds_a_bool_tensor():
    from flexflow.core import DataType

    ffmodel, x = ffmodel_with_input(2, 3)
    y = ffmodel.create_tensor([3], DataType.DT_FLOAT)
    mask = ffmodel.compare(x, y, "less", name="lt")
    assert mask.dims == (2, 3) and mask.data_type == DataType.DT_BOOLEAN
    assert isinstance(layer_op(mask), Compare)
