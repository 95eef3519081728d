"""The operator checks can fail: each kernel below is broken on purpose, and the check that
guards it must then raise. A check that passed a broken kernel would guard nothing."""

import pytest

from flexflow.ops import batch_norm, conv2d, dense, optimizers, pool2d, softmax

from . import test_batch_norm, test_conv2d, test_dense, test_optimizers, test_pool2d
from . import test_softmax
from .op_check import check_partitioned, randn


def without_weight_grads(backward):
    def broken(self, xp, dys, saved, part):
        dxs, _ = backward(self, xp, dys, saved, part)
        return dxs, []
    return broken


def without_input_grads(backward):
    def broken(self, xp, dys, saved, part):
        _, dws = backward(self, xp, dys, saved, part)
        return [], dws
    return broken


def scaled_output(forward):
    def broken(self, *args):
        ys, saved = forward(self, *args)
        ys[0] *= 1.001
        return ys, saved
    return broken


def scaled_first_weight_grad(backward):
    def broken(self, *args):
        dxs, dws = backward(self, *args)
        return dxs, [dws[0] * 1.001] + list(dws[1:])
    return broken


def ignored(_original):
    return lambda *args, **kwargs: None


def activation_mask_dropped(_original):
    return lambda aten, mode, dy, saved: dy


def running_statistics(forward):
    def broken(self, aten, x, ws, training):
        return forward(self, aten, x, ws, False)
    return broken


def plain_momentum(update):
    def broken(self, *args):
        import dataclasses
        return update(dataclasses.replace(self, nesterov=False), *args)
    return broken


def unscaled_epsilon(aten_update):
    def broken(self, aten, weight, grad, state, t):
        import dataclasses
        return aten_update(dataclasses.replace(self, beta2=0.0), aten, weight, grad, state, t)
    return broken


def conv_case():
    test_conv2d.test_conv2d_matches_torch((3, 3), (1, 1), "same", 1)


def conv_halo_case():
    op = conv2d.Conv2D(6, (3, 3), (1, 1), ((1, 1), (1, 1)), "relu")
    x = randn(4, 3, 9, 8, seed=1)
    check_partitioned(op, [x], test_conv2d.weights(op, x), 2, parts=3)


def max_as_average(backward):
    def broken(self, aten, dy, tensor, padding, explicit, winner, act_saved, windows):
        return backward(self, aten, dy, tensor, padding, explicit, None, act_saved, windows)
    return broken


MUTATIONS = {  # name -> (kernel path or None for both, owner, attribute, break, check)
    "dense without weight gradients": (None, dense.Dense, "backward", without_weight_grads,
                                       lambda: test_dense.test_dense_matches_torch((4, 6), "relu",
                                                                                  True)),
    "softmax without input gradients": (None, softmax.Softmax, "backward", without_input_grads,
                                        lambda: test_softmax.test_softmax_matches_torch((4, 6),
                                                                                        -1)),
    "conv2d output off by 0.1%": ("vendor", conv2d.Conv2D, "_aten_forward", scaled_output,
                                  conv_case),
    "conv2d kernel gradient off by 0.1%": ("vendor", conv2d.Conv2D, "_aten_backward",
                                           scaled_first_weight_grad, conv_case),
    "conv2d border partition's gradient lost": ("vendor", conv2d.Windows, "aten_input_grad",
                                                lambda f: lambda self, g, e: f(self, g, e) * (
                                                    0 if e else 1), conv_halo_case),
    "reference conv2d gradient columns not folded": ("reference", conv2d, "_fold_columns",
                                                     ignored, conv_case),
    "ReLU backward passes every gradient": (
        "vendor", conv2d, "aten_activate_backward", activation_mask_dropped,
        lambda: test_conv2d.test_depthwise_conv2d_matches_torch("relu", True)),
    "reference ReLU backward passes every gradient": (
        "reference", dense, "activate_backward", lambda f: lambda xp, mode, dy, s: dy,
        lambda: test_dense.test_dense_matches_torch((4, 6), "relu", True)),
    "max pooling gradient spread over its window": (
        "vendor", pool2d.Pool2D, "_aten_backward", max_as_average,
        lambda: test_pool2d.test_pool2d_matches_torch((2, 2), (2, 2), ((0, 0), (0, 0)), "max",
                                                      True)),
    "batch norm trains on running statistics": (
        "vendor", batch_norm.BatchNorm, "_aten_forward", running_statistics,
        lambda: test_batch_norm.test_batch_norm_matches_torch((4, 3, 5, 6), True, True)),
    "nesterov momentum ignored": (None, optimizers.SGD, "update", plain_momentum,
                                  lambda: test_optimizers.test_sgd_matches_torch(0.9, True, 0.0)),
    "Adam's epsilon not rescaled for torch": (
        "vendor", optimizers.Adam, "_aten_update", unscaled_epsilon,
        lambda: test_optimizers.test_adam_follows_flexflow_s_rule(0.0, 0.1)),
}


@pytest.mark.parametrize("name", list(MUTATIONS))
def test_a_broken_kernel_fails_its_check(monkeypatch, kernel_path, name):
    path, owner, attribute, breaking, check = MUTATIONS[name]
    if path not in (None, kernel_path):
        pytest.skip(f"a mutation of the {path} kernels")
    check()  # the check passes on the real kernel
    monkeypatch.setattr(owner, attribute, breaking(getattr(owner, attribute)))
    with pytest.raises(AssertionError):
        check()
