import numpy as np
import pytest
import torch
import torch.nn.functional as F

from flexflow.ops.base import Part
from flexflow.ops.batch_norm import BatchNorm
from flexflow.ops.box import Box
from flexflow.ops.spec import DimKind, ShapeError, TensorSpec

from .op_check import ATOL, RTOL, check_partitioned, randn, run_op


def buffers(channels):
    """scale, bias, running_mean, running_var (running_var positive)."""
    return [randn(channels, seed=2), randn(channels, seed=3), randn(channels, seed=4),
            np.abs(randn(channels, seed=5)) + 0.5]


def compare_with_torch(op: BatchNorm, x, training: bool):
    """Forward, every gradient and the running buffers against torch.nn.functional.batch_norm.

    (check_op cannot be used: it expects a gradient for every weight, and the running buffers
    have none.)
    """
    ws = buffers(x.shape[1])
    t_x, t_scale, t_bias = (torch.tensor(a, requires_grad=True) for a in (x, ws[0], ws[1]))
    t_mean, t_var = torch.tensor(ws[2]), torch.tensor(ws[3])
    t_y = F.batch_norm(t_x, t_mean, t_var, t_scale, t_bias, training, op.momentum, op.eps)
    if op.relu:
        t_y = torch.relu(t_y)
    dy = randn(*x.shape, seed=6)
    t_y.backward(torch.tensor(dy))

    ys, dxs, dws = run_op(op, [x], ws, [dy], training=training)
    check = dict(rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(ys[0], t_y.detach().numpy(), **check, err_msg="output")
    np.testing.assert_allclose(dxs[0], t_x.grad.numpy(), **check, err_msg="input gradient")
    np.testing.assert_allclose(dws[0], t_scale.grad.numpy(), **check, err_msg="scale gradient")
    np.testing.assert_allclose(dws[1], t_bias.grad.numpy(), **check, err_msg="bias gradient")
    assert dws[2] is None and dws[3] is None
    np.testing.assert_allclose(ws[2], t_mean.numpy(), **check, err_msg="running_mean")
    np.testing.assert_allclose(ws[3], t_var.numpy(), **check, err_msg="running_var")
    for y, w in zip(ys + dxs + dws[:2], [x, x, ws[0], ws[1]]):
        assert y.dtype == np.float32 and y.shape == w.shape


@pytest.mark.parametrize("shape", [(4, 3, 5, 6), (2, 5, 1, 3), (7, 2, 1, 1)])
@pytest.mark.parametrize("relu", [True, False])
@pytest.mark.parametrize("training", [True, False])
def test_batch_norm_matches_torch(shape, relu, training):
    compare_with_torch(BatchNorm(relu, eps=1e-3, momentum=0.2), randn(*shape, seed=1, scale=3),
                       training)


def test_batch_norm_default_arguments_match_torch():
    op = BatchNorm()
    assert (op.relu, op.eps, op.momentum) == (True, 1e-5, 0.1)
    compare_with_torch(op, randn(3, 4, 2, 2, seed=1), training=True)


def test_batch_norm_inference_leaves_running_stats_alone():
    ws = buffers(3)
    before = [w.copy() for w in ws]
    run_op(BatchNorm(), [randn(2, 3, 4, 4, seed=1)], ws, training=False)
    for w, b in zip(ws, before):
        np.testing.assert_array_equal(w, b)


@pytest.mark.parametrize("relu", [True, False])
def test_batch_norm_splits_every_dim(relu):
    """Channels split exactly; N, H and W split through the statistics reduction."""
    op = BatchNorm(relu=relu)
    x = randn(4, 6, 4, 6, seed=1, scale=2.0) + 3.0  # an offset mean stresses the variance sums
    kinds = op.dim_kinds([TensorSpec(x.shape)])
    assert kinds == (DimKind.SAMPLE, DimKind.PARAMETER, DimKind.ATTRIBUTE, DimKind.ATTRIBUTE)
    assert op.reduction_dims == (0, 2, 3)
    check_partitioned(op, [x], buffers(6), 1, parts=3)
    for dim in (0, 2, 3):
        check_partitioned(op, [x], buffers(6), dim, parts=2)


def test_per_partition_batch_norm_splits_the_batch_without_combining_over_it():
    """With per-partition statistics only H and W reduce across partitions (exactly); the
    batch dim is no reduction dim."""
    op = BatchNorm(per_partition=True)
    assert op.reduction_dims == (2, 3)
    x = randn(4, 6, 4, 6, seed=1, scale=2.0) + 3.0
    for dim in (1, 2, 3):
        check_partitioned(op, [x], buffers(6), dim, parts=2)


@pytest.mark.parametrize("per_partition", [False, True])
def test_only_the_first_partition_of_a_channel_box_updates_the_running_statistics(
        per_partition):
    """The first sample half updates the running buffers with its statistics (torch's update
    on those samples), the second leaves them alone: a box is updated once however many of its
    partitions share a device."""
    op = BatchNorm(per_partition=per_partition)
    x = randn(4, 3, 2, 2, seed=1, scale=2.0) + 1.0
    ws = buffers(3)
    t_mean, t_var = torch.tensor(ws[2]), torch.tensor(ws[3])
    F.batch_norm(torch.tensor(x[:2]), t_mean, t_var, None, None, True, op.momentum, op.eps)
    for rows in ((2, 4), (0, 2)):  # the second half first: it must change nothing
        box = Box((rows, (0, 3), (0, 2), (0, 2)))
        op.forward(np, [x[slice(*rows)]], ws, Part((box,), (box,), (x.shape,)))
        if rows == (2, 4):
            np.testing.assert_array_equal(ws[2:], buffers(3)[2:])
    np.testing.assert_allclose(ws[2], t_mean.numpy(), rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(ws[3], t_var.numpy(), rtol=RTOL, atol=ATOL)


def test_batch_norm_weights():
    specs = BatchNorm().weight_specs([TensorSpec((2, 5, 3, 3))])
    assert [(w.name, w.shape, w.initializer, w.trainable) for w in specs] == [
        ("scale", (5,), "ones", True), ("bias", (5,), "zeros", True),
        ("running_mean", (5,), "zeros", False), ("running_var", (5,), "ones", False)]


@pytest.mark.parametrize("spec, words", [
    (TensorSpec((2, 3, 5)), ["4-d", "(2, 3, 5)"]),
    (TensorSpec((2, 3, 5, 5), "int32"), ["float", "int32"]),
])
def test_batch_norm_rejects_bad_inputs(spec, words):
    with pytest.raises(ShapeError) as error:
        BatchNorm().infer([spec])
    for word in words:
        assert word in str(error.value)


def test_batch_norm_needs_two_values_per_channel_to_train():
    with pytest.raises(ValueError, match=r"\(1, 3, 1, 1\)"):
        run_op(BatchNorm(), [randn(1, 3, 1, 1)], buffers(3))
