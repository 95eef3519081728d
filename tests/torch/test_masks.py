"""Masks and the ops around them (frontends/torch/logic.py, masks.py) follow PyTorch: comparisons
(tensor with tensor, with a number on either side, ne, integers with a fraction), torch.where
(tensor and number choices), masked_fill, logical and/or/not, a cast to bool, a bool broadcast,
clamp (min, max, both), gelu's tanh approximation (function and module) and
LayerNorm(bias=False).

Each through torch.fx and, past a branch torch.fx cannot trace, through torch.export's aten graph,
in-process and through a .ff file: forward outputs within 1e-5; losses over 3 SGD steps within
1e-4 relative (so the gradients through where, clamp and the weight-only layer norm agree). Bad
parameters of such nodes in a .ff file are named.
"""

import numpy as np
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from flexflow.torch.ir import ConversionError
from flexflow.torch.model import PyTorchModel

from . import models
from .harness import (assert_outputs_match, build, ff_model, ff_outputs, inference,
                      torch_outputs)
from .test_composed import Outputs
from .test_errors import _file_error
from .test_training import assert_logits_train_like_pytorch

WIDTH, CLASSES, LR = 8, 4, 0.05


class Masks(Outputs):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(WIDTH, WIDTH)
        self.gelu = nn.GELU(approximate="tanh")
        self.norm = nn.LayerNorm(WIDTH, bias=False)
        self.head = nn.Linear(WIDTH, CLASSES)
        nn.init.normal_(self.norm.weight)  # not torch's ones

    def forward(self, x, ids):  # x (N, WIDTH) float, ids (N, WIDTH) int64 in 0..3
        y = self.prepare(self.fc(x))
        keep = (ids.bool() & ~(y > 0.3)) | torch.logical_and(0.2 >= y, y < x) | (ids == 3)
        first = keep[:, :1].expand(-1, WIDTH) & (ids < 2.5)  # a bool broadcast; ints vs a float
        z = torch.where(keep, y, -1.0) + torch.where(ids != 2, 0.5, x) + torch.where(keep, x, y)
        z = z + torch.where(first, 0.25, 0.0)
        z = z.clamp(min=-0.8) + torch.clamp(z, max=0.9) + z.clamp(-0.5, 0.5)
        dropped = torch.logical_not(keep).float()
        z = self.norm(F.gelu(z, approximate="tanh") + self.gelu(y) * dropped)
        return self.result(self.head(z), keep.float(), z)

    def prepare(self, y):
        return y


class Exported(Masks):
    """The same past a branch: torch.export's aten graph, with a masked_fill under a comparison
    with a one-element buffer on the left."""

    def __init__(self):
        super().__init__()
        self.register_buffer("ceiling", torch.tensor(0.5))

    def prepare(self, y):
        if y.dim() == 2:
            y = y.masked_fill(self.ceiling < y, 0.5)
        return y


def inputs(seed=0):
    rng = np.random.default_rng(seed)
    return models.float_inputs((4, WIDTH), seed=seed) + [
        rng.integers(0, 4, (4, WIDTH)).astype(np.int64)]


def exported_file(model, ff, tensors, tmp_path):
    filename = tmp_path / "model.ff"
    example = tuple(torch.zeros(t.dims, dtype=torch.int64 if k else torch.float32)
                    for k, t in enumerate(tensors))
    PyTorchModel(model, example_inputs=example).torch_to_file(filename)
    return PyTorchModel.file_to_ff(filename, ff, tensors)


@pytest.mark.parametrize("route", ["in-process", "file"])
@pytest.mark.parametrize("make", [Masks, Exported])
def test_forward_matches_pytorch(make, route, tmp_path):
    torch.manual_seed(0)
    model, x = make().eval(), inputs()
    if make is Exported and route == "file":
        ff, tensors = ff_model(x)
        ours = inference(ff, tensors, exported_file(model, ff, tensors, tmp_path), x)
    else:
        ours = ff_outputs(model, x, route, tmp_path)
    theirs = torch_outputs(model, x)
    assert 0 < theirs[1].mean() < 1  # the mask keeps some and drops some
    assert_outputs_match(ours, theirs)


