import pytest
import torch
import torch.nn.functional as F

from flexflow.ops.pool2d import Pool2D
from flexflow.ops.spec import ShapeError, TensorSpec

from .op_check import check_op, check_partitioned, randn

TORCH_ACT = {"none": lambda y: y, "relu": torch.relu}
# (kernel, stride, padding)
WINDOWS = [((2, 2), (2, 2), ((0, 0), (0, 0))),
           ((3, 3), (1, 1), ((1, 1), (1, 1))),
           ((3, 3), (2, 2), ((1, 1), (1, 1))),
           ((3, 2), (2, 1), ((1, 1), (0, 0))),
           ((2, 3), (1, 2), ((0, 0), (1, 1)))]


def torch_pool(op: Pool2D):
    (top, bottom), (left, right) = op.padding
    act = TORCH_ACT[op.activation]

    def reference(x):
        if op.pool_type == "max":
            x = F.pad(x, (left, right, top, bottom), value=float("-inf"))
            return act(F.max_pool2d(x, op.kernel, op.stride))
        if (top, left) == (bottom, right):
            return act(F.avg_pool2d(x, op.kernel, op.stride, (top, left),
                                    count_include_pad=op.count_include_pad))
        assert op.count_include_pad, "torch pads symmetrically; zero-pad by hand"
        return act(F.avg_pool2d(F.pad(x, (left, right, top, bottom)), op.kernel, op.stride))

    return reference


@pytest.mark.parametrize("kernel, stride, padding", WINDOWS)
@pytest.mark.parametrize("pool_type, count_include_pad", [("max", True), ("avg", True),
                                                          ("avg", False)])
def test_pool2d_matches_torch(kernel, stride, padding, pool_type, count_include_pad):
    op = Pool2D(kernel, stride, padding, pool_type, "none", count_include_pad)
    check_op(op, [randn(2, 3, 7, 6, seed=1)], [], torch_pool(op))


@pytest.mark.parametrize("pool_type", ["max", "avg"])
def test_pool2d_asymmetric_padding_and_relu(pool_type):
    op = Pool2D((3, 3), (2, 2), ((0, 1), (1, 0)), pool_type, "relu")
    check_op(op, [randn(2, 3, 8, 7, seed=1)], [], torch_pool(op))


def test_max_pool2d_routes_ties_to_the_first_maximum():
    x = randn(1, 2, 6, 6, seed=1).round()  # many equal values
    op = Pool2D((3, 3), (1, 1), ((1, 1), (1, 1)))
    check_op(op, [x], [], torch_pool(op))


@pytest.mark.parametrize("dim", [0, 1, 2, 3])
@pytest.mark.parametrize("pool_type, count_include_pad", [("max", True), ("avg", False)])
@pytest.mark.parametrize("kernel, stride, padding", WINDOWS[:3])
def test_pool2d_partitions_tile_the_output(dim, pool_type, count_include_pad, kernel, stride,
                                           padding):
    op = Pool2D(kernel, stride, padding, pool_type, "relu", count_include_pad)
    check_partitioned(op, [randn(3, 3, 9, 8, seed=1)], [], dim, parts=3)


@pytest.mark.parametrize("op, shape, words", [
    (Pool2D((2, 2), (2, 2)), (2, 3, 5), ["4-d", "(2, 3, 5)"]),
    (Pool2D((4, 4), (1, 1)), (2, 3, 3, 3), ["(2, 3, 3, 3)", "(4, 4)"]),
    (Pool2D((2, 2), (2, 2), ((2, 0), (0, 0))), (2, 3, 5, 5), ["padding", "(2, 2)"]),
    (Pool2D((2, 2), (2, 2), pool_type="min"), (2, 3, 5, 5), ["min"]),
    (Pool2D((2, 2), (0, 2)), (2, 3, 5, 5), ["stride", "(0, 2)"]),
    (Pool2D((2, 2), (2, 2), activation="swish"), (2, 3, 5, 5), ["swish"]),
])
def test_pool2d_rejects_bad_arguments(op, shape, words):
    with pytest.raises(ShapeError) as error:
        op.infer([TensorSpec(shape)])
    for word in words:
        assert word in str(error.value)
