import numpy as np
import pytest

from flexflow.ops.spec import DimKind, ShapeError
from flexflow.ops.weight import Weight

from .op_check import check_op, check_partitioned, randn, run_op


@pytest.mark.parametrize("shape", [(5,), (3, 4), (2, 3, 4)])
def test_trainable_weight_outputs_itself_and_takes_the_gradient(shape):
    op = Weight(shape)
    check_op(op, [], [randn(*shape, seed=1)], lambda w: w * 1.0)


def test_frozen_weight_returns_no_gradient():
    w = randn(3, 4, seed=1)
    dy = randn(3, 4, seed=2)
    (y,), dxs, dws = run_op(Weight((3, 4), trainable=False), [], [w], [dy])
    np.testing.assert_array_equal(y, w)
    assert dxs == [] and dws == [None]


def test_output_is_a_copy_the_optimizer_cannot_change():
    w = randn(2, 3, seed=1)
    (y,), _, _ = run_op(Weight((2, 3)), [], [w])
    w += 1.0
    assert not np.shares_memory(y, w)


@pytest.mark.parametrize("dim", [0, 1, 2])
def test_every_dim_splits_as_a_parameter_dim(dim):
    op = Weight((4, 2, 6))
    assert op.dim_kinds([]) == (DimKind.PARAMETER,) * 3
    check_partitioned(op, [], [randn(4, 2, 6, seed=1)], dim)


def test_weight_specs_say_trainable_and_pick_the_default_initializer():
    (trained,) = Weight((3, 4)).weight_specs([])
    (frozen,) = Weight((3, 4), trainable=False).weight_specs([])
    assert (trained.initializer, trained.trainable) == ("glorot_uniform", True)
    assert (frozen.initializer, frozen.trainable) == ("zeros", False)


def test_rejects_inputs_and_empty_shapes():
    with pytest.raises(ShapeError, match="0 input"):
        Weight((3,)).infer([Weight((3,)).infer([])[0]])
    with pytest.raises(ShapeError, match=r"\(\)"):
        Weight(()).infer([])
