"""The operator checks can fail: each kernel below is broken on purpose, and the check that
guards it must then raise. A check that passed a broken kernel would guard nothing."""

import dataclasses
from typing import Callable, NamedTuple

import pytest

from flexflow.ops import batch_norm, conv2d, dense, optimizers, pool2d, softmax

from . import test_batch_norm, test_conv2d, test_dense, test_optimizers, test_pool2d
from . import test_softmax
from .op_check import check_partitioned, randn


class Mutation(NamedTuple):
    path: str | None   # the kernel path it breaks (None: both)
    owner: object      # what holds the kernel
    attribute: str
    breaking: Callable  # original -> broken
    check: Callable[[], None]


MUTATIONS: dict[str, Mutation] = {}


def breaks(name: str, path: str | None, owner, attribute: str, check: Callable[[], None]):
    """Registers the decorated `original -> broken` function as the mutation `name`."""
    def register(breaking):
        MUTATIONS[name] = Mutation(path, owner, attribute, breaking, check)
        return breaking
    return register


def conv_case():
    test_conv2d.test_conv2d_matches_torch((3, 3), (1, 1), "same", 1)


def conv_halo_case():
    op = conv2d.Conv2D(6, (3, 3), (1, 1), ((1, 1), (1, 1)), "relu")
    x = randn(4, 3, 9, 8, seed=1)
    check_partitioned(op, [x], test_conv2d.weights(op, x), 2, parts=3)


def dense_case():
    test_dense.test_dense_matches_torch((4, 6), "relu", True)


@breaks("dense without weight gradients", None, dense.Dense, "backward", dense_case)
def without_weight_grads(backward):
    def broken(self, xp, dys, saved, part):
        dxs, _ = backward(self, xp, dys, saved, part)
        return dxs, []
    return broken


@breaks("softmax without input gradients", None, softmax.Softmax, "backward",
        lambda: test_softmax.test_softmax_matches_torch((4, 6), -1))
def without_input_grads(backward):
    def broken(self, xp, dys, saved, part):
        _, dws = backward(self, xp, dys, saved, part)
        return [], dws
    return broken


@breaks("conv2d output off by 0.1%", "vendor", conv2d.Conv2D, "_aten_forward", conv_case)
def scaled_output(forward):
    def broken(self, *args):
        ys, saved = forward(self, *args)
        ys[0] *= 1.001
        return ys, saved
    return broken


@breaks("conv2d kernel gradient off by 0.1%", "vendor", conv2d.Conv2D, "_aten_backward",
        conv_case)
def scaled_first_weight_grad(backward):
    def broken(self, *args):
        dxs, dws = backward(self, *args)
        return dxs, [dws[0] * 1.001] + list(dws[1:])
    return broken


@breaks("conv2d border partition's gradient lost", "vendor", conv2d.Windows,
        "aten_input_grad", conv_halo_case)
def border_gradient_lost(aten_input_grad):
    return lambda self, grad, explicit: aten_input_grad(self, grad, explicit) * (not explicit)


@breaks("reference conv2d gradient columns not folded", "reference", conv2d, "_fold_columns",
        conv_case)
def ignored(_original):
    return lambda *args, **kwargs: None


@breaks("ReLU backward passes every gradient", "vendor", conv2d, "aten_activate_backward",
        lambda: test_conv2d.test_depthwise_conv2d_matches_torch("relu", True))
@breaks("reference ReLU backward passes every gradient", "reference", dense,
        "activate_backward", dense_case)
def activation_mask_dropped(_original):
    return lambda array_module, mode, dy, saved: dy


@breaks("max pooling gradient spread over its window", "vendor", pool2d.Pool2D,
        "_aten_backward", lambda: test_pool2d.test_pool2d_matches_torch(
            (2, 2), (2, 2), ((0, 0), (0, 0)), "max", True))
def max_as_average(backward):
    def broken(self, aten, dy, tensor, padding, explicit, winner, act_saved, windows):
        return backward(self, aten, dy, tensor, padding, explicit, None, act_saved, windows)
    return broken


@breaks("batch norm trains on running statistics", "vendor", batch_norm.BatchNorm,
        "_aten_forward",
        lambda: test_batch_norm.test_batch_norm_matches_torch((4, 3, 5, 6), True, True))
def running_statistics(forward):
    def broken(self, aten, x, ws, training, keeps):
        return forward(self, aten, x, ws, False, keeps)
    return broken


@breaks("nesterov momentum ignored", None, optimizers.SGD, "update",
        lambda: test_optimizers.test_sgd_matches_torch(0.9, True, 0.0))
def plain_momentum(update):
    def broken(self, *args):
        return update(dataclasses.replace(self, nesterov=False), *args)
    return broken


@breaks("Adam's epsilon not rescaled for torch", "vendor", optimizers.Adam, "_aten_update",
        lambda: test_optimizers.test_adam_follows_flexflow_s_rule(0.0, 0.1))
def unscaled_epsilon(_original):
    """torch's fused Adam with FlexFlow's epsilon as it is: torch adds it to the corrected root."""
    def broken(self, aten, weight, grad, state, t, skip):
        tensors = [[aten.tensor(a)] for a in (weight, grad, state["m"], state["v"])]
        aten.torch._fused_adam_(*tensors, [], [aten.torch.tensor(float(t))], lr=self.alpha,
                                beta1=self.beta1, beta2=self.beta2,
                                weight_decay=self.weight_decay, eps=self.epsilon,
                                amsgrad=False, maximize=False, found_inf=skip)
    return broken


@pytest.mark.parametrize("name", list(MUTATIONS))
def test_a_broken_kernel_fails_its_check(monkeypatch, kernel_path, name):
    mutation = MUTATIONS[name]
    if mutation.path not in (None, kernel_path):
        pytest.skip(f"a mutation of the {mutation.path} kernels")
    mutation.check()  # the check passes on the real kernel
    monkeypatch.setattr(mutation.owner, mutation.attribute,
                        mutation.breaking(getattr(mutation.owner, mutation.attribute)))
    with pytest.raises(AssertionError):
        mutation.check()
