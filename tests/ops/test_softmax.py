import numpy as np
import pytest
import torch

from flexflow.ops.softmax import Softmax
from flexflow.ops.spec import DimKind, ShapeError, TensorSpec

from .op_check import check_op, check_partitioned, randn, run_op, spec_of

CASES = [((4, 6), -1), ((4, 6), 0), ((2, 3, 5), 1), ((2, 3, 5), -1), ((2, 3, 5), -3),
         ((2, 3, 4, 5), 2), ((2, 3, 4, 5), -1)]
IDS = [f"{shape}-axis{axis}" for shape, axis in CASES]


@pytest.mark.parametrize("shape, axis", CASES, ids=IDS)
def test_softmax_matches_torch(shape, axis):
    check_op(Softmax(axis), [randn(*shape, seed=1, scale=3.0)], [],
             lambda x: torch.softmax(x, axis))


@pytest.mark.parametrize("shape, axis", CASES, ids=IDS)
def test_softmax_partitions_every_dim(shape, axis):
    """Dims other than the axis split freely; the axis splits through its reduction."""
    op = Softmax(axis)
    x = randn(*shape, seed=1, scale=3.0)
    kinds = op.dim_kinds([spec_of(x)])
    assert kinds[0] == DimKind.SAMPLE and set(kinds[1:]) == {DimKind.ATTRIBUTE}
    assert [d % len(shape) for d in op.reduction_dims] == [axis % len(shape)]
    for dim in range(len(shape)):
        check_partitioned(op, [x], [], dim)
        if shape[dim] >= 3:
            check_partitioned(op, [x], [], dim, parts=3)


def test_softmax_is_stable_for_large_logits():
    x = np.array([[1000.0, 999.0, -1000.0], [-1e4, -1e4, -1e4]], np.float32)
    (y,), _, _ = run_op(Softmax(), [x], [])
    np.testing.assert_allclose(y, torch.softmax(torch.tensor(x), -1).numpy(), rtol=1e-6)
    assert np.isfinite(y).all()


def test_softmax_rejects_bad_axis_naming_the_shape():
    with pytest.raises(ShapeError, match=r"\(4, 6\)"):
        Softmax(2).infer([TensorSpec((4, 6))])
    with pytest.raises(ShapeError, match=r"int32"):
        Softmax().infer([TensorSpec((4, 6), "int32")])
    with pytest.raises(ShapeError, match="2"):
        Softmax().infer([TensorSpec((4, 6)), TensorSpec((4, 6))])
