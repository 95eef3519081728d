"""Weights carried across: the .npz format beside a .ff file, sharing of a module called twice,
parameters used directly (trainable) and buffers (frozen), and files without weights."""

import numpy as np
import pytest
import torch

from flexflow.core import CompMode
from flexflow.torch.model import PyTorchModel

from . import models
from .harness import ff_model


def test_npz_holds_torch_tensors_by_node_without_pickle(tmp_path):
    model = models.FactSheetCNN()
    PyTorchModel(model).torch_to_file(tmp_path / "cnn.ff")
    with np.load(tmp_path / "cnn.ff.npz", allow_pickle=False) as archive:
        assert sorted(archive.files) == ["__shared__", "conv1/bias", "conv1/weight",
                                         "conv2/bias", "conv2/weight", "linear1/bias",
                                         "linear1/weight"]
        np.testing.assert_array_equal(archive["conv2/weight"], model.conv2.weight.detach())
        assert archive["conv1/weight"].dtype == np.float32
        assert archive["__shared__"].tolist() == [["conv1_1", "conv1"]]


def test_batch_norm_buffers_and_attributes_are_saved(tmp_path):
    model = models.EmbeddingPositional()
    model.norm.weight.data.fill_(2.0)
    PyTorchModel(model).torch_to_file(tmp_path / "e.ff")
    with np.load(tmp_path / "e.ff.npz", allow_pickle=False) as archive:
        assert {"position/parameter", "scale/buffer", "norm/weight", "norm/bias",
                "embed/weight"} <= set(archive.files)
        assert archive["__shared__"].tolist() == [["embed_1", "embed"]]
    PyTorchModel(models.ResNet18(width=8)).torch_to_file(tmp_path / "r.ff")
    with np.load(tmp_path / "r.ff.npz", allow_pickle=False) as archive:
        assert {"bn1/running_mean", "bn1/running_var", "layer4_1_bn2/weight"} <= set(
            archive.files)
        assert not any("num_batches_tracked" in key for key in archive.files)


@pytest.mark.parametrize("route", ["in-process", "file"])
def test_module_called_twice_is_one_layer(route, tmp_path):
    ff, tensors = ff_model(models.float_inputs((2, 3, 16, 16), (2, 3, 16, 16)))
    model = models.FactSheetCNN()
    if route == "file":
        PyTorchModel(model).torch_to_file(tmp_path / "cnn.ff")
        PyTorchModel.file_to_ff(tmp_path / "cnn.ff", ff, tensors)
    else:
        PyTorchModel(model).torch_to_ff(ff, tensors)
    ff.compile(comp_mode=CompMode.INFERENCE)
    assert ff.get_tensor_by_id(5) is not None  # conv1 (2), conv2 (2), linear1 (2) ...
    with pytest.raises(IndexError):
        ff.get_tensor_by_id(6)  # ... and nothing for conv1_1
    shared = ff.get_layer_by_name("conv1_1").get_parameter_by_id(0).get_weights(ff)
    np.testing.assert_array_equal(shared, model.conv1.weight.detach().numpy())


def test_without_weights_flexflow_initialises(tmp_path):
    torch.manual_seed(0)
    model = models.MLP()
    PyTorchModel(model).torch_to_file(tmp_path / "mlp.ff", weights=False)
    assert not (tmp_path / "mlp.ff.npz").exists()
    ff, tensors = ff_model(models.float_inputs((4, 784)))
    PyTorchModel.file_to_ff(tmp_path / "mlp.ff", ff, tensors)
    ff.compile(comp_mode=CompMode.INFERENCE)
    kernel = ff.get_layer_by_name("linear1").get_parameter_by_id(0).get_weights(ff)
    assert kernel.shape == (512, 784)
    assert not np.allclose(kernel, model.linear1.weight.detach().numpy())


def test_weights_are_reloaded_at_every_compile():
    """compile() creates the weights from the torch values each time, as FlexFlow re-initialises
    them at every compile."""
    model = models.EmbeddingBag()
    ff, tensors = ff_model(models.int_inputs(50, (4, 7)))
    PyTorchModel(model).torch_to_ff(ff, tensors)
    table = model.embed.weight.detach().numpy()
    for _ in range(2):
        ff.compile(comp_mode=CompMode.INFERENCE)
        parameter = ff.get_layer_by_name("embed").get_parameter_by_id(0)
        np.testing.assert_array_equal(parameter.get_weights(ff), table)
        parameter.set_weights(ff, np.zeros_like(table))
