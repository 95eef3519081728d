"""Reading an ONNX model and checking its graph before anything is built.

`read_model` accepts a path or a `ModelProto` and returns a `GraphInfo`: the graph's real inputs
(graph inputs that are not initializers), its initializers as numpy arrays, its outputs and its
nodes in a topological order. Every structural defect is an `ONNXImportError` naming the file and
the node or value concerned: a file that is missing, truncated or not ONNX, an initializer whose
data does not match its shape, a value read but never produced (a missing initializer, say,
except a weight of a file exported without parameters: unvalued.py), a value produced twice, and
a cycle.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Union

import numpy as np
import onnx
from onnx import ModelProto, NodeProto, ValueInfoProto, numpy_helper

from ..ops.topological import stable_order
from .errors import ONNXImportError
from .unvalued import declared_dims, optional_operands

Source = Union[str, os.PathLike, ModelProto]
DEFAULT_DOMAINS = ("", "ai.onnx")


@dataclass
class GraphInfo:
    source: str                           # the file name, or "<ModelProto>"
    model: ModelProto
    inputs: dict[str, ValueInfoProto]     # real inputs, in graph order
    initializers: dict[str, np.ndarray]
    outputs: list[ValueInfoProto]
    nodes: list[NodeProto]                # topologically sorted
    opset: int                            # of the default (ai.onnx) domain
    # operands without values (unvalued.py): read and provided by nothing; graph inputs that
    # may stay unmapped (the weights of a legacy export without parameters); declared dims
    unvalued: set[str] = field(default_factory=set)
    parameter_inputs: set[str] = field(default_factory=set)
    declared: dict[str, tuple] = field(default_factory=dict)
    parameters: frozenset[str] = frozenset()  # the initializers that train (parameters.py)

    def describe(self, node: NodeProto) -> str:
        return f"{self.source}: node '{node.name or node.output[0]}' ({node.op_type})"


def read_model(source: Source) -> GraphInfo:
    model, name = _load(source)
    return _check_graph(model, name)


def _load(source: Source) -> tuple[ModelProto, str]:
    if isinstance(source, ModelProto):
        return source, "<ModelProto>"
    if not isinstance(source, (str, os.PathLike)):
        raise ONNXImportError(f"ONNXModel takes a file name or an onnx.ModelProto, got "
                              f"{type(source).__name__}")
    name = os.fspath(source)
    if not os.path.isfile(name):
        raise ONNXImportError(f"{name}: no such ONNX file")
    try:
        model = onnx.load(name)
    except Exception as error:  # protobuf's DecodeError, or a bad external-data reference
        raise ONNXImportError(f"{name}: not a readable ONNX model (truncated, or not ONNX?): "
                              f"{error}") from None
    return model, name


def _check_graph(model: ModelProto, source: str) -> GraphInfo:
    graph = model.graph
    if not model.HasField("graph") or not graph.output:
        raise ONNXImportError(f"{source}: not an ONNX model: it has no graph with outputs "
                              f"(truncated, or not ONNX?)")
    opsets = {o.domain: o.version for o in model.opset_import}
    opset = next((opsets[d] for d in DEFAULT_DOMAINS if d in opsets), None)
    if opset is None:
        raise ONNXImportError(f"{source}: the model imports no opset of the default ONNX "
                              f"domain (opset_import is {opsets or 'empty'})")
    initializers = _initializers(graph, source)
    inputs = {i.name: i for i in graph.input if i.name not in initializers}
    for kind, values in (("input", inputs.values()), ("output", graph.output)):
        for value in values:
            if value.type.WhichOneof("value") not in (None, "tensor_type"):
                raise ONNXImportError(f"{source}: graph {kind} '{value.name}' is a "
                                      f"{value.type.WhichOneof('value')}; only tensors are "
                                      f"supported")
    # a file without parameters has no initializers; in one with, a missing value is an error
    optional = set() if initializers else optional_operands(graph, DEFAULT_DOMAINS)
    producer = _producers(graph, set(inputs) | set(initializers), source)
    described = GraphInfo(source, model, inputs, initializers, list(graph.output), [], opset,
                          {n for n in optional if n not in producer}, optional & set(inputs),
                          declared_dims(graph))
    producer.update(dict.fromkeys(described.unvalued))
    for node in graph.node:
        for name in node.input:
            if name and name not in producer:
                raise ONNXImportError(
                    f"{described.describe(node)} reads '{name}', which no graph input, "
                    f"initializer or node output provides (a missing initializer?)")
    for output in graph.output:
        if output.name not in producer:
            raise ONNXImportError(f"{source}: graph output '{output.name}' is not produced by "
                                  f"any node, input or initializer")
    described.nodes = _topological(graph.node, producer, described)
    return described


def _initializers(graph, source: str) -> dict[str, np.ndarray]:
    if graph.sparse_initializer:
        raise ONNXImportError(f"{source}: sparse initializers are not supported "
                              f"('{graph.sparse_initializer[0].values.name}')")
    arrays = {}
    for tensor in graph.initializer:
        if tensor.name in arrays:
            raise ONNXImportError(f"{source}: initializer '{tensor.name}' is defined twice")
        try:
            arrays[tensor.name] = numpy_helper.to_array(tensor)
        except Exception as error:
            raise ONNXImportError(f"{source}: initializer '{tensor.name}' (dims "
                                  f"{list(tensor.dims)}) is malformed: {error}") from None
    return arrays


def _producers(graph, defined: set[str], source: str) -> dict[str, int | None]:
    """Value name -> index of the node producing it (None for inputs and initializers)."""
    producer: dict[str, int | None] = {name: None for name in defined}
    for index, node in enumerate(graph.node):
        for name in node.output:
            if not name:
                continue
            if name in producer:
                raise ONNXImportError(f"{source}: value '{name}' is produced twice (again by "
                                      f"node '{node.name or name}' ({node.op_type}))")
            producer[name] = index
    return producer


def _topological(nodes, producer, described: GraphInfo) -> list[NodeProto]:
    """The nodes in a stable topological order (`ops.topological.stable_order`): a sorted graph
    keeps its order."""
    deps = [{producer[n] for n in node.input if n and producer[n] is not None} for node in nodes]
    order, waiting = stable_order(deps)
    if waiting:
        stuck = [described.describe(nodes[i]) for i in waiting]
        raise ONNXImportError(f"{described.source}: the graph has a cycle; these nodes wait on "
                              f"each other: {'; '.join(stuck[:6])}")
    return [nodes[i] for i in order]
