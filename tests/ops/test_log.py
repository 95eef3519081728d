import numpy as np
import pytest
import torch

from flexflow.ops.log import Log

from .op_check import check_op, check_partitioned, randn, run_op


def positive(*shape, seed=1):
    return np.abs(randn(*shape, seed=seed)) + 0.1


@pytest.mark.parametrize("shape", [(4, 6), (2, 3, 5), (2, 3, 2, 4)])
def test_log_matches_torch(shape):
    check_op(Log(), [positive(*shape)], [], torch.log)


def test_log_of_zero_and_negatives_is_torch_s_inf_and_nan_without_warnings(recwarn):
    x = np.array([[0.0, -1.0, 1.0]], np.float32)
    (y,), (dx,), _ = run_op(Log(), [x], [], dys=[np.ones_like(x)])
    np.testing.assert_array_equal(y, torch.log(torch.tensor(x)).numpy())
    np.testing.assert_array_equal(dx, [[np.inf, -1.0, 1.0]])
    assert not recwarn.list


@pytest.mark.parametrize("dim", [0, 1, 2])
def test_log_partitions_tile_the_output(dim):
    check_partitioned(Log(), [positive(4, 2, 6)], [], dim)
