"""An ONNX backend (`onnx.backend.base.Backend`) that runs models through the importer and an
FFModel forward pass, so ONNX's own conformance tests (`onnx.backend.test.BackendTest`) check it.

A FlexFlow model has one batch-first data input; ONNX test graphs often have several inputs
(x and y of an Add, the weight W of a Conv). So the first graph input becomes the model's input
tensor, with the batch size set to its dim 0, and the others are given to the importer as
constants, exactly as initializers would be: weights of the layers that own weights, constant
tensors otherwise. The model is compiled for inference and run forward once per `run`.

An input with no elements holds no data, so it is a constant too (FlexFlow tensors have no
zero-size dims) and the graph is evaluated at import. A 0-d graph output, held as a 1-element
tensor (`Converter.as_0d`), comes back 0-d.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx.backend.base import Backend, BackendRep

from flexflow.core import CompMode, FFConfig, FFModel, Tensor
from flexflow.type import DATA_TYPE

from .errors import ONNXImportError
from .model import ONNXModel


class FlexFlowRep(BackendRep):
    def __init__(self, model: onnx.ModelProto):
        inputs = [i.name for i in model.graph.input
                  if i.name not in {t.name for t in model.graph.initializer}]
        self.input_names = inputs
        self.onnx_model = ONNXModel(model, constant_inputs=inputs[1:])

    def run(self, inputs, **kwargs):
        if isinstance(inputs, dict):
            inputs = [inputs[name] for name in self.input_names]
        arrays = [np.asarray(x) for x in inputs]
        if len(arrays) != len(self.input_names):
            raise ONNXImportError(f"the graph has {len(self.input_names)} inputs, got "
                                  f"{len(arrays)} arrays")
        feeds = dict(zip(self.input_names, arrays))
        ffmodel = None  # without a data input (or one with no elements) all is constant
        if arrays and arrays[0].size:
            data = arrays[0]
            _check_data(self.input_names[0], data)
            ffmodel = FFModel(FFConfig(argv=[], batch_size=data.shape[0]))
            x = ffmodel.create_tensor(data.shape, DATA_TYPE[str(data.dtype)])
            feeds[self.input_names[0]] = x
            x.set_tensor(ffmodel, data)
        outputs = self.onnx_model.apply(ffmodel, feeds)
        outputs = outputs if isinstance(outputs, list) else [outputs]
        if ffmodel is not None and ffmodel.get_layers():
            ffmodel.compile(comp_mode=CompMode.INFERENCE)
            ffmodel.forward(training=False)
        names = [output.name for output in self.onnx_model.graph.outputs]
        return [_array(ffmodel, o, name in self.onnx_model.zero_d_outputs)
                for name, o in zip(names, outputs)]


def _array(ffmodel, output, held_0d: bool) -> np.ndarray:
    if not isinstance(output, Tensor):
        return np.asarray(output)
    array = output.get_tensor(ffmodel)
    return array.reshape(()) if held_0d else array


def _check_data(name: str, data: np.ndarray) -> None:
    """A FlexFlow model input has one of FlexFlow's data types and a batch dim."""
    if str(data.dtype) not in DATA_TYPE:
        raise ONNXImportError(f"the data input '{name}' is {data.dtype}, not one of FlexFlow's "
                              f"data types ({', '.join(sorted(DATA_TYPE))})")
    if data.ndim == 0:
        raise ONNXImportError(f"the data input '{name}' is 0-d: FlexFlow model inputs have a "
                              f"batch dim")


class FlexFlowBackend(Backend):
    @classmethod
    def prepare(cls, model: onnx.ModelProto, device: str = "CPU", **kwargs) -> FlexFlowRep:
        return FlexFlowRep(model)

    @classmethod
    def run_node(cls, node: onnx.NodeProto, inputs, device: str = "CPU", outputs_info=None,
                 **kwargs):
        """One node on `inputs` (numpy arrays, in the node's input order)."""
        arrays = [np.asarray(x) for x in inputs]
        graph_inputs = [onnx.helper.make_tensor_value_info(
            name, onnx.helper.np_dtype_to_tensor_dtype(a.dtype), a.shape)
            for name, a in zip(node.input, arrays)]
        graph_outputs = [onnx.helper.make_empty_tensor_value_info(name) for name in node.output]
        graph = onnx.helper.make_graph([node], "node", graph_inputs, graph_outputs)
        opset = kwargs.get("opset_version", onnx.defs.onnx_opset_version())
        model = onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", opset)])
        return cls.prepare(model, device).run(arrays)

    @classmethod
    def supports_device(cls, device: str) -> bool:
        """FlexFlow picks its devices itself (CuPy where a GPU is usable); ONNX's device
        argument selects nothing here, so only the default, CPU, is claimed."""
        return device == "CPU"


prepare = FlexFlowBackend.prepare
run_model = FlexFlowBackend.run_model
run_node = FlexFlowBackend.run_node
supports_device = FlexFlowBackend.supports_device
