"""PyTorch twins of bench/dnn.py's networks (`cifar10_cnn`, `alexnet_cifar`, `resnet14_cifar`,
`resnet18` at any image size, `transformer_lm`), and what both frameworks train on in bench/vs_ddp.py: one synthetic
CIFAR-shaped batch, SGD with momentum on the cross-entropy of the logits (our models end in a
softmax trained with the sparse cross-entropy, the same loss), and a timer of a run of steps.

Only torch and NumPy are imported here: DistributedDataParallel's ranks import this module in
fresh processes, and flexflow-dask's imports would slow every start."""

from __future__ import annotations

import time
from typing import Callable

import numpy as np

CLASSES = 10
LEARNING_RATE, MOMENTUM = 0.01, 0.9


def _alexnet_cifar():
    """dnn.alexnet_cifar: five ReLU convolutions (2x2 max pools after the first, second and
    fifth), two 4096-wide ReLU dense layers, the classifier."""
    from torch import nn
    layers, channels_in = [], 3
    for index, (channels, kernel, pad) in enumerate([(32, 5, 2), (64, 5, 2), (96, 3, 1),
                                                     (96, 3, 1), (64, 3, 1)]):
        layers += [nn.Conv2d(channels_in, channels, kernel, padding=pad), nn.ReLU()]
        if index in (0, 1, 4):
            layers.append(nn.MaxPool2d(2, 2))
        channels_in = channels
    return nn.Sequential(*layers, nn.Flatten(), nn.Linear(64 * 4 * 4, 4096), nn.ReLU(),
                         nn.Linear(4096, 4096), nn.ReLU(), nn.Linear(4096, CLASSES))


def _cifar10_cnn():
    """dnn.cifar10_cnn: per block a padded and an unpadded 3x3 ReLU convolution and a 2x2 max
    pool (32x32 -> 15x15 -> 6x6), then dense 512 and the classifier."""
    from torch import nn
    layers, channels_in = [], 3
    for channels in (32, 64):
        layers += [nn.Conv2d(channels_in, channels, 3, padding=1), nn.ReLU(),
                   nn.Conv2d(channels, channels, 3), nn.ReLU(), nn.MaxPool2d(2, 2)]
        channels_in = channels
    return nn.Sequential(*layers, nn.Flatten(), nn.Linear(64 * 6 * 6, 512), nn.ReLU(),
                         nn.Linear(512, CLASSES))


def _resnet14_cifar():
    """dnn.resnet14_cifar: a 3x3 stem (32 channels, batch norm, ReLU), three stages of two basic
    blocks (32, 64, 128 channels; stages 2 and 3 start with stride 2 and a strided 1x1
    convolution as the shortcut, without batch norm), 8x8 average pooling, the classifier.
    Convolutions without bias, as ours.

    `nn.BatchNorm2d` is what a DDP user has: each replica normalises its batch / N samples by
    their own statistics. Our batch norm by default takes exact statistics over the whole batch
    across devices (a cross-partition reduction), which costs messages DDP does not send;
    `--per-partition-batch-norm` gives DDP's statistics per sample partition instead."""
    from torch import nn

    class BasicBlock(nn.Module):
        def __init__(self, channels_in, width, stride):
            super().__init__()
            self.residual = nn.Sequential(
                nn.Conv2d(channels_in, width, 3, stride, 1, bias=False), nn.BatchNorm2d(width),
                nn.ReLU(), nn.Conv2d(width, width, 3, 1, 1, bias=False), nn.BatchNorm2d(width))
            self.shortcut = (nn.Identity() if stride == 1 and channels_in == width
                             else nn.Conv2d(channels_in, width, 1, stride, bias=False))

        def forward(self, x):
            return nn.functional.relu(self.residual(x) + self.shortcut(x))

    layers, channels_in = [nn.Conv2d(3, 32, 3, padding=1, bias=False), nn.BatchNorm2d(32),
                           nn.ReLU()], 32
    for stage, width in enumerate((32, 64, 128)):
        layers += [BasicBlock(channels_in, width, 1 if stage == 0 else 2),
                   BasicBlock(width, width, 1)]
        channels_in = width
    return nn.Sequential(*layers, nn.AvgPool2d(8), nn.Flatten(), nn.Linear(128, CLASSES))


