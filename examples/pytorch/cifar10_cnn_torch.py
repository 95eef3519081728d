"""A two-input CIFAR-10 CNN in PyTorch, exported to `cnn.ff` (`-f FILE`) and `cnn.ff.npz`.

Both inputs go through the same `conv1` (one layer, shared weights, in FlexFlow too); the two
feature maps are concatenated, split back into halves with `torch.split` and concatenated in
swapped order, then a second convolution block and two dense layers follow. The model returns
the logits and the hidden features. Then run `cifar10_cnn.py`.
"""

import torch
import torch.nn as nn

from flexflow.torch.model import PyTorchModel

from torch_example_utils import ff_file


class CNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 32, 3, 1)
        self.conv2 = nn.Conv2d(64, 32, 3, 1)
        self.pool1 = nn.MaxPool2d(2, 2)
        self.conv3 = nn.Conv2d(32, 64, 3, 1)
        self.conv4 = nn.Conv2d(64, 64, 3, 1)
        self.pool2 = nn.MaxPool2d(2, 2)
        self.flat1 = nn.Flatten()
        self.linear1 = nn.Linear(64 * 5 * 5, 512)
        self.linear2 = nn.Linear(512, 10)
        self.relu = nn.ReLU()

    def forward(self, input1, input2):
        y1 = self.relu(self.conv1(input1))
        y2 = self.relu(self.conv1(input2))
        y = torch.cat((y1, y2), 1)
        (y1, y2) = torch.split(y, 32, 1)
        y = torch.cat((y2, y1), 1)
        y = self.pool1(self.relu(self.conv2(y)))
        y = self.relu(self.conv3(y))
        y = self.pool2(self.relu(self.conv4(y)))
        y = self.relu(self.linear1(self.flat1(y)))
        yo = self.linear2(y)
        return (yo, y)


if __name__ == "__main__":
    filename = ff_file("cnn.ff")
    PyTorchModel(CNN()).torch_to_file(filename)
    print(f"wrote {filename} and {filename}.npz")
