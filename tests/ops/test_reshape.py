import pytest
import torch

from flexflow.ops.box import Box
from flexflow.ops.reshape import Flat, Reshape, Reverse, Transpose
from flexflow.ops.spec import DimKind, ShapeError, TensorSpec

from .op_check import check_op, check_partitioned, randn, spec_of

S, A = DimKind.SAMPLE, DimKind.ATTRIBUTE


@pytest.mark.parametrize("shape", [(4, 6), (3, 4, 5), (2, 3, 4, 5)])
def test_flat_matches_torch(shape):
    op = Flat()
    assert op.type_name == "Flat"
    x = randn(*shape, seed=1)
    check_op(op, [x], [], lambda t: torch.flatten(t, 1))
    assert op.dim_kinds([spec_of(x)]) == (S, None)
    check_partitioned(op, [x], [], 0, parts=2)


RESHAPES = [((4, 6), (4, 2, 3)), ((4, 6), (4, -1)), ((2, 3, 4, 5), (2, 60)),
            ((2, 3, 4, 5), (2, 5, -1, 3)), ((3, 4, 5), (3, 20, 1)), ((4, 6), (8, 3)),
            ((2, 3, 4), (-1,)), ((2, 3, 4, 5), (6, 4, 5))]


@pytest.mark.parametrize("in_shape, shape", RESHAPES)
def test_reshape_matches_torch(in_shape, shape):
    op = Reshape(shape)
    assert op.type_name == "Reshape"
    check_op(op, [randn(*in_shape, seed=1)], [], lambda t: t.reshape(shape))


@pytest.mark.parametrize("in_shape, shape", RESHAPES)
def test_reshape_splits_only_an_unchanged_batch(in_shape, shape):
    op = Reshape(shape)
    x = randn(*in_shape, seed=1)
    kinds = op.dim_kinds([spec_of(x)])
    out_shape = op.infer([spec_of(x)])[0].shape
    keeps_batch = out_shape[0] == in_shape[0]
    assert kinds == ((S if keeps_batch else None),) + (None,) * (len(out_shape) - 1)
    if keeps_batch:
        check_partitioned(op, [x], [], 0)


def test_reshape_accepts_a_list():
    assert Reshape([4, -1]).infer([TensorSpec((4, 6))])[0].shape == (4, 6)


@pytest.mark.parametrize("shape, fragment", [
    ((4, 5), r"\(4, 6\).*\(4, 5\)"),
    ((5, -1), r"\(4, 6\).*\(5, -1\)"),
    ((-1, -1), r"\(-1, -1\).*\(4, 6\)"),
    ((4, 0, 6), r"\(4, 0, 6\).*\(4, 6\)"),
])
def test_reshape_rejects_a_mismatch_naming_both_shapes(shape, fragment):
    with pytest.raises(ShapeError, match=fragment):
        Reshape(shape).infer([TensorSpec((4, 6))])


def test_flat_rejects_1d():
    with pytest.raises(ShapeError, match=r"\(6,\)"):
        Flat().infer([TensorSpec((6,))])


PERMS = [(4, 6), (1, 0)], [(2, 3, 4), (0, 2, 1)], [(2, 3, 4), (2, 0, 1)], \
    [(2, 3, 4, 5), (0, 3, 1, 2)], [(2, 3, 4, 5), (3, 2, 1, 0)]


@pytest.mark.parametrize("shape, perm", PERMS)
def test_transpose_matches_torch_and_splits_every_dim(shape, perm):
    op = Transpose(perm)
    assert op.type_name == "Transpose"
    x = randn(*shape, seed=1)
    check_op(op, [x], [], lambda t: t.permute(perm))
    kinds = op.dim_kinds([spec_of(x)])
    assert kinds == tuple(S if p == 0 else A for p in perm)
    for dim in range(len(shape)):
        check_partitioned(op, [x], [], dim)


def test_transpose_input_box_permutes_the_box():
    box = Transpose((2, 0, 1)).input_box(Box(((0, 1), (1, 2), (2, 3))), [TensorSpec((3, 4, 5))], 0)
    assert box == Box(((1, 2), (2, 3), (0, 1)))


@pytest.mark.parametrize("perm", [(0, 1), (0, 1, 1), (1, 2, 3)])
def test_transpose_rejects_a_bad_perm_naming_the_shape(perm):
    with pytest.raises(ShapeError, match=r"\(2, 3, 4\)"):
        Transpose(perm).infer([TensorSpec((2, 3, 4))])


@pytest.mark.parametrize("shape, axis", [((4, 6), 1), ((4, 6), 0), ((2, 3, 4), -1),
                                         ((2, 3, 4), 1), ((2, 3, 4, 5), -2), ((2, 3, 4, 5), 3)])
def test_reverse_matches_torch_and_splits_every_dim(shape, axis):
    op = Reverse(axis)
    assert op.type_name == "Reverse"
    x = randn(*shape, seed=1)
    check_op(op, [x], [], lambda t: torch.flip(t, (axis,)))
    assert op.dim_kinds([spec_of(x)]) == (S,) + (A,) * (len(shape) - 1)
    for dim in range(len(shape)):
        for parts in (2, 3):
            check_partitioned(op, [x], [], dim, parts=parts)


def test_reverse_input_box_mirrors_the_axis():
    box = Reverse(1).input_box(Box(((0, 2), (1, 3))), [TensorSpec((2, 7))], 0)
    assert box == Box(((0, 2), (4, 6)))


def test_reverse_rejects_a_bad_axis_naming_the_shape():
    with pytest.raises(ShapeError, match=r"\(4, 6\)"):
        Reverse(2).infer([TensorSpec((4, 6))])
