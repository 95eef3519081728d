import pytest
import torch

from flexflow.ops.dense import Dense

from .op_check import check_op, randn

TORCH_ACT = {"none": lambda y: y, "relu": torch.relu, "sigmoid": torch.sigmoid,
             "tanh": torch.tanh, "gelu": torch.nn.functional.gelu, "elu": torch.nn.functional.elu}


@pytest.mark.parametrize("shape", [(4, 6), (3, 5, 6)])
@pytest.mark.parametrize("activation", list(TORCH_ACT))
@pytest.mark.parametrize("use_bias", [True, False])
def test_dense_matches_torch(shape, activation, use_bias):
    op = Dense(7, activation, use_bias)
    x = randn(*shape, seed=1)
    ws = [randn(7, shape[-1], seed=2)] + ([randn(7, seed=3)] if use_bias else [])

    def reference(x, kernel, bias=None):
        return TORCH_ACT[activation](torch.nn.functional.linear(x, kernel, bias))

    check_op(op, [x], ws, reference)


@pytest.mark.parametrize("dim", [0, 1, 2])
def test_dense_partitions_tile_the_output(dim):
    from .op_check import check_partitioned

    op = Dense(6, "relu")
    check_partitioned(op, [randn(4, 3, 5, seed=1)], [randn(6, 5, seed=2), randn(6, seed=3)], dim)
