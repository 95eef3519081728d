import numpy as np
import pytest
import torch

from flexflow.ops.cast import Cast
from flexflow.ops.spec import DTYPES, ShapeError, TensorSpec

from .op_check import check_op, check_partitioned, ffmodel_with_input, layer_op, randn, run_op

TORCH_DTYPE = {"float32": torch.float32, "float64": torch.float64, "int32": torch.int32,
               "int64": torch.int64, "bool": torch.bool}


def values(dtype):
    """Numbers with fractions, negatives and zeros, in `dtype`."""
    x = np.round(randn(3, 4, seed=1) * 4, 1)
    x[0, :2] = 0
    return x.astype(dtype)


@pytest.mark.parametrize("target", DTYPES)
@pytest.mark.parametrize("source", DTYPES)
def test_cast_matches_torch(source, target):
    (y,) = check_op(Cast(target), [values(source)], [], lambda t: t.to(TORCH_DTYPE[target]))
    assert y.dtype == np.dtype(target)


def test_cast_gradient_into_an_integer_input_is_none():
    _, (dx,), _ = run_op(Cast("float32"), [values("int32")], [],
                         dys=[np.ones((3, 4), np.float32)])
    assert dx is None


@pytest.mark.parametrize("dim", [0, 1])
def test_cast_partitions_tile_the_output(dim):
    check_partitioned(Cast("float64"), [randn(4, 6, seed=1)], [], dim)


def test_cast_rejects_other_types():
    with pytest.raises(ShapeError, match="float16"):
        Cast("float16").infer([TensorSpec((2,))])


def test_ffmodel_cast_builds_the_layer():
    from flexflow.core import DataType

    ffmodel, x = ffmodel_with_input(2, 3)
    y = ffmodel.cast(x, DataType.DT_DOUBLE, name="c")
    assert y.data_type == DataType.DT_DOUBLE and isinstance(layer_op(y), Cast)
