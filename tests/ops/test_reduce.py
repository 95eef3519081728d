import pytest
import torch

from flexflow.ops.box import Box
from flexflow.ops.reduce import Mean
from flexflow.ops.spec import DimKind, ShapeError, TensorSpec

from .op_check import check_op, check_partitioned, randn, spec_of

S, A = DimKind.SAMPLE, DimKind.ATTRIBUTE

CASES = [((4, 6), (1,)), ((4, 6), (0,)), ((4, 6), (0, 1)), ((2, 3, 5), (-1,)),
         ((2, 3, 5), (1, -1)), ((2, 3, 5), (0, 2)), ((2, 3, 4, 5), (2, 3)),
         ((2, 3, 4, 5), (-3,)), ((2, 3, 4, 5), (3, 0, 1))]
IDS = [f"{shape}-dims{dims}" for shape, dims in CASES]


@pytest.mark.parametrize("keepdims", [False, True])
@pytest.mark.parametrize("shape, dims", CASES, ids=IDS)
def test_mean_matches_torch(shape, dims, keepdims):
    op = Mean(dims, keepdims)
    assert op.type_name == "Mean"
    check_op(op, [randn(*shape, seed=1)], [], lambda t: torch.mean(t, dims, keepdim=keepdims))


@pytest.mark.parametrize("keepdims", [False, True])
@pytest.mark.parametrize("shape, dims", CASES, ids=IDS)
def test_mean_splits_the_kept_dims(shape, dims, keepdims):
    op = Mean(dims, keepdims)
    x = randn(*shape, seed=1)
    reduced = {d % len(shape) for d in dims}
    in_kinds = [None if d in reduced else S if d == 0 else A for d in range(len(shape))]
    expected = in_kinds if keepdims else [k for k in in_kinds if k is not None]
    kinds = op.dim_kinds([spec_of(x)])
    assert kinds == tuple(expected)
    for dim, kind in enumerate(kinds):
        if kind is not None:
            check_partitioned(op, [x], [], dim)


def test_mean_input_box_maps_kept_dims():
    inputs = [TensorSpec((2, 3, 4, 5))]
    assert Mean((1, 3)).input_box(Box(((1, 2), (0, 2))), inputs, 0) == \
        Box(((1, 2), (0, 3), (0, 2), (0, 5)))
    assert Mean((1, 3), True).input_box(Box(((1, 2), (0, 1), (0, 2), (0, 1))), inputs, 0) == \
        Box(((1, 2), (0, 3), (0, 2), (0, 5)))


@pytest.mark.parametrize("dims", [(2,), (-3,), (1, -1), ()])
def test_mean_rejects_bad_dims_naming_the_shape(dims):
    with pytest.raises(ShapeError, match=r"\(4, 6\)"):
        Mean(dims).infer([TensorSpec((4, 6))])
