"""FlexFlow's MNIST MLP (784-512-512-10) in PyTorch, exported with its weights to
`mnist_mlp_pt.onnx` (`-f FILE`, `--exporter`). Then run `mnist_mlp.py`."""

import torch

from models import MLP
from onnx_example_utils import export

if __name__ == "__main__":
    torch.manual_seed(0)
    export(MLP(), torch.randn(2, 784), "mnist_mlp_pt.onnx")
