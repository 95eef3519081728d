"""AlexNet for 229x229 images in PyTorch, exported with its weights to `alexnet_pt.onnx`
(`-f FILE`, `--exporter`). Then run `alexnet.py`."""

import torch

from models import AlexNet
from onnx_example_utils import export

if __name__ == "__main__":
    torch.manual_seed(0)
    export(AlexNet(), torch.randn(2, 3, 229, 229), "alexnet_pt.onnx")
