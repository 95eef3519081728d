"""The .ff text: v2 lines exactly as FlexFlow writes them (reference section 3.2), v1 and v0 files
read with the same meaning, and parameters that read back as written."""

import shutil

import pytest
import torch

from flexflow.core import CompMode
from flexflow.torch import fx
from flexflow.torch.ir import Ref, format_param, parse_lines, parse_param
from flexflow.torch.model import PyTorchModel

from . import models
from .harness import assert_outputs_match, ff_model, torch_outputs

pytestmark = pytest.mark.filterwarnings("ignore:Implicit dimension choice for softmax")

MLP_V2 = """\
x; ; linear1,; INPUT
linear1; x,; relu,; LINEAR; 512; 10; 1
relu; linear1,; linear2,; RELU
linear2; relu,; relu_1,; LINEAR; 512; 10; 1
relu_1; linear2,; linear3,; RELU
linear3; relu_1,; softmax,; LINEAR; 10; 10; 1
softmax; linear3,; output,; SOFTMAX
output; softmax,; ; OUTPUT
"""

CNN_V2 = """\
input1; ; conv1,; INPUT
input2; ; conv1_1,; INPUT
conv1; input1,; relu,; CONV2D; 32; 3; 3; 1; 1; 0; 0; 10; 1; 1
relu; conv1,; cat,; RELU
conv1_1; input2,; relu_1,; CONV2D; 32; 3; 3; 1; 1; 0; 0; 10; 1; 1
relu_1; conv1_1,; cat,; RELU
cat; relu,relu_1,; split,; CONCAT; 1
split; cat,; getitem,getitem_1,; SPLIT; 1
getitem; split,; cat_1,; GETITEM; 0
getitem_1; split,; cat_1,; GETITEM; 1
cat_1; getitem,getitem_1,; conv2,; CONCAT; 1
conv2; cat_1,; relu_2,; CONV2D; 32; 3; 3; 1; 1; 0; 0; 10; 1; 1
relu_2; conv2,; pool1,; RELU
pool1; relu_2,; flat1,; POOL2D; 2; 2; 0; 30; 10
flat1; pool1,; mul,; FLAT
mul; flat1,; add,; SCALAR_MULTIPLY; 2.0
add; mul,; linear1,output,; SCALAR_ADD; 1.0
linear1; add,; output,; LINEAR; 10; 10; 1
output; linear1,add,; ; OUTPUT
"""

# v1 (r21.x): the v2 text with ", " between fields and ":" after each edge name
MLP_V1 = """\
x, , linear1:, INPUT
linear1, x:, relu:, LINEAR, 512, 10, 1
relu, linear1:, linear2:, RELU
linear2, relu:, relu_1:, LINEAR, 512, 10, 1
relu_1, linear2:, linear3:, RELU
linear3, relu_1:, softmax:, LINEAR, 10, 10, 1
softmax, linear3:, output:, SOFTMAX
output, softmax:, , OUTPUT
"""

CNN_V1 = """\
input1, , conv1:, INPUT
input2, , conv1_1:, INPUT
conv1, input1:, relu:, CONV2D, 32, 3, 3, 1, 1, 0, 0, 10, 1, 1
relu, conv1:, cat:, RELU
conv1_1, input2:, relu_1:, CONV2D, 32, 3, 3, 1, 1, 0, 0, 10, 1, 1
relu_1, conv1_1:, cat:, RELU
cat, relu:relu_1:, split:, CONCAT, 1
split, cat:, getitem:getitem_1:, SPLIT, 1
getitem, split:, cat_1:, GETITEM, 0
getitem_1, split:, cat_1:, GETITEM, 1
cat_1, getitem:getitem_1:, conv2:, CONCAT, 1
conv2, cat_1:, relu_2:, CONV2D, 32, 3, 3, 1, 1, 0, 0, 10, 1, 1
relu_2, conv2:, pool1:, RELU
pool1, relu_2:, flat1:, POOL2D, 2, 2, 0, 30, 10
flat1, pool1:, mul:, FLAT
mul, flat1:, add:, SCALAR_MULTIPLY, 2.0
add, mul:, linear1:output:, SCALAR_ADD, 1.0
linear1, add:, output:, LINEAR, 10, 10, 1
output, linear1:add:, , OUTPUT
"""