@pytest.mark.parametrize("make", [Masks, Exported])
def test_losses_follow_pytorch(make):
    torch.manual_seed(0)
    assert_logits_train_like_pytorch(make().train(), inputs, CLASSES, LR)


def test_the_exported_graph_uses_the_mask_nodes():
    torch.manual_seed(0)
    example = tuple(torch.from_numpy(v) for v in inputs())
    lines = PyTorchModel(Exported(), example_inputs=example).torch_to_string()
    ops = {line.split("; ")[3] for line in lines if line.count("; ") >= 3}
    assert {"COMPARE", "WHERE", "LOGICAL", "CLAMP", "GELU_TANH", "TO"} <= ops


class Gathers(nn.Module):
    """x[rows, columns] by constant index tensors: the first lays x out as (N, 1, W), the
    second swaps two columns."""

    def __init__(self, swap: bool):
        super().__init__()
        self.swap = swap

    def forward(self, x):
        if x.dim() == 2:
            x = x * 2
        rows = torch.arange(x.shape[0]).view(-1, 1, 1)
        columns = torch.arange(x.shape[1]).flip(0) if self.swap else torch.arange(x.shape[1])
        return x[rows, columns.view(1, 1, -1)]


def test_constant_index_gathers_are_reshapes_or_refused():
    x = models.float_inputs((4, WIDTH))
    assert_outputs_match(ff_outputs(Gathers(swap=False), x), torch_outputs(Gathers(False), x))
    ff, tensors = ff_model(x)
    with pytest.raises(ConversionError, match="aten.index.*lay the input out in order"):
        build(Gathers(swap=True), ff, tensors, "in-process")


@pytest.mark.parametrize("node, expected", [
    ("y; x,; output,; COMPARE; lq; 0.0", "expects COMPARE; op[; number] with op one of"),
    ("y; x,; output,; COMPARE; lt", "two operands in all, got ['lt'] and 1 inputs"),
    ("y; x,; output,; COMPARE; lt; 'a'", "the number compared with must be a number"),
    ("y; x,; output,; WHERE; 1.0; 0.0", "its condition must be a bool tensor, got DT_FLOAT"),
    ("y; x,; output,; WHERE; 1.0", "expects WHERE; a; b"),
    ("y; x,; output,; WHERE; None; 0.0", "one input per None, got [None, 0.0] and 1 inputs"),
    ("y; x,; output,; LOGICAL; xor", "expects LOGICAL; and|or with two inputs"),
    ("y; x,; output,; LOGICAL; not", "its operand must be a bool tensor, got DT_FLOAT"),
    ("y; x,; output,; CLAMP; None; None", "needs min or max (both are None)"),
    ("y; x,; output,; CLAMP; 0.0", "expects CLAMP; min; max"),
    ("y; x,; output,; CLAMP; 'low'; 1.0", "min must be a number or None, got 'low'"),
    ("y; x,; output,; LAYER_NORM; (4,); 1e-05; True; 0", "the fourth parameter (bias) must be"),
])
def test_mask_nodes_of_a_file_check_their_parameters(node, expected, tmp_path):
    filename, message = _file_error(["x; ; y,; INPUT", node, "output; y,; ; OUTPUT"], tmp_path)
    op = node.split("; ")[3]
    assert f"node 'y' ({op}) ({filename} line 2): " in message
    assert expected in message


def test_a_comparison_of_two_data_types_is_named(tmp_path):
    lines = ["x; ; b,y,; INPUT", "b; x,; y,; TO; torch.bool", "y; x,b,; output,; COMPARE; eq",
             "output; y,; ; OUTPUT"]
    filename, message = _file_error(lines, tmp_path)
    assert (f"node 'y' (COMPARE) ({filename} line 3): compares a DT_FLOAT tensor with a "
            f"DT_BOOLEAN one") in message
