"""The torch constructs composed from FFModel layers (frontends/torch/composed.py) follow PyTorch:
forward outputs within 1e-5, in-process and through a .ff file with its .npz weights; training
losses over 3 SGD steps within 1e-4 relative (so the gradients of every weight agree); one of
them under a parameter-parallel strategy on 2 devices as on one.

Models: Conv1d, SiLU, ReLU6, Hardtanh (modules and functions), chunk and GroupNorm of a 3-d
input; GroupNorm (a module called twice, F.group_norm with and without weights); attention by
F.scaled_dot_product_attention (causal, a float mask buffer with a scale, a bool mask input);
LSTMs (two layers batch-first, a module called twice, sequence-first without biases from given
h0 and c0).
"""

import numpy as np
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from flexflow.core import LossType, SGDOptimizer

from ..parallel.models import strategy
from . import models
from .harness import assert_outputs_match, build, ff_model, ff_outputs, torch_outputs
from .test_training import assert_logits_train_like_pytorch, batches, ff_losses

LENGTH, EMBED, HEADS = 5, 8, 2
CLASSES = 4  # even, so that a parameter-parallel strategy splits the classifier
LR = 0.01


class Outputs(nn.Module):
    """A model returning its logits and other values to compare; `logits_only` keeps the logits,
    which the training tests train on."""

    logits_only = False

    def result(self, logits, *others):
        return logits if self.logits_only else (logits, *others)


class Activations(Outputs):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv1d(3, 8, 3, padding=1)
        self.silu, self.relu6, self.hardtanh = nn.SiLU(), nn.ReLU6(), nn.Hardtanh(-0.5, 1.5)
        self.conv2 = nn.Conv1d(13, 6, 2, stride=2)
        self.norm = nn.GroupNorm(3, 6)
        self.fc = nn.Linear(6 * 4, CLASSES)

    def forward(self, x):  # (N, 3, 8)
        y = self.conv(x) * 4.0  # beyond ReLU6's 6
        a, b, c = y.chunk(3, dim=1)  # 3, 3 and 2 channels
        d, e = torch.chunk(c, 2, 1)
        z = torch.cat([self.silu(a), F.silu(b), self.relu6(c), F.relu6(d),
                       F.hardtanh(e, -0.5, 0.5), self.hardtanh(b)], 1)
        z = self.norm(self.conv2(z))
        return self.result(self.fc(z.flatten(1)), z)


class GroupNorms(Outputs):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.norm = nn.GroupNorm(4, 8)
        self.plain = nn.GroupNorm(2, 8, eps=1e-3, affine=False)
        self.weight, self.bias = nn.Parameter(torch.randn(8)), nn.Parameter(torch.randn(8))
        self.fc = nn.Linear(8 * 4 * 4, CLASSES)
        for tensor in (self.norm.weight, self.norm.bias):  # not torch's ones and zeros
            nn.init.normal_(tensor)

    def forward(self, x):  # (N, 3, 4, 4)
        y = self.norm(F.silu(self.norm(self.conv(x))))
        y = F.group_norm(y, 4, self.weight, self.bias)
        y = self.plain(y) + F.group_norm(y, 1)
        return self.result(self.fc(y.flatten(1)), y)


