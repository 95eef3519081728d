"""Models that cannot run as PyTorch reads them, in the pattern of FlexFlow's own
`pytorch/cifar10_cnn_torch.py`: `(y1, y2) = torch.split(y, 1)` unpacks pieces of the batch into
two, which only a batch of 2 can do, and the next convolution does not take the channels it is
given. Such a split is read as FlexFlow read it, the torch weights that no longer fit are not
applied (one warning), and a model that loses the batch cannot be compiled for training."""

import numpy as np
import pytest
import torch
import torch.nn as nn

from flexflow.core import CompMode, LossType, SGDOptimizer, ShapeError
from flexflow.torch.fallbacks import TorchImportWarning

from .harness import build, ff_model


class UnpackedSplitCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 4, 3)
        self.conv2 = nn.Conv2d(4, 4, 3)  # it is given 8 channels (FlexFlow's reading)
        self.flat = nn.Flatten()
        self.linear = nn.Linear(4 * 4 * 4, 10)

    def forward(self, input1, input2):
        y = torch.cat((torch.relu(self.conv1(input1)), torch.relu(self.conv1(input2))), 1)
        (y1, y2) = torch.split(y, 1)
        y = torch.cat((y1, y2), 1)
        return self.linear(self.flat(torch.relu(self.conv2(y))))


def images(batch):
    rng = np.random.default_rng(0)
    return [rng.standard_normal((batch, 3, 8, 8)).astype(np.float32) for _ in range(2)]


def trained_step(ff, tensors, inputs, output):
    ff.softmax(output)
    ff.compile(optimizer=SGDOptimizer(ff, 0.1),
               loss_type=LossType.LOSS_SPARSE_CATEGORICAL_CROSSENTROPY)
    for tensor, x in zip(tensors, inputs):
        tensor.set_tensor(ff, x)
    ff.label_tensor.set_tensor(ff, np.arange(len(inputs[0]), dtype=np.int32).reshape(-1, 1))
    return ff.train_step()


@pytest.mark.parametrize("route", ["in-process", "file"])
def test_unpacked_split_is_read_as_flexflow_did_with_its_initializers(route, tmp_path):
    torch.manual_seed(0)
    model, inputs = UnpackedSplitCNN(), images(4)
    ff, tensors = ff_model(inputs)
    with pytest.warns(TorchImportWarning) as warned:
        (output,) = build(model, ff, tensors, route, tmp_path)
    messages = [str(w.message) for w in warned]
    assert len(messages) == 2, messages
    assert "node 'split' (SPLIT; 1): PyTorch cuts the input (4, 8, 6, 6) into 4 pieces of 1 " \
           "along dim 0, which do not unpack into its 2 uses; read as FlexFlow did: dim 1 in " \
           "2 equal parts" in messages[0]
    assert "node 'conv2' (CONV2D)" in messages[1]
    assert "the torch weights have shapes [(4, 4, 3, 3), (4,)], the layer built from the node " \
           "needs [(4, 8, 3, 3), (4,)]; the model is trained with FlexFlow's initializers (no " \
           "torch weight is applied)" in messages[1]
    assert output.dims == (4, 10)
    assert np.isfinite(trained_step(ff, tensors, inputs, output))
    linear = ff.get_layer_by_name("linear").get_parameter_by_id(0).get_weights(ff)
    assert linear.shape == (10, 64)
    assert not np.allclose(linear, model.linear.weight.detach().numpy())  # FlexFlow's own


@pytest.mark.filterwarnings("error::flexflow.torch.fallbacks.TorchImportWarning")
def test_a_split_pytorch_can_unpack_keeps_its_reading_and_cannot_train(tmp_path):
    """At a batch of 2 PyTorch runs the model: the same outputs (batch 1), forward only;
    training it would compare one output row with the label of another sample."""
    model, inputs = UnpackedSplitCNN(), images(2)
    model.conv2 = nn.Conv2d(16, 4, 3)  # PyTorch's reading gives it 16 channels of batch 1
    ff, tensors = ff_model(inputs)
    (output,) = build(model, ff, tensors, "file", tmp_path)
    assert output.dims == (1, 10)
    ff.softmax(output)
    with pytest.raises(ShapeError, match=r"layer 'split' turns the batch of 2 \(-b\) into 1, "
                                         r"and the model's output \(1, 10\) is trained against "
                                         r"labels of that batch"):
        ff.compile(optimizer=SGDOptimizer(ff, 0.1))
    ff.compile(comp_mode=CompMode.INFERENCE)
    for tensor, x in zip(tensors, inputs):
        tensor.set_tensor(ff, x)
    ff.forward()
    with torch.no_grad():
        expected = torch.softmax(model(*(torch.from_numpy(x) for x in inputs)), -1).numpy()
    np.testing.assert_allclose(output_of(ff), expected, rtol=1e-5, atol=1e-5)


def output_of(ff):
    return ff.get_layers()[max(ff.get_layers())].get_output_tensor().get_tensor(ff)
