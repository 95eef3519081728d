"""`ONNXModel`: FlexFlow's ONNX importer (`flexflow.onnx.model`).

    onnx_model = ONNXModel("model.onnx")              # reads and checks the whole graph
    x = ffmodel.create_tensor([batch, 784], DataType.DT_FLOAT)
    out = onnx_model.apply(ffmodel, {"input.1": x})   # builds the layers
    ffmodel.compile(...)                               # creates the weights from the file's
                                                      # initializers
    ...train or infer as with any FFModel...

`apply` returns the graph output's tensor, or a list of them (in graph order) when the graph has
several outputs; an output that is a constant (computed from initializers and shapes only) comes
back as a numpy array. A 0-d output (the product of two vectors, a reduction of every dim) comes
back as a 1-element tensor, FlexFlow tensors having at least one dim; `zero_d_outputs` names
them after `apply`. `input_dict` maps each graph input to a tensor of `ffmodel`, or to a numpy
array, which is then treated like an initializer (a constant of the graph).

Initializers are loaded into the layers' weights: `apply` assigns them with
`Parameter.set_weights` before compile, and compile() creates the weights with those values
(FlexFlow ignored initializers). Only the initializers that are parameters of the model train;
those the exporter stored for constants (scales, masks, buffers) stay constant (parameters.py:
how they are told apart, and the warnings where the file does not tell). A file exported
without parameters (`export_params=False`) gets
FlexFlow's default initializers for the weights it lacks (unvalued.py, defaults.py): with torch's
legacy exporter they are graph inputs, which `input_dict` need not map; with its current one
they are absent. Such a file is an architecture: `apply` builds it for the dims of the tensors
given even where the file declares others (warning), as FlexFlow did; and `input.1`, the legacy
exporter's input name that FlexFlow's programs use, stands for the one data input of a file
from torch's current exporter, which names it after the forward argument.

`ONNXModel(...)` raises `ONNXImportError` for a file that is missing, truncated or not ONNX, a
cyclic graph, a value no node produces (a missing initializer), and any operator or attribute
value that is not supported (naming the node, the op type and the attribute, and listing the
supported operators), all before any layer is built. FlexFlow only logged a warning for
unsupported operators and failed later.
"""

from __future__ import annotations

import warnings

import numpy as np
from onnx import helper

from flexflow.core import Tensor
from flexflow.type import NUMPY_DTYPE

from .converter import Converter, check_graph
from .errors import ONNXImportError, ONNXImportWarning
from .loader import read_model
from .parameters import parameter_names
from .unvalued import Unvalued
from .values import Const

LEGACY_INPUT = "input.1"


class ONNXTensor:
    """A graph input or output: its name, static dims (None where symbolic) and numpy dtype."""

    def __init__(self, name: str, dims, dtype=None):
        self.name = name
        self.dims = list(dims)
        self.dtype = dtype

    def __repr__(self) -> str:
        return f"ONNXTensor({self.name!r}, dims={self.dims}, dtype={self.dtype})"


def _described(value_info) -> ONNXTensor:
    tensor_type = value_info.type.tensor_type
    dims = [d.dim_value if d.HasField("dim_value") else None for d in tensor_type.shape.dim]
    dtype = (np.dtype(helper.tensor_dtype_to_np_dtype(tensor_type.elem_type))
             if tensor_type.elem_type else None)
    return ONNXTensor(value_info.name, dims, dtype)