def _resnet18(classes=1000):
    """dnn.resnet18: a 7x7 stride-2 stem (batch norm, ReLU), a 3x3 stride-2 max pool, four stages
    of two basic blocks (64 to 512 channels, batch-normalised strided 1x1 shortcuts where the
    shape changes), global average pooling, the classifier. Convolutions without bias, as ours."""
    from torch import nn

    def conv_bn(channels_in, width, kernel, stride):
        return [nn.Conv2d(channels_in, width, kernel, stride, kernel // 2, bias=False),
                nn.BatchNorm2d(width)]

    class BasicBlock(nn.Module):
        def __init__(self, channels_in, width, stride):
            super().__init__()
            self.residual = nn.Sequential(*conv_bn(channels_in, width, 3, stride), nn.ReLU(),
                                          *conv_bn(width, width, 3, 1))
            self.shortcut = (nn.Identity() if stride == 1 and channels_in == width
                             else nn.Sequential(*conv_bn(channels_in, width, 1, stride)))

        def forward(self, x):
            return nn.functional.relu(self.residual(x) + self.shortcut(x))

    layers, channels_in = [*conv_bn(3, 64, 7, 2), nn.ReLU(), nn.MaxPool2d(3, 2, 1)], 64
    for stage, width in enumerate((64, 128, 256, 512)):
        layers += [BasicBlock(channels_in, width, 1 if stage == 0 else 2),
                   BasicBlock(width, width, 1)]
        channels_in = width
    return nn.Sequential(*layers, nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                         nn.Linear(512, classes))


def _transformer_lm(vocab=8192, width=512, heads=8, layers=4):
    """dnn.transformer_lm: an embedding, `layers` x (self-attention + residual + layer norm,
    a GELU dense layer 4x as wide and a dense layer back + residual + layer norm), the
    next-token classifier at every position (logits (batch, seq, vocab))."""
    from torch import nn

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.attention = nn.MultiheadAttention(width, heads, batch_first=True)
            self.norm1, self.norm2 = nn.LayerNorm(width), nn.LayerNorm(width)
            self.feed = nn.Sequential(nn.Linear(width, 4 * width), nn.GELU(),
                                      nn.Linear(4 * width, width))

        def forward(self, x):
            x = self.norm1(self.attention(x, x, x, need_weights=False)[0] + x)
            return self.norm2(self.feed(x) + x)

    return nn.Sequential(nn.Embedding(vocab, width), *[Block() for _ in range(layers)],
                         nn.Linear(width, vocab))


MODULES = {"cifar10_cnn": _cifar10_cnn, "alexnet_cifar": _alexnet_cifar,
           "resnet14_cifar": _resnet14_cifar, "resnet18": _resnet18,
           "transformer_lm": _transformer_lm}


def module(name: str, **sizes):
    """A fresh torch module of the network `name` (seeded, so every process starts alike),
    at `sizes` where its builder takes them (transformer_lm's vocab, width, heads, layers)."""
    import torch
    torch.manual_seed(0)
    return MODULES[name](**sizes)


def parameter_count(net) -> int:
    return sum(parameter.numel() for parameter in net.parameters())


def cifar_batch(batch: int) -> tuple[np.ndarray, np.ndarray]:
    """The synthetic batch every system trains on: images (batch, 3, 32, 32) float32 and
    labels (batch, 1) int32, from one seed."""
    rng = np.random.default_rng(0)
    return (rng.standard_normal((batch, 3, 32, 32)).astype(np.float32),
            rng.integers(0, CLASSES, (batch, 1)).astype(np.int32))


def sgd_step(net, images: np.ndarray, labels: np.ndarray) -> Callable[[], None]:
    """One training step of `net` on the batch, as a function of no arguments."""
    import torch
    optimizer = torch.optim.SGD(net.parameters(), lr=LEARNING_RATE, momentum=MOMENTUM)
    x, y = torch.from_numpy(images), torch.from_numpy(labels[:, 0]).long()

    def step():
        optimizer.zero_grad()
        torch.nn.functional.cross_entropy(net(x), y).backward()
        optimizer.step()
    return step


def seconds(step: Callable[[], object], steps: int,
            barrier: Callable[[], object] = lambda: None) -> float:
    """Wall time of `steps` calls of `step`, between two calls of `barrier` (which lines the
    processes of a distributed run up, so the time is the slowest one's)."""
    barrier()
    start = time.perf_counter()
    for _ in range(steps):
        step()
    barrier()
    return time.perf_counter() - start
