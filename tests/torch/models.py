"""Torch models the front-end tests translate, and the inputs they are run on.

MLP, the example CNN and ResNet-18 come from examples/pytorch (one definition each); the models
here exercise what the examples do not. `FactSheetCNN` is the two-input CNN whose `.ff` lines the
FlexFlow reference records: `torch.split(y, 1)` cuts dim 0 into pieces of 1, so in PyTorch it
runs with a batch of exactly 2 and returns a batch of 1.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "pytorch"
sys.path.insert(0, str(EXAMPLES))

from cifar10_cnn_torch import CNN  # noqa: E402
from mnist_mlp_torch import MLP  # noqa: E402
from resnet_torch import ResNet18  # noqa: E402


class FactSheetCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 32, 3, 1)
        self.conv2 = nn.Conv2d(128, 32, 3, 1)
        self.pool1 = nn.MaxPool2d(2, 2)
        self.flat1 = nn.Flatten()
        self.linear1 = nn.Linear(32 * 6 * 6, 10)
        self.relu = nn.ReLU()

    def forward(self, input1, input2):
        y1 = self.relu(self.conv1(input1))
        y2 = self.relu(self.conv1(input2))
        y = torch.cat((y1, y2), 1)
        (y1, y2) = torch.split(y, 1)
        y = torch.cat((y1, y2), 1)
        y = self.relu(self.conv2(y))
        y = self.pool1(y)
        y = self.flat1(y)
        y = y * 2.0 + 1.0
        return (self.linear1(y), y)


class VGG(nn.Module):
    """VGG-style: stacks of 3x3 convolutions with ReLU, max pooling, a dropout classifier."""

    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(inplace=True),
            nn.Conv2d(16, 16, 3, padding=1), nn.ReLU(inplace=True), nn.MaxPool2d(2, 2),
            nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(inplace=True),
            nn.Conv2d(32, 32, 3, padding=1), nn.ReLU(inplace=True), nn.MaxPool2d(2, 2))
        self.classifier = nn.Sequential(
            nn.Linear(32 * 4 * 4, 64), nn.ReLU(True), nn.Dropout(0.5), nn.Linear(64, 10))

    def forward(self, x):
        x = self.features(x)
        x = x.view(x.size(0), -1)
        return self.classifier(x)


class EncoderLayer(nn.Module):
    """A post-norm transformer encoder layer from nn.MultiheadAttention, nn.LayerNorm and
    nn.Linear; `batch_first=False` runs the attention sequence-first between transposes;
    `dropout` drops its attention weights in training."""

    def __init__(self, embed=16, heads=4, hidden=32, batch_first=True, dropout=0.0):
        super().__init__()
        self.batch_first = batch_first
        self.attn = nn.MultiheadAttention(embed, heads, dropout=dropout, batch_first=batch_first)
        self.norm1 = nn.LayerNorm(embed)
        self.ff1 = nn.Linear(embed, hidden)
        self.ff2 = nn.Linear(hidden, embed)
        self.norm2 = nn.LayerNorm(embed)

    def forward(self, x):
        q = x if self.batch_first else x.transpose(0, 1)
        a, _ = self.attn(q, q, q, need_weights=False)
        a = a if self.batch_first else a.transpose(0, 1)
        x = self.norm1(x + a)
        return self.norm2(x + self.ff2(F.gelu(self.ff1(x))))


class MatmulAttentionLayer(nn.Module):
    """Attention written out: per-head views, q k^T / sqrt(d), softmax, weighted values."""

    def __init__(self, embed=16, heads=2):
        super().__init__()
        self.heads, self.head_dim = heads, embed // heads
        self.q, self.k, self.v = (nn.Linear(embed, embed) for _ in range(3))
        self.out = nn.Linear(embed, embed)
        self.norm = nn.LayerNorm(embed, eps=1e-6)

    def forward(self, x):
        b, length, embed = x.shape
        def split(t):
            return t.view(b, length, self.heads, self.head_dim).transpose(1, 2)
        q, k, v = split(self.q(x)), split(self.k(x)), split(self.v(x))
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.head_dim)
        context = torch.matmul(F.softmax(scores, dim=-1), v)
        context = context.transpose(1, 2).contiguous().view(b, length, embed)
        return self.norm(x + self.out(context))


class EmbeddingBag(nn.Module):
    """Token embeddings averaged over the sequence, then a classifier."""

    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(50, 12)
        self.fc = nn.Linear(12, 5)

    def forward(self, tokens):
        return self.fc(self.embed(tokens).mean(dim=1))


class EmbeddingPositional(nn.Module):
    """Embeddings plus a learned positional table (an nn.Parameter used directly) and a scale
    buffer, layer-normalised; one embedding table looked up twice."""

    def __init__(self, length=6, dim=8):
        super().__init__()
        self.embed = nn.Embedding(30, dim)
        self.position = nn.Parameter(torch.randn(1, length, dim))
        self.register_buffer("scale", torch.full((dim,), 0.5))
        self.norm = nn.LayerNorm(dim)
        self.fc = nn.Linear(length * dim, 3)

    def forward(self, tokens, other):
        x = self.embed(tokens) + self.position * self.scale + self.embed(other)
        return self.fc(torch.flatten(self.norm(x), 1))


class Constructs(nn.Module):
    """Functional forms and the cases FlexFlow's importer got wrong: tuple conv and pool
    arguments, non-square pools, AdaptiveAvgPool2d, `view(x.size(0), -1)`, `torch.flatten(x, 1)`,
    `expand`, `cat` without a dim, tensor - tensor, tensor / tensor, reversed scalar ops, slicing,
    BatchNorm1d, a Linear on a 3-d input and a module called twice."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 6, (3, 5), stride=(1, 2), padding=(1, 2))
        self.bn = nn.BatchNorm2d(6)
        self.pool = nn.MaxPool2d((2, 1), stride=(2, 1))
        self.adaptive = nn.AdaptiveAvgPool2d((2, 2))
        self.shared = nn.Linear(24, 24)
        self.bn1d = nn.BatchNorm1d(24, eps=1e-3, momentum=0.2)
        self.seq = nn.Linear(4, 3)

    def forward(self, x):
        y = self.bn(self.conv(x))                       # (b, 6, 8, 4)
        y = F.relu(self.pool(y))                        # (b, 6, 4, 4)
        z = F.avg_pool2d(y, (2, 2), 1, 1)               # (b, 6, 5, 5)
        a = torch.flatten(self.adaptive(y), 1)          # (b, 24)
        v = F.max_pool2d(y, 2).view(y.size(0), -1)      # (b, 24)
        h = self.shared(torch.sigmoid(a)) - self.shared(torch.tanh(v))
        h = self.bn1d(h) / (1.0 + torch.exp(v - a).mean(1, keepdim=True))
        s = (2.0 - h) * (3.0 / (h * h + 1.0)) ** 2
        w = torch.cat([s, h])                           # (2b, 24)
        w = w.reshape(-1, 6, 4)[:, 1:5, :]              # (2b, 4, 4)
        e = self.seq(w.unsqueeze(1).expand(-1, 2, 4, 4))  # (2b, 2, 4, 3)
        t = z[..., 0, 1:4].permute(1, 0, 2)             # (6, b, 3)
        return F.elu(e), torch.rsqrt(z * z + 1.0), F.gelu(t) + z.shape[1]


class Casts(nn.Module):
    """Data type changes, each an FFModel cast: int64 to float32, float32 to float64 and back."""

    def forward(self, ids, x):
        wide = x.to(torch.float64) + 1.0
        return ids.float() * 0.5, wide, wide.type_as(x)


def float_inputs(*shapes, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(shape).astype(np.float32) for shape in shapes]


def int_inputs(high, *shapes, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.integers(0, high, shape).astype(np.int64) for shape in shapes]
