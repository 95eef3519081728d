"""PyTorch models the ONNX tests export and import: an MLP, a CIFAR-style CNN, ResNet-18 (written
here: torchvision is not installed) and a transformer encoder layer, plus the export and import
helpers the tests share."""

from __future__ import annotations

import contextlib
import io
import warnings

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


class BasicBlock(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.shortcut = nn.Sequential()
        if stride != 1 or cin != cout:
            self.shortcut = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False),
                                          nn.BatchNorm2d(cout))

    def forward(self, x):
        y = torch.relu(self.bn1(self.conv1(x)))
        return torch.relu(self.bn2(self.conv2(y)) + self.shortcut(x))


class ResNet18(nn.Module):
    """He et al.'s ResNet-18: a 7x7 stem, four stages of two basic blocks, global pooling."""

    def __init__(self, classes=10, width=64):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, width, 7, 2, 3, bias=False), nn.BatchNorm2d(width),
                                  nn.ReLU(), nn.MaxPool2d(3, 2, 1))
        blocks, cin = [], width
        for stage in range(4):
            cout = width * 2 ** stage
            blocks += [BasicBlock(cin, cout, 1 if stage == 0 else 2), BasicBlock(cout, cout, 1)]
            cin = cout
        self.blocks = nn.Sequential(*blocks)
        self.fc = nn.Linear(cin, classes)

    def forward(self, x):
        x = nn.functional.adaptive_avg_pool2d(self.blocks(self.stem(x)), 1)
        return self.fc(torch.flatten(x, 1))


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
