import pytest
import torch

from flexflow.ops.box import Box
from flexflow.ops.concat import Concat, Split
from flexflow.ops.spec import DimKind, ShapeError, TensorSpec

from .op_check import check_op, check_partitioned, randn, spec_of

S, A = DimKind.SAMPLE, DimKind.ATTRIBUTE

CONCATS = [([(4, 6)], 1), ([(4, 2), (4, 3)], 1), ([(1, 3), (4, 3), (2, 3)], 0),
           ([(2, 1, 5), (2, 4, 5), (2, 2, 5)], -2), ([(2, 3, 4), (2, 3, 1)], -1),
           ([(2, 1, 4, 3), (2, 3, 4, 3)], 1), ([(2, 3, 4, 1), (2, 3, 4, 2)], 3)]
CONCAT_IDS = [f"{shapes}-axis{axis}" for shapes, axis in CONCATS]


def inputs_of(shapes):
    return [randn(*shape, seed=i + 1) for i, shape in enumerate(shapes)]


@pytest.mark.parametrize("shapes, axis", CONCATS, ids=CONCAT_IDS)
def test_concat_matches_torch(shapes, axis):
    op = Concat(axis)
    assert op.type_name == "Concat"
    check_op(op, inputs_of(shapes), [], lambda *ts: torch.cat(ts, axis))


@pytest.mark.parametrize("shapes, axis", CONCATS, ids=CONCAT_IDS)
def test_concat_splits_every_dim_including_the_axis(shapes, axis):
    op = Concat(axis)
    xs = inputs_of(shapes)
    assert op.dim_kinds([spec_of(x) for x in xs]) == (S,) + (A,) * (len(shapes[0]) - 1)
    for dim in range(len(shapes[0])):
        for parts in (2, 3):  # 3 parts along the axis leaves some inputs unread by a partition
            check_partitioned(op, xs, [], dim, parts=parts)


def test_concat_input_box_may_be_empty():
    op = Concat(1)
    inputs = [TensorSpec((2, 1)), TensorSpec((2, 4)), TensorSpec((2, 2))]
    out_box = Box(((0, 2), (2, 4)))
    boxes = [op.input_box(out_box, inputs, i) for i in range(3)]
    assert boxes == [Box(((0, 2), (1, 1))), Box(((0, 2), (1, 3))), Box(((0, 2), (0, 0)))]


def test_concat_rejects_mismatching_inputs_naming_them():
    with pytest.raises(ShapeError, match=r"input 2 .*\(4, 2, 5\).*\(4, 3, 6\)"):
        Concat(1).infer([TensorSpec((4, 3, 6)), TensorSpec((4, 1, 6)), TensorSpec((4, 2, 5))])
    with pytest.raises(ShapeError, match=r"input 1 .*\(4, 3\).*\(4, 3, 6\)"):
        Concat(1).infer([TensorSpec((4, 3, 6)), TensorSpec((4, 3))])
    with pytest.raises(ShapeError, match=r"\(4, 3\)"):
        Concat(2).infer([TensorSpec((4, 3)), TensorSpec((4, 3))])
    with pytest.raises(ShapeError, match="float64"):
        Concat(0).infer([TensorSpec((4, 3)), TensorSpec((4, 3), "float64")])
    with pytest.raises(ShapeError, match="at least 1"):
        Concat(0).infer([])


SPLITS = [((4, 6), (2, 4), 1), ((6, 3), (1, 2, 3), 0), ((2, 5, 3), (3, 2), -2),
          ((2, 3, 4), (1, 1, 2), -1), ((2, 6, 3, 4), (2, 2, 2), 1)]
SPLIT_IDS = [f"{shape}-{sizes}-axis{axis}" for shape, sizes, axis in SPLITS]


@pytest.mark.parametrize("shape, sizes, axis", SPLITS, ids=SPLIT_IDS)
def test_split_matches_torch(shape, sizes, axis):
    op = Split(sizes, axis)
    assert op.type_name == "Split"
    check_op(op, [randn(*shape, seed=1)], [], lambda t: torch.split(t, list(sizes), axis))


@pytest.mark.parametrize("shape, sizes, axis", SPLITS, ids=SPLIT_IDS)
def test_split_splits_every_dim_but_the_axis(shape, sizes, axis):
    op = Split(sizes, axis)
    x = randn(*shape, seed=1)
    fixed = axis % len(shape)
    kinds = op.dim_kinds([spec_of(x)])
    assert kinds == tuple(None if d == fixed else S if d == 0 else A for d in range(len(shape)))
    for dim in range(len(shape)):
        if dim != fixed:
            check_partitioned(op, [x], [], dim)


def test_split_accepts_a_list():
    assert len(Split([1, 2], 0).infer([TensorSpec((3, 4))])) == 2


@pytest.mark.parametrize("sizes, axis, fragment", [
    ((2, 3), 1, r"\(4, 6\).*\(2, 3\)"), ((7, -1), 1, r"\(4, 6\).*\(7, -1\)"),
    ((), 1, r"\(4, 6\)"), ((2, 2), 2, r"\(4, 6\)"),
])
def test_split_rejects_bad_sizes_naming_the_shape(sizes, axis, fragment):
    with pytest.raises(ShapeError, match=fragment):
        Split(sizes, axis).infer([TensorSpec((4, 6))])
