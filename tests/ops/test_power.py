import numpy as np
import pytest
import torch

from flexflow.ops.power import Power
from flexflow.ops.spec import ShapeError, TensorSpec

from .op_check import check_op, check_partitioned, ffmodel_with_input, layer_op, randn, run_op

SHAPES = [((4, 6), (4, 6)), ((4, 6), (6,)), ((2, 3, 5), (3, 1)), ((1, 5), (3, 1)),
          ((3, 1, 4), (1,))]


def positive(*shape, seed):
    return np.abs(randn(*shape, seed=seed)) + 0.5


@pytest.mark.parametrize("x_shape, e_shape", SHAPES)
def test_power_matches_torch(x_shape, e_shape):
    check_op(Power(), [positive(*x_shape, seed=1), randn(*e_shape, seed=2)], [], torch.pow)


def test_power_gradients_at_a_zero_base_and_a_zero_exponent_follow_torch():
    x = np.array([[0.0, 0.0, 2.0, -1.5]], np.float32)
    e = np.array([[2.0, 0.0, 0.0, 3.0]], np.float32)
    check_op(Power(), [x, e], [], torch.pow)


def test_negative_base_with_integer_exponent_has_a_real_value():
    x = np.array([[-2.0, -0.5]], np.float32)
    e = np.array([[3.0, 2.0]], np.float32)
    (y,), _, _ = run_op(Power(), [x, e], [])
    np.testing.assert_allclose(y, [[-8.0, 0.25]])


@pytest.mark.parametrize("dim", [0, 1, 2])
def test_power_partitions_tile_the_output(dim):
    check_partitioned(Power(), [positive(2, 3, 4, seed=1), randn(3, 1, seed=2)], [], dim)


def test_power_rejects_bad_operands():
    with pytest.raises(ShapeError, match="broadcast"):
        Power().infer([TensorSpec((2, 3)), TensorSpec((4,))])
    with pytest.raises(ShapeError, match="int32"):
        Power().infer([TensorSpec((2, 3)), TensorSpec((3,), "int32")])


def test_ffmodel_pow_takes_a_tensor_exponent():
    ffmodel, x = ffmodel_with_input(2, 3)
    e = ffmodel.create_weight([3])
    assert isinstance(layer_op(ffmodel.pow(x, e)), Power)
    assert ffmodel.pow(x, 2.0).owner_op.op_name.startswith("Pow_")
