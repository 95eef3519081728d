"""GroupNorm and InstanceNorm imported from ONNX (InstanceNormalization, as torch's exporters write
both, and GroupNormalization) give PyTorch's outputs and, after an SGD step, PyTorch's weights:
its autograd's gradients; the exporters' constant scales stay constant."""

import numpy as np
import pytest
import torch
from onnx import helper
from torch import nn

from flexflow.core import LossType, SGDOptimizer

from .graphs import assert_matches_reference, model, randn
from .test_hf_models import holds, weights_of
from .torch_models import export, imported

BATCH, LR = 4, 0.5


class Norms(nn.Module):
    """A convolution, a GroupNorm of 3 groups, a ReLU (without it the InstanceNorm would undo
    GroupNorm's per-channel scale and shift, whose gradients would be zero) and an affine
    InstanceNorm; weights perturbed so that no two are equal (a fresh norm's ones and zeros
    would be stored once)."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.conv = nn.Conv2d(3, 6, 3)
        self.group = nn.GroupNorm(3, 6)
        self.instance = nn.InstanceNorm2d(6, affine=True)
        with torch.no_grad():
            for parameter in self.parameters():
                parameter.add_(0.3 * torch.randn_like(parameter))

    def forward(self, x):
        return self.instance(torch.relu(self.group(self.conv(x))))


def one_sgd_step(proto, data, target):
    """FlexFlow's output before the step, and its weights before and after one SGD step on
    the mean squared error."""
    ffmodel, x, out = imported(proto, BATCH)
    ffmodel.compile(optimizer=SGDOptimizer(ffmodel, LR),
                    loss_type=LossType.LOSS_MEAN_SQUARED_ERROR_AVG_REDUCE)
    before = weights_of(ffmodel)
    x.set_tensor(ffmodel, data)
    ffmodel.forward(training=False)
    output = out.get_tensor(ffmodel)
    ffmodel.label_tensor.set_tensor(ffmodel, target)
    ffmodel.train_step()
    return output, before, weights_of(ffmodel)


def assert_trains_like_torch(proto, module, data, target):
    """Same output; each parameter of `module` is held by a FlexFlow weight that ends where
    torch's SGD step takes it; every other weight (the exporter's constants) is unchanged."""
    output, before, after = one_sgd_step(proto, data, target)
    x = torch.tensor(data)
    np.testing.assert_allclose(output, module(x).detach().numpy(), rtol=1e-5, atol=1e-5)
    initial = {name: p.detach().numpy().copy() for name, p in module.named_parameters()}
    optimizer = torch.optim.SGD(module.parameters(), lr=LR)
    nn.functional.mse_loss(module(x), torch.tensor(target)).backward()
    optimizer.step()
    held = set()
    for name, parameter in module.named_parameters():
        assert not np.allclose(parameter.detach().numpy(), initial[name]), name  # it trains
        (index,) = [i for i, w in enumerate(before) if holds(w, initial[name])]
        np.testing.assert_allclose(after[index].reshape(initial[name].shape),
                                   parameter.detach().numpy(), rtol=1e-5, atol=1e-6,
                                   err_msg=name)
        held.add(index)
    for index in set(range(len(before))) - held:
        np.testing.assert_array_equal(after[index], before[index])


@pytest.mark.parametrize("dynamo", [False, True], ids=["torchscript", "dynamo"])
def test_group_and_instance_norm_train_like_torch(dynamo):
    module = Norms()
    data = randn(BATCH, 3, 7, 7, seed=1)
    proto = export(module, torch.tensor(data), dynamo)
    assert_trains_like_torch(proto, module.train(), data, randn(BATCH, 6, 5, 5, seed=2))


def test_group_normalization_node_trains_like_torch():
    """Opset 21's GroupNormalization, scale and bias per channel: torch's group_norm."""
    module = nn.GroupNorm(2, 6, eps=1e-3)
    with torch.no_grad():
        module.weight.copy_(torch.tensor(randn(6, seed=3)))
        module.bias.copy_(torch.tensor(randn(6, seed=4)))
    node = helper.make_node("GroupNormalization", ["x", "group.weight", "group.bias"], ["y"],
                            num_groups=2, epsilon=1e-3)
    proto = model([node], {"x": (BATCH, 6, 3, 5)}, ["y"],
                  {"group.weight": randn(6, seed=3), "group.bias": randn(6, seed=4)}, opset=21)
    assert_trains_like_torch(proto, module, randn(BATCH, 6, 3, 5, seed=5),
                             randn(BATCH, 6, 3, 5, seed=6))


def test_group_normalization_of_opset_18_scales_each_group():
    node = helper.make_node("GroupNormalization", ["x", "scale", "bias"], ["y"], num_groups=3)
    proto = model([node], {"x": (2, 6, 4)}, ["y"],
                  {"scale": randn(3, seed=7), "bias": randn(3, seed=8)}, opset=18)
    assert_matches_reference(proto, randn(2, 6, 4, seed=9))
