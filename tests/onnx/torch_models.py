"""PyTorch models the ONNX tests export and import: an MLP, a CIFAR-style CNN, the examples'
ResNet-18 (torchvision is not installed) and a transformer encoder layer, plus the export and
import helpers the tests share."""

from __future__ import annotations

import contextlib
import importlib.util
import io
import sys
import warnings
from pathlib import Path

import numpy as np
import onnx
import torch
from torch import nn

from flexflow.core import CompMode, DataType, FFConfig, FFModel
from flexflow.onnx.model import ONNXModel


class MLP(nn.Module):
    def __init__(self, features=784, hidden=64, classes=10):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(features, hidden), nn.ReLU(), nn.Linear(hidden, hidden),
                                 nn.ReLU(), nn.Linear(hidden, classes))

    def forward(self, x):
        return self.net(x)


class CNN(nn.Module):
    """FlexFlow's CIFAR-10 CNN example, narrower."""

    def __init__(self, classes=10):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 8, 3), nn.ReLU(),
            nn.MaxPool2d(2), nn.Conv2d(8, 16, 3, padding=1), nn.ReLU(), nn.Conv2d(16, 16, 3),
            nn.ReLU(), nn.MaxPool2d(2))
        self.classifier = nn.Sequential(nn.Flatten(), nn.Linear(16 * 6 * 6, 32), nn.ReLU(),
                                        nn.Linear(32, classes))

    def forward(self, x):
        return self.classifier(self.features(x))


def _example_models():
    """examples/onnx/models.py (a script folder, not a package), loaded from its file."""
    path = Path(__file__).resolve().parents[2] / "examples" / "onnx" / "models.py"
    spec = importlib.util.spec_from_file_location("onnx_example_models", path)
    module = sys.modules[spec.name] = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


ResNet18 = _example_models().ResNet18  # the ResNet-18 the ONNX examples export


class Encoder(nn.Module):
    """One transformer encoder layer (self-attention, GELU feed-forward, layer norms) and a
    classifier on the mean of the sequence."""

    def __init__(self, dim=32, heads=4, classes=10, dropout=0.0):
        super().__init__()
        self.layer = nn.TransformerEncoderLayer(dim, heads, 2 * dim, dropout=dropout,
                                                batch_first=True, activation="gelu")
        self.head = nn.Linear(dim, classes)

    def forward(self, x):
        return self.head(self.layer(x).mean(dim=1))


def randomize_batch_norm(model: nn.Module, seed: int = 0) -> None:
    """Non-trivial running statistics and affine parameters, so inference checks use them."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, nn.BatchNorm2d):
                for tensor, low, high in ((module.running_mean, -0.5, 0.5),
                                          (module.running_var, 0.5, 2.0),
                                          (module.weight, 0.5, 1.5), (module.bias, -0.5, 0.5)):
                    tensor.copy_(torch.rand(tensor.shape, generator=generator) * (high - low)
                                 + low)


def export(model: nn.Module, example: torch.Tensor, dynamo: bool) -> onnx.ModelProto:
    """The eval-mode model as ONNX, with its weights. The TorchScript exporter keeps batch norms
    as BatchNormalization nodes (no constant folding into the convolutions), so they train."""
    model.eval()
    buffer = io.BytesIO()
    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
        warnings.simplefilter("ignore")
        if dynamo:
            torch.onnx.export(model, (example,), buffer, dynamo=True)
        else:
            torch.onnx.export(model, (example,), buffer, dynamo=False, do_constant_folding=False)
    return onnx.load_from_string(buffer.getvalue())


def imported(proto: onnx.ModelProto, batch: int, softmax: bool = False, argv=()):
    """(ffmodel, input tensor, output tensor) for the model, not compiled yet."""
    onnx_model = ONNXModel(proto)
    (name, described), = onnx_model.inputs.items()
    ffmodel = FFModel(FFConfig(argv=list(argv), batch_size=batch))
    x = ffmodel.create_tensor([batch] + described.dims[1:], DataType.DT_FLOAT)
    out = onnx_model.apply(ffmodel, {name: x})
    if softmax:
        out = ffmodel.softmax(out)
    return ffmodel, x, out


def ff_inference(proto: onnx.ModelProto, data: np.ndarray, argv=()) -> np.ndarray:
    ffmodel, x, out = imported(proto, data.shape[0], argv=argv)
    ffmodel.compile(comp_mode=CompMode.INFERENCE)
    x.set_tensor(ffmodel, data)
    ffmodel.forward(training=False)
    return out.get_tensor(ffmodel)
