"""ResNet-18 in PyTorch, exported with its weights to `resnet18.onnx` (`-f FILE`,
`--exporter`). Then run `resnet.py`."""

import torch

from models import ResNet18
from onnx_example_utils import export

if __name__ == "__main__":
    torch.manual_seed(0)
    export(ResNet18(), torch.randn(2, 3, 32, 32), "resnet18.onnx")