class ONNXModel:
    """`filename` is a path or an `onnx.ModelProto`. `constant_inputs` (ours) names graph inputs
    that `apply` will be given as numpy arrays, so the up-front check knows they are constants.
    `parameters` (ours) names the initializers that train, where the graph does not tell them
    from constants (parameters.py decides, and warns, without it)."""

    def __init__(self, filename, *, constant_inputs=(), parameters=None):
        self.graph = read_model(filename)
        self.graph.parameters = parameter_names(self.graph, parameters)
        self.model = self.graph.model
        self.inputs = {name: _described(v) for name, v in self.graph.inputs.items()}
        self.outputs = {v.name: _described(v) for v in self.graph.outputs}
        self.symbol_table: dict = {}
        self.zero_d_outputs: set[str] = set()
        check_graph(self.graph, constant_inputs)

    def apply(self, ffmodel, input_dict):
        feeds = self._feeds(input_dict)
        check_graph(self.graph, [n for n, v in feeds.items() if isinstance(v, Const)])
        converter = Converter(ffmodel, self.graph)
        outputs = converter.run(feeds)
        self.symbol_table = converter.symbols
        self.zero_d_outputs = {o.name for o in self.graph.outputs} & converter.zero_d
        results = [o.value if isinstance(o, Const) else o for o in outputs]
        return results[0] if len(results) == 1 else results

    def _feeds(self, input_dict) -> dict:
        source, graph = self.graph.source, self.graph
        input_dict = _legacy_input_name(graph, dict(input_dict))
        unknown = set(input_dict) - set(self.inputs)
        missing = [name for name in self.inputs
                   if name not in input_dict and name not in graph.parameter_inputs]
        if unknown or missing:
            raise ONNXImportError(
                f"{source}: input_dict must map exactly the graph inputs "
                f"{[n for n in self.inputs if n not in graph.parameter_inputs]}"
                + (f" (and may map its {len(graph.parameter_inputs)} parameter inputs)"
                   if graph.parameter_inputs else "") + "; "
                + (f"missing {missing}" if missing else "")
                + ("; " if missing and unknown else "")
                + (f"not inputs of the graph: {sorted(unknown)}" if unknown else ""))
        feeds = {name: Unvalued(name, graph.declared.get(name))
                 for name in graph.parameter_inputs if name not in input_dict}
        architecture_only = bool(graph.unvalued or feeds)
        for name, value in input_dict.items():
            feeds[name] = self._feed(name, value, architecture_only)
        return feeds

    def _feed(self, name: str, value, architecture_only: bool):
        """`value` checked against the declared input; a file without parameters describes an
        architecture, which is built for the dims given (as FlexFlow did), with a warning."""
        source, expected = self.graph.source, self.inputs[name]
        if isinstance(value, Tensor):
            dims, dtype = tuple(value.dims), np.dtype(NUMPY_DTYPE[value.data_type])
        else:
            value = np.asarray(value)
            dims, dtype = value.shape, value.dtype
        if len(dims) != len(expected.dims) or any(
                e is not None and e != d for e, d in zip(expected.dims, dims)):
            message = f"{source}: input '{name}' has dims {list(dims)}, the graph declares " \
                      f"{expected.dims}"
            if not architecture_only or len(dims) != len(expected.dims):
                raise ONNXImportError(message)
            warnings.warn(ONNXImportWarning(f"{message}; the file has no parameters, so its "
                                            f"layers are built for the dims given"),
                          stacklevel=4)
        if expected.dtype is not None and dtype != expected.dtype:
            raise ONNXImportError(f"{source}: input '{name}' is {dtype}, the graph declares "
                                  f"{expected.dtype}")
        return value if isinstance(value, Tensor) else Const(value, False, name)


def _legacy_input_name(graph, input_dict: dict) -> dict:
    """FlexFlow's programs map `input.1`, the name torch's legacy exporter gives a model's
    first input; torch's current exporter names it after the forward argument (`x`). In a file
    from torch without an `input.1`, that name stands for its one unmapped data input."""
    data = [n for n in graph.inputs if n not in graph.parameter_inputs and n not in input_dict]
    if (LEGACY_INPUT not in input_dict or LEGACY_INPUT in graph.inputs or len(data) != 1
            or graph.model.producer_name != "pytorch"):
        return input_dict
    warnings.warn(ONNXImportWarning(f"{graph.source}: the graph has no input '{LEGACY_INPUT}' "
                                    f"(the legacy exporter's name); it is taken as the graph's "
                                    f"input '{data[0]}'"), stacklevel=4)
    input_dict[data[0]] = input_dict.pop(LEGACY_INPUT)
    return input_dict


class ONNXModelKeras(ONNXModel):
    """FlexFlow's variant for keras2onnx exports. One importer handles both here; `ffconfig` and
    `ffmodel` are accepted for scripts that pass them."""

    def __init__(self, filename, ffconfig=None, ffmodel=None):
        super().__init__(filename)
