"""The onnx package's bundled "light" models (AlexNet, ResNet-50, DenseNet-121, Inception v1/v2,
ShuffleNet, SqueezeNet, VGG-19, ZFNet-512: the real architectures with their weights replaced by
ConstantOfShape fills) import and run forward, giving the output stored beside each model for
ONNX's own deterministic input, within the tolerances ONNX's test runner uses."""

import glob
import os

import numpy as np
import onnx
import pytest
from onnx import numpy_helper
from onnx.backend.test.runner import Runner

from flexflow.core import CompMode, DataType, FFConfig, FFModel
from flexflow.onnx.model import ONNXModel

LIGHT = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "light")
MODELS = sorted(glob.glob(os.path.join(LIGHT, "light_*.onnx")))


def test_the_light_models_are_there():
    assert len(MODELS) >= 9, MODELS


@pytest.mark.parametrize("path", MODELS, ids=lambda p: os.path.basename(p)[6:-5])
def test_light_model_runs_forward(path):
    onnx_model = ONNXModel(path)
    (name, _), = onnx_model.inputs.items()
    declared = next(i for i in onnx_model.model.graph.input if i.name == name)
    data = Runner.generate_dummy_data(declared)  # ONNX's input for these models
    ffmodel = FFModel(FFConfig(argv=[], batch_size=data.shape[0]))
    x = ffmodel.create_tensor(data.shape, DataType.DT_FLOAT)
    out = onnx_model.apply(ffmodel, {name: x})
    ffmodel.compile(comp_mode=CompMode.INFERENCE)
    x.set_tensor(ffmodel, data)
    ffmodel.forward(training=False)
    expected = numpy_helper.to_array(onnx.load_tensor(path[:-len(".onnx")] + "_output_0.pb"))
    got = out.get_tensor(ffmodel)
    assert np.isfinite(got).all()
    np.testing.assert_allclose(got, expected, rtol=1e-3, atol=1e-7)
