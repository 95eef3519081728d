"""ResNet-18 defined in PyTorch (torchvision's architecture: a 7x7 stride-2 stem with batch norm
and 3x3 max pooling, four stages of two basic blocks of 64, 128, 256 and 512 channels, adaptive
average pooling to 1x1 and a linear classifier), exported to `resnet18.ff` (`-f FILE`) and
`resnet18.ff.npz`. Then run `resnet.py`.
"""

import torch
import torch.nn as nn

from flexflow.torch.model import PyTorchModel

from torch_example_utils import ff_file


class BasicBlock(nn.Module):
    """relu(bn(conv3x3(relu(bn(conv3x3(x))))) + shortcut(x)); the shortcut is a strided 1x1
    convolution with batch norm where the shape changes."""

    def __init__(self, in_channels: int, channels: int, stride: int = 1):
        super().__init__()
        self.conv1 = nn.Conv2d(in_channels, channels, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(channels)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = nn.Conv2d(channels, channels, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(channels)
        self.downsample = None
        if stride != 1 or in_channels != channels:
            self.downsample = nn.Sequential(
                nn.Conv2d(in_channels, channels, 1, stride, bias=False), nn.BatchNorm2d(channels))

    def forward(self, x):
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        out += identity
        return self.relu(out)


class ResNet18(nn.Module):
    """`width` is the channel count of the first stage (64 in ResNet-18; each later stage
    doubles it)."""

    def __init__(self, num_classes: int = 10, width: int = 64):
        super().__init__()
        self.conv1 = nn.Conv2d(3, width, 7, 2, 3, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(3, 2, 1)
        stages, in_channels = [], width
        for channels, stride in ((width, 1), (2 * width, 2), (4 * width, 2), (8 * width, 2)):
            stages.append(nn.Sequential(BasicBlock(in_channels, channels, stride),
                                        BasicBlock(channels, channels)))
            in_channels = channels
        self.layer1, self.layer2, self.layer3, self.layer4 = stages
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(8 * width, num_classes)

    def forward(self, x):
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        x = torch.flatten(self.avgpool(x), 1)
        return self.fc(x)


if __name__ == "__main__":
    filename = ff_file("resnet18.ff")
    PyTorchModel(ResNet18()).torch_to_file(filename)
    print(f"wrote {filename} and {filename}.npz")
