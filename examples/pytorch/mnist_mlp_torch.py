"""FlexFlow's MNIST MLP (784-512-512-10) defined in PyTorch and exported, in plain Python, to
`mlp.ff` (`-f FILE` to change it) and its weights to `mlp.ff.npz`. Then run `mnist_mlp.py`."""

import torch.nn as nn

from flexflow.torch.model import PyTorchModel

from torch_example_utils import ff_file


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear1 = nn.Linear(784, 512)
        self.linear2 = nn.Linear(512, 512)
        self.linear3 = nn.Linear(512, 10)
        self.relu = nn.ReLU()
        self.softmax = nn.Softmax()

    def forward(self, x):
        y = self.linear1(x)
        y = self.relu(y)
        y = self.linear2(y)
        y = self.relu(y)
        y = self.linear3(y)
        y = self.softmax(y)
        return y


if __name__ == "__main__":
    filename = ff_file("mlp.ff")
    PyTorchModel(MLP()).torch_to_file(filename)
    print(f"wrote {filename} and {filename}.npz")
