"""Files exported without parameters, as FlexFlow's `onnx/*_pt.py` scripts write them
(`torch.onnx.export(model, x, "m.onnx", export_params=False, training=TrainingMode.TRAINING)`),
imported as FlexFlow's programs import them (`apply(ffmodel, {"input.1": x})`, for an input of
other dims than the export's): the weights get FlexFlow's default initializers, with torch's
legacy exporter (weights as graph inputs) and its current one (weights absent, and the
constants it made, a Reshape's shape, with them)."""

import contextlib
import io
import warnings

import numpy as np
import pytest
import torch
import torch.nn as nn
from onnx import TensorProto, helper
from torch.onnx import TrainingMode

from flexflow.core import DataType, FFConfig, FFModel, LossType, SGDOptimizer
from flexflow.onnx import ONNXImportError, ONNXModel
from flexflow.onnx.errors import ONNXImportWarning

from .graphs import model

BATCH = 4


class SmallNet(nn.Module):
    """Conv, batch norm, pool, flatten (torch.flatten: Flatten in the legacy export, a Reshape
    with a constant shape in the current one), two linear layers."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 6, kernel_size=3, padding=1)
        self.norm = nn.BatchNorm2d(6)
        self.pool = nn.MaxPool2d(2)
        self.fc1 = nn.Linear(6 * 4 * 4, 16)
        self.fc2 = nn.Linear(16, 5)

    def forward(self, x):
        x = self.pool(torch.relu(self.norm(self.conv(x))))
        return self.fc2(torch.relu(self.fc1(torch.flatten(x, 1))))


def export(path, dynamo: bool) -> str:
    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
        warnings.simplefilter("ignore")
        torch.onnx.export(SmallNet(), (torch.randn(BATCH, 3, 8, 8),), str(path),
                          export_params=False, training=TrainingMode.TRAINING, dynamo=dynamo)
    return str(path)


@pytest.fixture(scope="module", params=[False, True], ids=["legacy", "current"])
def exported(request, tmp_path_factory):
    return request.param, export(tmp_path_factory.mktemp("onnx") / "net.onnx", request.param)


def layer_weights(ffmodel, kind):
    op = next(op for op in ffmodel.get_layers().values() if type(op).__name__ == kind)
    return [op.get_parameter_by_id(k).get_weights(ffmodel)
            for k in range(op.get_number_parameters())]


def test_flexflow_s_call_builds_the_architecture_with_default_weights(exported):
    dynamo, path = exported
    onnx_model = ONNXModel(path)
    ffmodel = FFModel(FFConfig(argv=["-b", str(BATCH)]))
    x = ffmodel.create_tensor([BATCH, 3, 8, 8], DataType.DT_FLOAT)
    with warnings.catch_warnings(record=True) as warned:
        warnings.simplefilter("always")
        out = onnx_model.apply(ffmodel, {"input.1": x})
    renamed = [str(w.message) for w in warned if issubclass(w.category, ONNXImportWarning)]
    assert renamed == ([f"{path}: the graph has no input 'input.1' (the legacy exporter's "
                        f"name); it is taken as the graph's input 'x'"] if dynamo else [])
    assert out.dims == (BATCH, 5)
    ffmodel.softmax(out)
    ffmodel.compile(optimizer=SGDOptimizer(ffmodel, 0.1),
                    loss_type=LossType.LOSS_SPARSE_CATEGORICAL_CROSSENTROPY)
    kernel, bias = layer_weights(ffmodel, "Conv2D")
    limit = np.sqrt(6 / (3 * 9 + 6 * 9))  # Glorot uniform over the kernel's fans
    assert kernel.shape == (6, 3, 3, 3) and np.abs(kernel).max() <= limit
    assert np.abs(kernel).max() > limit / 2 and not bias.any()
    dense_kernel, dense_bias = layer_weights(ffmodel, "Linear")
    assert dense_kernel.shape == (16, 96) and not dense_bias.any()
    x.set_tensor(ffmodel, np.random.default_rng(0).standard_normal((BATCH, 3, 8, 8),
                                                                   dtype=np.float32))
    ffmodel.label_tensor.set_tensor(ffmodel, np.arange(BATCH, dtype=np.int32).reshape(-1, 1))
    assert np.isfinite(ffmodel.train_step())


def test_an_input_of_other_dims_than_the_export_s_is_built_for_with_a_warning(exported):
    """FlexFlow's alexnet.py and resnet.py export at 224x224 and build for 229x229."""
    _, path = exported
    ffmodel = FFModel(FFConfig(argv=["-b", "2"]))
    x = ffmodel.create_tensor([2, 3, 12, 12], DataType.DT_FLOAT)
    onnx_model = ONNXModel(path)
    name = next(iter(n for n in onnx_model.inputs if n in ("x", "input.1")))
    with pytest.warns(ONNXImportWarning, match=rf"input '{name}' has dims \[2, 3, 12, 12\], the "
                                               rf"graph declares \[4, 3, 8, 8\]; the file has "
                                               rf"no parameters"):
        out = onnx_model.apply(ffmodel, {name: x})
    assert out.dims == (2, 5)  # fc1 takes the 6 * 6 * 6 features the input gives
    fc1 = next(op for op in ffmodel.get_layers().values() if type(op).__name__ == "Linear")
    assert fc1.get_parameter_by_id(0).dims == (16, 216)


