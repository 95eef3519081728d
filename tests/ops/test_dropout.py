import numpy as np
import pytest
import torch

from flexflow.ops.dropout import Dropout
from flexflow.ops.spec import DimKind, ShapeError, TensorSpec

from .op_check import check_op, check_partitioned, randn, run_op, spec_of


@pytest.mark.parametrize("rate", [0.1, 0.3, 0.7])
def test_dropout_zeroes_about_rate_and_scales_kept_values_exactly(rate):
    x = np.abs(randn(64, 40, 8, seed=1)) + 0.1  # no zeros of its own
    (y,), _, _ = run_op(Dropout(rate, seed=5), [x], [], seed=11)
    dropped = y == 0
    assert abs(dropped.mean() - rate) < 0.01
    np.testing.assert_array_equal(y[~dropped], x[~dropped] * np.float32(1.0 / (1.0 - rate)))


@pytest.mark.parametrize("shape", [(8, 16), (4, 5, 6), (2, 3, 4, 5)])
@pytest.mark.parametrize("rate", [0.25, 0.5])
def test_dropout_backward_matches_torch_with_the_same_mask(shape, rate):
    op = Dropout(rate, seed=3)
    x = randn(*shape, seed=1)
    (y,), _, _ = run_op(op, [x], [], seed=2)
    mask = torch.tensor((y != 0).astype(np.float32))
    check_op(op, [x], [], lambda t: t * mask / (1.0 - rate), seed=2)


def test_dropout_rate_zero_and_inference_are_identity():
    x = randn(4, 6, seed=1)
    check_op(Dropout(0.0, seed=1), [x], [], lambda t: t * 1.0)
    check_op(Dropout(0.5, seed=1), [x], [], lambda t: t * 1.0, training=False)


def test_dropout_mask_depends_on_both_seeds():
    x = np.ones((32, 32), np.float32)

    def mask(op_seed, part_seed):
        return run_op(Dropout(0.5, seed=op_seed), [x], [], seed=part_seed)[0][0] == 0

    assert (mask(0, 0) == mask(0, 0)).all()
    for other in (mask(0, 1), mask(1, 0)):
        assert 0.3 < (other != mask(0, 0)).mean() < 0.7


@pytest.mark.parametrize("shape", [(6, 5), (4, 6, 5), (2, 4, 3, 6)])
def test_dropout_every_partition_draws_the_same_mask(shape):
    op = Dropout(0.4, seed=9)
    x = randn(*shape, seed=1)
    kinds = op.dim_kinds([spec_of(x)])
    assert kinds == (DimKind.SAMPLE,) + (DimKind.ATTRIBUTE,) * (len(shape) - 1)
    for dim in range(len(shape)):
        for parts in (2, 3):
            check_partitioned(op, [x], [], dim, parts=parts, seed=4)


@pytest.mark.parametrize("rate", [-0.1, 1.0, 1.5])
def test_dropout_rejects_bad_rate(rate):
    with pytest.raises(ShapeError, match="rate"):
        Dropout(rate).infer([TensorSpec((4, 6))])


def test_dropout_rejects_bad_inputs_naming_them():
    with pytest.raises(ShapeError, match="int32"):
        Dropout(0.5).infer([TensorSpec((4, 6), "int32")])
    with pytest.raises(ShapeError, match="2"):
        Dropout(0.5).infer([TensorSpec((4, 6)), TensorSpec((4, 6))])
