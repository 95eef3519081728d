"""What cannot be translated fails with an error naming the node, what it calls and where, before
the FFModel is touched where that can be known up front; bad files name the file and line."""

import pytest
import torch
import torch.nn as nn

from flexflow.torch.ir import ConversionError
from flexflow.torch.model import PyTorchModel

from . import models
from .harness import ff_model


class Sine(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        return torch.sin(self.fc(x))  # the unsupported call


class Recurrent(nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(4, 4, batch_first=True)

    def forward(self, x):
        return self.lstm(x)[0]


class Dilated(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, dilation=2)

    def forward(self, x):
        return self.conv(x)


class Adaptive(nn.Module):
    def __init__(self):
        super().__init__()
        self.pool = nn.AdaptiveAvgPool2d(2)

    def forward(self, x):
        return self.pool(x)


class AttentionWeights(nn.Module):
    def __init__(self):
        super().__init__()
        self.attn = nn.MultiheadAttention(8, 2, batch_first=True)

    def forward(self, x):
        out, weights = self.attn(x, x, x)
        return out + weights.mean(2, keepdim=True)


class Branching(nn.Module):
    def forward(self, x):
        if x.sum() > 0:  # data-dependent control flow cannot be traced
            return x
        return -x


def _error(model, *shapes) -> str:
    ff, tensors = ff_model(models.float_inputs(*shapes))
    with pytest.raises(ConversionError) as info:
        PyTorchModel(model).torch_to_ff(ff, tensors)
    return str(info.value), ff


def test_unsupported_function_names_node_target_and_source_line():
    message, ff = _error(Sine(), (2, 4))
    assert "node 'sin'" in message and "torch.sin" in message
    assert "test_errors.py:" in message and "return torch.sin(self.fc(x))" in message
    assert not ff.graph.layers  # nothing was built
    with pytest.raises(ConversionError, match="node 'sin'"):
        PyTorchModel(Sine()).torch_to_string()


@pytest.mark.parametrize("model, shape, expected", [
    (Recurrent(), (2, 5, 4), "LSTM module 'lstm'"),
    (Dilated(), (2, 3, 9, 9), "dilation"),
    (Branching(), (2, 4), "cannot trace Branching"),
])
def test_unsupported_modules_and_options(model, shape, expected):
    message, ff = _error(model, shape)
    assert expected in message
    assert not ff.graph.layers


def test_adaptive_pool_needs_divisible_sizes():
    message, _ = _error(Adaptive(), (2, 3, 5, 5))
    assert "node 'pool'" in message and "(5, 5) to (2, 2)" in message


def test_attention_weights_are_refused():
    message, _ = _error(AttentionWeights(), (2, 3, 8))
    assert "attention weights" in message and "getitem_1" in message


def test_input_count_is_checked_before_building():
    ff, tensors = ff_model(models.float_inputs((2, 3, 16, 16)))
    with pytest.raises(ConversionError, match=r"2 inputs \['input1', 'input2'\], got 1"):
        PyTorchModel(models.FactSheetCNN()).torch_to_ff(ff, tensors)
    assert not ff.graph.layers


@pytest.mark.parametrize("lines, expected", [
    (["x; ; y,; INPUT", "y; x,; output,"], "line 2: expected 'name; inputs; outputs; OPTYPE"),
    (["x; ; y,; INPUT", "y; x,; output,; FOLD; 2"], "line 2: unknown op type 'FOLD'"),
    (["x; ; y,; INPUT", "y; z,; output,; RELU", "output; y,; ; OUTPUT"],
     "node 'y' (RELU) (FILE line 2): reads 'z'"),
    (["x; ; y,; INPUT", "x; ; y,; INPUT"], "node 'x' (INPUT) (FILE line 2): the name is used"),
    (["x; ; p,; INPUT", "p; ATTRIBUTE", "output; p,; ; OUTPUT"], "without its .npz"),
    (["x; ; y,; INPUT", "y; x,; output,; LINEAR; 4", "output; y,; ; OUTPUT"],
     "node 'y' (LINEAR) (FILE line 2): not enough values to unpack"),
])
def test_bad_files_name_file_and_line(lines, expected, tmp_path):
    filename = tmp_path / "bad.ff"
    filename.write_text("\n".join(lines) + "\n")
    ff, tensors = ff_model(models.float_inputs((2, 4)))
    with pytest.raises(ConversionError) as info:
        PyTorchModel.file_to_ff(filename, ff, tensors)
    assert expected.replace("FILE", str(filename)) in str(info.value)


def test_weights_of_the_wrong_shape_name_the_node(tmp_path):
    PyTorchModel(nn.Sequential(nn.Linear(4, 3))).torch_to_file(tmp_path / "a.ff")
    PyTorchModel(nn.Sequential(nn.Linear(4, 5))).torch_to_file(tmp_path / "b.ff", weights=False)
    (tmp_path / "a.ff.npz").rename(tmp_path / "b.ff.npz")
    ff, tensors = ff_model(models.float_inputs((2, 4)))
    with pytest.raises(ConversionError, match=r"node '_0' \(LINEAR\).*\[\(3, 4\), \(3,\)\].*"
                                              r"\[\(5, 4\), \(5,\)\]"):
        PyTorchModel.file_to_ff(tmp_path / "b.ff", ff, tensors)


def test_casts_and_tensor_floor_division_are_refused():
    class Cast(nn.Module):
        def forward(self, x):
            return x.long()

    class Half(nn.Module):  # FFModel has no float16
        def forward(self, x):
            return x.to(torch.float16)

    class FloorDiv(nn.Module):
        def forward(self, x):
            return x // 2

    assert "Tensor.long" in _error(Cast(), (2, 4))[0]
    assert "to torch.float16 is not supported" in _error(Half(), (2, 4))[0]
    assert "floor division of a tensor" in _error(FloorDiv(), (2, 4))[0]


def test_files_never_run_code(tmp_path):
    filename = tmp_path / "evil.ff"
    filename.write_text("x; ; y,; INPUT\ny; x,; output,; DROPOUT; __import__('os').getcwd()\n"
                        "output; y,; ; OUTPUT\n")
    ff, tensors = ff_model(models.float_inputs((2, 4)))
    with pytest.raises(ConversionError, match="getcwd"):
        PyTorchModel.file_to_ff(filename, ff, tensors)
