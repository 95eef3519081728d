"""nn.LSTM exported by both of torch's exporters (ONNX's LSTM node) imports with PyTorch's
outputs, and one SGD step moves every parameter as PyTorch's autograd does; what ONNX's LSTM
allows beyond that is refused with the node named."""

import numpy as np
import pytest
import torch
from onnx import helper
from torch import nn

from flexflow.core import DataType, FFConfig, FFModel, LossType, SGDOptimizer
from flexflow.onnx import ONNXImportError, ONNXModel

from .graphs import model, randn
from .torch_models import export, imported

BATCH, STEPS, FEATURES, HIDDEN, LR = 4, 5, 3, 6, 0.5


class Recurrent(nn.Module):
    """A batch-first LSTM and a linear layer on its outputs."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.lstm = nn.LSTM(FEATURES, HIDDEN, batch_first=True)
        self.head = nn.Linear(HIDDEN, 2)

    def forward(self, x):
        return self.head(self.lstm(x)[0])


@pytest.mark.parametrize("dynamo", [False, True], ids=["torchscript", "dynamo"])
def test_lstm_trains_like_torch(dynamo):
    """ONNX orders the gates otherwise than torch and holds both biases in one B, so the
    weights are compared through what they compute: the loss of each of three SGD steps, and
    the outputs after them."""
    module = Recurrent().train()
    proto = export(module, torch.tensor(randn(BATCH, STEPS, FEATURES)), dynamo)
    ffmodel, x, out = imported(proto, BATCH)
    ffmodel.compile(optimizer=SGDOptimizer(ffmodel, LR),
                    loss_type=LossType.LOSS_MEAN_SQUARED_ERROR_AVG_REDUCE)
    optimizer = torch.optim.SGD(module.parameters(), lr=LR)
    for step in range(3):
        data, target = randn(BATCH, STEPS, FEATURES, seed=step), randn(BATCH, STEPS, 2, seed=9)
        x.set_tensor(ffmodel, data)
        ffmodel.label_tensor.set_tensor(ffmodel, target)
        optimizer.zero_grad()
        loss = nn.functional.mse_loss(module(torch.tensor(data)), torch.tensor(target))
        loss.backward()
        optimizer.step()
        assert ffmodel.train_step() == pytest.approx(loss.item(), rel=1e-5)
    data = randn(BATCH, STEPS, FEATURES, seed=7)
    x.set_tensor(ffmodel, data)
    ffmodel.forward(training=False)
    np.testing.assert_allclose(out.get_tensor(ffmodel),
                               module(torch.tensor(data)).detach().numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("attrs, why", [
    ({"direction": "bidirectional"}, "attribute direction='bidirectional' is not supported"),
    ({"activations": ["Relu", "Tanh", "Tanh"]}, "attribute activations=.* is not supported"),
    ({"clip": 1.0}, "peepholes .* and clip are not supported")])
def test_what_is_not_supported_is_refused_naming_the_node(attrs, why):
    node = helper.make_node("LSTM", ["x", "w", "r"], ["y"], hidden_size=2, name="rnn", **attrs)
    proto = model([node], {"x": (STEPS, BATCH, 3)}, ["y"],
                  {"w": randn(1, 8, 3, seed=3), "r": randn(1, 8, 2, seed=4)})
    with pytest.raises(ONNXImportError, match=rf"'rnn'.*{why}"):
        ONNXModel(proto).apply(*_input(proto))


def _input(proto):
    ffmodel = FFModel(FFConfig(argv=[], batch_size=STEPS))
    return ffmodel, {"x": ffmodel.create_tensor([STEPS, BATCH, 3], DataType.DT_FLOAT)}