def test_legacy_weights_may_still_be_given():
    """A parameter that is a graph input may be mapped: it is then a constant of the graph."""
    weight = np.full((3, 4), 0.5, np.float32)
    nodes = [helper.make_node("Gemm", ["x", "w"], ["y"], name="fc", transB=1)]
    onnx_model = ONNXModel(model(nodes, {"x": np.zeros((2, 4), np.float32), "w": weight}, ["y"]))
    ffmodel = FFModel(FFConfig(argv=["-b", "2"]))
    out = onnx_model.apply(ffmodel, {"x": ffmodel.create_tensor([2, 4]), "w": weight})
    assert out.dims == (2, 3)
    with pytest.raises(ONNXImportError, match=r"input_dict must map exactly the graph inputs "
                                              r"\['x'\] \(and may map its 1 parameter inputs\); "
                                              r"missing \['x'\]"):
        onnx_model.apply(FFModel(FFConfig(argv=["-b", "2"])), {"w": weight})


def test_a_width_nothing_declares_is_an_error_naming_the_node():
    nodes = [helper.make_node("Gemm", ["x", "w"], ["y"], name="fc", transB=1)]
    onnx_model = ONNXModel(model(nodes, {"x": np.zeros((2, 4), np.float32)}, ["y"]))
    ffmodel = FFModel(FFConfig(argv=["-b", "2"]))
    with pytest.raises(ONNXImportError, match=r"node 'fc' \(Gemm\): 'w' has no value \(the file "
                                              r"was exported without parameters\) and no "
                                              r"declared shape, nor does the node's output"):
        onnx_model.apply(ffmodel, {"x": ffmodel.create_tensor([2, 4])})


def test_a_value_nothing_provides_outside_a_weight_slot_is_still_an_error():
    nodes = [helper.make_node("Add", ["x", "w"], ["y"], name="plus")]
    with pytest.raises(ONNXImportError, match=r"'plus' \(Add\) reads 'w', which no graph input, "
                                              r"initializer or node output provides"):
        ONNXModel(model(nodes, {"x": np.zeros((2, 4), np.float32)}, ["y"]))


def test_a_default_weight_the_declared_dims_make_absurd_is_refused():
    nodes = [helper.make_node("Gemm", ["x", "w"], ["y"], name="fc", transB=1)]
    proto = model(nodes, {"x": np.zeros((2, 4), np.float32)}, ["y"])
    proto.graph.value_info.append(helper.make_tensor_value_info("y", TensorProto.FLOAT,
                                                                [2, 1 << 40]))
    ffmodel = FFModel(FFConfig(argv=["-b", "2"]))
    with pytest.raises(ONNXImportError, match=r"node 'fc' \(Gemm\): the default value of 'w' "
                                              r"would have shape \(1099511627776, 4\)"):
        ONNXModel(proto).apply(ffmodel, {"x": ffmodel.create_tensor([2, 4])})
