"""FlexFlow's CIFAR-10 CNN in PyTorch, exported with its weights to `cifar10_cnn_pt.onnx`
(`-f FILE`, `--exporter`). Then run `cifar10_cnn.py`."""

import torch

from models import CNN
from onnx_example_utils import export

if __name__ == "__main__":
    torch.manual_seed(0)
    export(CNN(), torch.randn(2, 3, 32, 32), "cifar10_cnn_pt.onnx")
