"""`flexflow.onnx`: import ONNX models into an FFModel (reference section 4).

`flexflow.onnx.model.ONNXModel(file).apply(ffmodel, {input name: tensor})` builds the graph's
layers and loads its initializers as weights; see `model.py` for the order of calls. The ONNX
backend (`flexflow.onnx.backend.FlexFlowBackend`) runs ONNX's conformance tests on it.
"""

from .errors import ONNXImportError
from .model import ONNXModel, ONNXModelKeras, ONNXTensor

__all__ = ["ONNXImportError", "ONNXModel", "ONNXModelKeras", "ONNXTensor"]
