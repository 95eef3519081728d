import numpy as np
import pytest
import torch

from flexflow.ops.erf import Erf

from .op_check import check_op, check_partitioned, randn, run_op


@pytest.mark.parametrize("shape", [(4, 6), (2, 3, 5), (2, 3, 2, 4)])
def test_erf_matches_torch(shape):
    check_op(Erf(), [randn(*shape, seed=1, scale=2.0)], [], torch.erf)


def test_erf_is_accurate_across_its_range():
    x = np.linspace(-6, 6, 2001, dtype=np.float32).reshape(1, -1)
    (y,), _, _ = run_op(Erf(), [x], [])
    np.testing.assert_allclose(y, torch.erf(torch.tensor(x)).numpy(), rtol=2.5e-7, atol=0)


@pytest.mark.parametrize("dim", [0, 1, 2])
def test_erf_partitions_tile_the_output(dim):
    check_partitioned(Erf(), [randn(4, 2, 6, seed=1)], [], dim)