class Attention(Outputs):
    def __init__(self, dropout_p=0.0):
        super().__init__()
        self.qkv = nn.Linear(EMBED, 3 * EMBED)
        self.out = nn.Linear(EMBED, EMBED)
        self.fc = nn.Linear(EMBED * LENGTH, CLASSES)
        self.register_buffer("bias", torch.randn(LENGTH, LENGTH))
        self.dropout_p = dropout_p

    def forward(self, x, keep):  # (N, LENGTH, EMBED), bool (N, 1, LENGTH, LENGTH)
        q, k, v = self.qkv(x).chunk(3, -1)
        q, k, v = (t.view(-1, LENGTH, HEADS, EMBED // HEADS).transpose(1, 2) for t in (q, k, v))
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True, dropout_p=self.dropout_p)
        b = F.scaled_dot_product_attention(q, k, v, attn_mask=self.bias, scale=0.3)
        c = F.scaled_dot_product_attention(q, k, v, keep)
        y = self.out((a + b - c).transpose(1, 2).reshape(-1, LENGTH, EMBED))
        return self.result(self.fc(y.flatten(1)), y)


class Recurrent(Outputs):
    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(5, 6, num_layers=2, batch_first=True)
        self.again = nn.LSTM(6, 6, batch_first=True)
        self.seq_first = nn.LSTM(6, 4, bias=False)
        self.init = nn.Linear(5, 8)
        self.fc = nn.Linear(4, CLASSES)

    def forward(self, x):  # (N, 4, 5)
        y, (h, c) = self.lstm(x)
        y = self.again(self.again(y)[0])[0]
        h0, c0 = torch.tanh(self.init(x[:, 0])).unsqueeze(0).chunk(2, 2)
        z, (h1, c1) = self.seq_first(y.transpose(0, 1), (h0, c0))
        return self.result(self.fc(z[-1]), h, c, z, h1, c1)


def attention_inputs(seed=0):
    """x, and a bool mask that keeps each query's own key and about half of the others."""
    rng = np.random.default_rng(seed)
    keep = rng.random((4, 1, LENGTH, LENGTH)) < 0.5
    keep |= np.eye(LENGTH, dtype=bool)
    return models.float_inputs((4, LENGTH, EMBED), seed=seed) + [keep]


CASES = {
    "activations": (Activations, lambda s=0: models.float_inputs((4, 3, 8), seed=s)),
    "group_norm": (GroupNorms, lambda s=0: models.float_inputs((4, 3, 4, 4), seed=s)),
    "attention": (Attention, attention_inputs),
    "lstm": (Recurrent, lambda s=0: models.float_inputs((4, 4, 5), seed=s)),
}


@pytest.mark.parametrize("route", ["in-process", "file"])
@pytest.mark.parametrize("name", list(CASES))
def test_forward_matches_pytorch(name, route, tmp_path):
    make, inputs = CASES[name]
    torch.manual_seed(0)
    model = make().eval()
    x = inputs()
    assert_outputs_match(ff_outputs(model, x, route, tmp_path), torch_outputs(model, x))


@pytest.mark.parametrize("name", list(CASES))
def test_losses_follow_pytorch(name):
    make, inputs = CASES[name]
    torch.manual_seed(0)
    assert_logits_train_like_pytorch(make().train(), inputs, CLASSES, LR)


def test_the_causal_mask_does_not_train():
    """Its frozen weight keeps its -inf above the diagonal and zeros elsewhere (a trainable one
    would move by too little in 3 steps for the losses to show it)."""
    torch.manual_seed(0)
    model = Attention()
    model.logits_only = True
    _, ff = ff_losses(model, batches(attention_inputs, 4, CLASSES, steps=3), LR,
                      probabilities=False)
    mask = ff.get_layer_by_name("scaled_dot_product_attention_mask")
    expected = np.triu(np.full((LENGTH, LENGTH), -np.inf, dtype=np.float32), k=1)
    np.testing.assert_array_equal(mask.get_parameter_by_id(0).get_weights(ff), expected)


def test_attention_dropout_only_in_training():
    """A model traced with dropout_p > 0 gives torch's dropout-free output in inference, and
    drops attention weights in training."""
    torch.manual_seed(0)
    model, x = Attention(dropout_p=0.5), attention_inputs()
    without = Attention(dropout_p=0.0)
    without.load_state_dict(model.state_dict())
    reference = torch_outputs(without, x)
    ff, tensors = ff_model(x)
    outputs = build(model, ff, tensors, "in-process")
    ff.softmax(outputs[0])
    ff.compile(optimizer=SGDOptimizer(ff, lr=LR),
               loss_type=LossType.LOSS_SPARSE_CATEGORICAL_CROSSENTROPY)
    for tensor, value in zip(tensors, x):
        tensor.set_tensor(ff, value)
    ff.forward(training=False)
    assert_outputs_match([t.get_tensor(ff) for t in outputs], reference)
    ff.forward(training=True)
    assert not np.allclose(outputs[1].get_tensor(ff), reference[1], atol=1e-3)


def test_group_norm_under_a_parameter_strategy_gives_single_device_losses():
    torch.manual_seed(0)
    model = GroupNorms()
    model.logits_only = True
    data = batches(lambda s: models.float_inputs((4, 3, 4, 4), seed=s), 4, CLASSES, steps=3)
    single, _ = ff_losses(model, data, LR, probabilities=False)
    split, ff = ff_losses(model, data, LR, probabilities=False,
                          argv=["-ll:gpu", "2", "--in-process"],
                          strategy=lambda graph: strategy("parameter", graph, 2))
    assert {config.degrees for config in ff.strategy.values()} != {(2, 1)}  # not data parallel
    np.testing.assert_allclose(split, single, rtol=1e-4)