# v0 (r20.12): no consumer field, op types as OpType values (INPUT 2050, LINEAR 2014, ...)
MLP_V0 = """\
x, , 2050
linear1, x:, 2014, 512, 10, 1
relu, linear1:, 2022
linear2, relu:, 2014, 512, 10, 1
relu_1, linear2:, 2022
linear3, relu_1:, 2014, 10, 10, 1
softmax, linear3:, 2015
output, softmax:, 2051
"""


@pytest.mark.parametrize("model, expected", [pytest.param(models.MLP, MLP_V2, id="mlp"),
                                             pytest.param(models.FactSheetCNN, CNN_V2, id="cnn")])
def test_v2_lines_are_flexflows(model, expected, tmp_path):
    lines = expected.splitlines()
    assert PyTorchModel(model()).torch_to_string() == lines
    assert fx.torch_to_flexflow_str(model()) == lines
    PyTorchModel(model()).torch_to_file(tmp_path / "a.ff")
    fx.torch_to_flexflow(model(), tmp_path / "b.ff")
    assert (tmp_path / "a.ff").read_text() == expected == (tmp_path / "b.ff").read_text()


def _read_as(text, model, inputs, tmp_path):
    """FlexFlow's outputs for a file holding `text` (read with r21.x's `apply`), with `model`'s
    weights beside it."""
    PyTorchModel(model).torch_to_file(tmp_path / "exported.ff")
    (tmp_path / "given.ff").write_text(text)
    shutil.copy(tmp_path / "exported.ff.npz", tmp_path / "given.ff.npz")
    ff, tensors = ff_model(inputs)
    outputs = PyTorchModel(str(tmp_path / "given.ff")).apply(ff, tensors)
    ff.compile(comp_mode=CompMode.INFERENCE)
    for tensor, x in zip(tensors, inputs):
        tensor.set_tensor(ff, x)
    ff.forward()
    return [t.get_tensor(ff) for t in outputs]


@pytest.mark.parametrize("text, model, shapes", [
    pytest.param(MLP_V1, models.MLP, [(4, 784)], id="mlp-v1"),
    pytest.param(MLP_V0, models.MLP, [(4, 784)], id="mlp-v0"),
    pytest.param(MLP_V2, models.MLP, [(4, 784)], id="mlp-v2"),
    pytest.param(CNN_V1, models.FactSheetCNN, [(2, 3, 16, 16), (2, 3, 16, 16)], id="cnn-v1"),
])
def test_old_formats_are_read(text, model, shapes, tmp_path):
    torch.manual_seed(0)
    m = model().eval()
    x = models.float_inputs(*shapes)
    assert_outputs_match(_read_as(text, m, x, tmp_path), torch_outputs(m, x))


def test_nodes_of_each_format_agree():
    v2, v1 = parse_lines(CNN_V2.splitlines(), "v2"), parse_lines(CNN_V1.splitlines(), "v1")
    assert v1 == v2
    v0 = parse_lines(MLP_V0.splitlines(), "v0")
    assert [(n.name, n.inputs, n.op_type, n.params) for n in v0] == [
        (n.name, n.inputs, n.op_type, n.params) for n in parse_lines(MLP_V2.splitlines(), "v2")]


@pytest.mark.parametrize("value", [0, -3, 2.5, 1e-05, True, None, "shape", "ADAPTIVE", (2, 3),
                                   (8,), [2, 3, 5], slice(None, 4, None), slice(1, None, 2),
                                   Ellipsis, Ref("size_1"), float("inf")])
def test_parameters_read_back_as_written(value):
    assert parse_param(format_param(value)) == value


def test_v1_and_v0_tuple_parameters_stay_whole():
    (node,) = parse_lines(["pool, x:, out:, POOL2D, (2, 3), (2, 1), 0, 30, 10"], "v1")
    assert node.params == ((2, 3), (2, 1), 0, 30, 10)
    (conv,) = parse_lines(["conv, x:, 2011, 8, 3, 3, 1, 1, 1, 1, 10, 1"], "v0")
    assert conv.params == (8, 3, 3, 1, 1, 1, 1, 10, 1, 1)  # groups 1 inserted before the bias
