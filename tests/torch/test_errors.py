"""What cannot be translated fails with an error naming the node, what it calls and where, before
the FFModel is touched where that can be known up front; bad files name the file and line."""

import pytest
import torch
import torch.nn as nn

from flexflow.torch.ir import ONNX_ROUTE, ConversionError
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
        self.gru = nn.GRU(4, 4, batch_first=True)

    def forward(self, x):
        return self.gru(x)[0]


class ManyProblems(nn.Module):
    """Four nodes that cannot be translated, among some that can."""

    def __init__(self):
        super().__init__()
        self.both_ways = nn.LSTM(4, 4, batch_first=True, bidirectional=True)
        self.projected = nn.LSTM(4, 4, batch_first=True, proj_size=2)
        self.conv = nn.Conv1d(5, 4, 3, dilation=2)
        self.fc = nn.Linear(4, 4)

    def forward(self, x):  # (N, 5, 4)
        y = self.both_ways(torch.sin(self.fc(x)))[0] + self.projected(x)[0].mean()
        return y + self.conv(x).mean() + torch.cos(x)


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
    (Recurrent(), (2, 5, 4), "GRU module 'gru'"),
    (Dilated(), (2, 3, 9, 9), "dilation"),
    (Branching(), (2, 4), ("torch.fx cannot trace Branching", "cannot export Branching")),
])
def test_unsupported_modules_and_options(model, shape, expected):
    message, ff = _error(model, shape)
    assert all(part in message for part in (expected if isinstance(expected, tuple)
                                            else (expected,)))
    assert not ff.graph.layers


def test_every_unsupported_node_is_named_in_one_error_with_the_onnx_route(tmp_path):
    message, ff = _error(ManyProblems(), (2, 5, 4))
    assert message.startswith("ManyProblems: 5 nodes cannot be translated:")
    for expected in ("node 'sin' (torch.sin)", "node 'both_ways' (LSTM module 'both_ways')",
                     "bidirectional=True is not supported", "proj_size=2 is not supported",
                     "node 'conv' (Conv1d module 'conv')", "dilation (2,)",
                     "node 'cos' (torch.cos)"):
        assert expected in message
    assert message.endswith(ONNX_ROUTE) and "flexflow.onnx" in message
    assert not ff.graph.layers
    with pytest.raises(ConversionError) as info:
        PyTorchModel(ManyProblems()).torch_to_file(tmp_path / "many.ff")
    assert str(info.value) == message and not (tmp_path / "many.ff").exists()


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
    filename, message = _file_error(lines, tmp_path)
    assert expected.replace("FILE", str(filename)) in message


@pytest.mark.parametrize("node, expected", [
    ("y; x,; output,; GROUP_NORM; 3; 4; 1e-05; True", "4 channels cannot be cut into 3 groups"),
    ("y; x,; output,; GROUP_NORM; 2; 6; 1e-05; True", "expected an input (N, 6, ...), got (2, 4)"),
    ("y; x,; output,; HARDTANH; 1.0; 0.0", "min 1.0 must be below max 0.0"),
    ("y; x,; output,; CHUNK; 0; 1", "chunks must be a positive int, got 0"),
    ("y; x,; output,; CHUNK; 2; 2", "dim 2 is out of range for a tensor of rank 2"),
    ("y; x,; output,; LSTM; 4; 3; 1; True; True; 0.0",
     "expects a batched input (N, T, input) with input = 4, got (2, 4)"),
    ("y; x,x,x,; output,; SCALED_DOT_PRODUCT_ATTENTION; 0.0; False; None",
     "expects q (..., L, E), k (..., S, E), v (..., S, Ev) of rank >= 3"),
])
def test_composed_nodes_of_a_file_check_their_inputs(node, expected, tmp_path):
    filename, message = _file_error(["x; ; y,; INPUT", node, "output; y,; ; OUTPUT"], tmp_path)
    op = node.split("; ")[3]
    assert f"node 'y' ({op}) ({filename} line 2): {expected}" in message


def _file_error(lines, tmp_path) -> tuple:
    """The file written from `lines`, and the error importing it for a (2, 4) input."""
    filename = tmp_path / "bad.ff"
    filename.write_text("\n".join(lines) + "\n")
    ff, tensors = ff_model(models.float_inputs((2, 4)))
    with pytest.raises(ConversionError) as info:
        PyTorchModel.file_to_ff(filename, ff, tensors)
    return filename, str(info.value)


def test_weights_of_the_wrong_shape_name_the_node(tmp_path):
    PyTorchModel(nn.Sequential(nn.Linear(4, 3))).torch_to_file(tmp_path / "a.ff")
    PyTorchModel(nn.Sequential(nn.Linear(4, 5))).torch_to_file(tmp_path / "b.ff", weights=False)
    (tmp_path / "a.ff.npz").rename(tmp_path / "b.ff.npz")
    ff, tensors = ff_model(models.float_inputs((2, 4)))
    with pytest.raises(ConversionError, match=r"node '_0' \(LINEAR\).*\[\(3, 4\), \(3,\)\].*"
                                              r"\[\(5, 4\), \(5,\)\]"):
        PyTorchModel.file_to_ff(tmp_path / "b.ff", ff, tensors)


def test_composed_weights_of_the_wrong_shape_name_the_node(tmp_path):
    class Recurrent(nn.Module):
        def __init__(self, hidden):
            super().__init__()
            self.lstm = nn.LSTM(4, hidden, batch_first=True)

        def forward(self, x):
            return self.lstm(x)[0]

    PyTorchModel(Recurrent(3)).torch_to_file(tmp_path / "a.ff")
    PyTorchModel(Recurrent(5)).torch_to_file(tmp_path / "b.ff", weights=False)
    (tmp_path / "a.ff.npz").rename(tmp_path / "b.ff.npz")
    ff, tensors = ff_model(models.float_inputs((2, 3, 4)))
    with pytest.raises(ConversionError, match=r"node 'lstm' \(LSTM\).*'weight_hh_l0': \(12, 3\)"
                                              r".*'weight_hh_l0': \(20, 5\)"):
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
