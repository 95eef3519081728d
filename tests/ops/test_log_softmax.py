import numpy as np
import pytest
import torch

from flexflow.ops.log_softmax import LogSoftmax
from flexflow.ops.spec import DimKind, ShapeError, TensorSpec

from .op_check import (check_op, check_partitioned, ffmodel_with_input, layer_op, randn, run_op,
                       spec_of)

CASES = [((4, 6), -1), ((4, 6), 0), ((2, 3, 5), 1), ((2, 3, 4, 5), 2), ((2, 3, 4, 5), -3)]
IDS = [f"{shape}-axis{axis}" for shape, axis in CASES]


@pytest.mark.parametrize("shape, axis", CASES, ids=IDS)
def test_log_softmax_matches_torch(shape, axis):
    check_op(LogSoftmax(axis), [randn(*shape, seed=1, scale=3.0)], [],
             lambda x: torch.log_softmax(x, axis))


def test_log_softmax_stays_finite_where_log_of_softmax_does_not():
    x = np.array([[0.0, 1.0, 200.0], [1e4, 1e4 + 1, 1e4 + 2]], np.float32)
    (y,), _, _ = run_op(LogSoftmax(), [x], [])
    expected = torch.log_softmax(torch.tensor(x), -1).numpy()
    assert np.isfinite(y).all()
    with np.errstate(divide="ignore"):
        assert np.isinf(np.log(torch.softmax(torch.tensor(x), -1).numpy())).any()
    np.testing.assert_allclose(y, expected, rtol=1e-6, atol=1e-5)


@pytest.mark.parametrize("shape, axis", CASES, ids=IDS)
def test_log_softmax_splits_every_dim_but_its_axis(shape, axis):
    op = LogSoftmax(axis)
    x = randn(*shape, seed=1)
    kinds = op.dim_kinds([spec_of(x)])
    assert kinds[axis] is None
    for dim, kind in enumerate(kinds):
        if kind is not None:
            assert kind == (DimKind.SAMPLE if dim == 0 else DimKind.ATTRIBUTE)
            check_partitioned(op, [x], [], dim)


def test_log_softmax_rejects_bad_axis():
    with pytest.raises(ShapeError, match=r"\(4, 6\)"):
        LogSoftmax(2).infer([TensorSpec((4, 6))])


def test_ffmodel_log_softmax_builds_the_layer():
    ffmodel, x = ffmodel_with_input(2, 3, 4)
    assert layer_op(ffmodel.log_softmax(x, axis=1)) == LogSoftmax(1)
