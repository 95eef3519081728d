import pytest
import torch
import torch.nn.functional as F

from flexflow.ops import conv2d
from flexflow.ops.conv2d import Conv2D
from flexflow.ops.spec import DimKind, ShapeError, TensorSpec

from .op_check import check_op, check_partitioned, randn

TORCH_ACT = {"none": lambda y: y, "relu": torch.relu}
PADDINGS = {"none": ((0, 0), (0, 0)), "same": ((1, 1), (1, 1)), "asym": ((0, 1), (1, 0))}


def torch_conv(op: Conv2D):
    (top, bottom), (left, right) = op.padding

    def reference(x, kernel, bias=None):
        x = F.pad(x, (left, right, top, bottom))
        y = F.conv2d(x, kernel, bias, stride=op.stride, groups=op.groups)
        return TORCH_ACT[op.activation](y)

    return reference


def weights(op: Conv2D, x, seed=2):
    specs = op.weight_specs([TensorSpec(x.shape)])
    return [randn(*s.shape, seed=seed + k) for k, s in enumerate(specs)]


@pytest.mark.parametrize("kernel", [(1, 1), (3, 3), (3, 2)])
@pytest.mark.parametrize("stride", [(1, 1), (2, 2)])
@pytest.mark.parametrize("padding", list(PADDINGS))
@pytest.mark.parametrize("groups", [1, 2, 4])
def test_conv2d_matches_torch(kernel, stride, padding, groups):
    op = Conv2D(8, kernel, stride, PADDINGS[padding], "relu" if groups != 2 else "none", groups,
                use_bias=groups != 4)
    x = randn(2, 4, 7, 6, seed=1)
    check_op(op, [x], weights(op, x), torch_conv(op))


@pytest.mark.parametrize("activation", list(TORCH_ACT))
@pytest.mark.parametrize("use_bias", [True, False])
def test_depthwise_conv2d_matches_torch(activation, use_bias):
    op = Conv2D(6, (3, 3), (1, 1), ((1, 1), (1, 1)), activation, groups=6, use_bias=use_bias)
    x = randn(2, 6, 5, 5, seed=1)
    check_op(op, [x], weights(op, x), torch_conv(op))


@pytest.mark.parametrize("stride, groups", [((1, 1), 1), ((2, 1), 2), ((1, 1), 4)])
def test_conv2d_in_chunks_of_samples_matches_torch(monkeypatch, stride, groups):
    # a workspace of about two samples' columns: chunks of 2, 2 and a last one of 1
    op = Conv2D(4, (3, 2), stride, PADDINGS["asym"], "relu", groups)
    x = randn(5, 4, 6, 5, seed=1)
    ho, wo = op.infer([TensorSpec(x.shape)])[0].shape[2:]
    grid_w = 6 if stride == (1, 1) else wo
    monkeypatch.setattr(conv2d, "COLUMN_BYTES", 2 * 4 * 3 * 2 * ho * grid_w * 4 + 3)
    check_op(op, [x], weights(op, x), torch_conv(op))


def test_conv2d_uneven_stride_drops_unread_rows():
    # (9 + 1 - 3) // 2 + 1 = 4 output rows read input rows -1..7 only: row 8 gets no gradient
    op = Conv2D(3, (3, 3), (2, 2), ((1, 0), (0, 1)), "relu")
    x = randn(2, 2, 9, 8, seed=1)
    check_op(op, [x], weights(op, x), torch_conv(op))


@pytest.mark.parametrize("dim", [0, 1, 2, 3])
@pytest.mark.parametrize("stride, padding", [((1, 1), ((1, 1), (1, 1))),
                                             ((2, 2), ((0, 1), (1, 0)))])
def test_conv2d_partitions_tile_the_output(monkeypatch, dim, stride, padding):
    monkeypatch.setattr(conv2d, "COLUMN_BYTES", 1)  # one sample at a time
    op = Conv2D(6, (3, 3), stride, padding, "relu")
    x = randn(4, 3, 9, 8, seed=1)
    assert op.dim_kinds([TensorSpec(x.shape)])[dim] is not None
    check_partitioned(op, [x], weights(op, x), dim, parts=3)


@pytest.mark.parametrize("in_channels, groups", [(6, 6), (12, 6)])
def test_one_channel_per_group_conv2d_splits_channels(in_channels, groups):
    op = Conv2D(6, (3, 3), (1, 1), ((1, 1), (1, 1)), groups=groups)
    x = randn(2, in_channels, 5, 5, seed=1)
    assert op.dim_kinds([TensorSpec(x.shape)])[1] is DimKind.PARAMETER
    check_partitioned(op, [x], weights(op, x), 1, parts=3)


def test_grouped_conv2d_keeps_channels_whole():
    assert Conv2D(8, (3, 3), groups=2).dim_kinds([TensorSpec((2, 4, 5, 5))])[1] is None


def test_conv2d_weight_fans():
    kernel, bias = Conv2D(8, (3, 2), groups=2).weight_specs([TensorSpec((1, 4, 5, 5))])
    assert (kernel.shape, kernel.initializer, kernel.fan_in, kernel.fan_out) == (
        (8, 2, 3, 2), "glorot_uniform", 12, 24)
    assert (bias.shape, bias.initializer, bias.trainable) == ((8,), "zeros", True)


@pytest.mark.parametrize("op, shape, words", [
    (Conv2D(4, (3, 3)), (2, 3, 5), ["4-d", "(2, 3, 5)"]),
    (Conv2D(4, (3, 3), groups=2), (2, 3, 5, 5), ["groups=2", "(2, 3, 5, 5)"]),
    (Conv2D(4, (7, 7)), (2, 3, 5, 5), ["(2, 3, 5, 5)", "(7, 7)"]),
    (Conv2D(4, (3, 3), stride=(0, 1)), (2, 3, 5, 5), ["stride", "(0, 1)"]),
    (Conv2D(4, (3, 3), padding=((1, -1), (0, 0))), (2, 3, 5, 5), ["padding"]),
    (Conv2D(4, (3, 3), activation="swish"), (2, 3, 5, 5), ["swish"]),
    (Conv2D(0, (3, 3)), (2, 3, 5, 5), ["out_channels"]),
])
def test_conv2d_rejects_bad_arguments(op, shape, words):
    with pytest.raises(ShapeError) as error:
        op.infer([TensorSpec(shape)])
    for word in words:
        assert word in str(error.value)
