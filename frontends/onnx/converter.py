"""Walks an ONNX graph in topological order and builds the FFModel layers for it.

Each value name maps to an FFModel `Tensor` or a `Const`. A node whose inputs are all constants
is evaluated at import with ONNX's reference implementation (numpy; own_folds.py where that
one fails on valid inputs), whatever its operator but control flow, within one byte budget per
model (fold_limits.py): that folds the Shape -> Gather -> Concat -> Reshape chains exporters
emit, and transposed weights. A node that reads a
parameter (parameters.py) folds only when it just moves the parameter's elements (a transpose,
a reshape): any other (a Gather of rows, a product) would make a copy that trains apart from
the parameter, so it becomes a layer on the parameter's weight instead. Every other node
goes to the handler registered for its operator, which builds layers through the public FFModel
API; operands without values (a file exported without parameters) get FlexFlow's defaults first
(defaults.py). Weights are assigned with `Parameter.set_weights` as the layers are built;
compile() then creates the weights with those values.

`check_graph` runs the same walk without building anything, to report an unsupported operator or
attribute before any layer exists.
"""

from __future__ import annotations

import numpy as np
from onnx import helper
from onnx.reference import ReferenceEvaluator

from flexflow.core import DataType, ShapeError, Tensor
from flexflow.type import NUMPY_DTYPE

from . import (layout_ops, logic_ops, math_ops, nn_ops,  # noqa: F401  (register the handlers)
               recurrent_ops)
from .defaults import resolve
from .errors import ONNXImportError
from .fold_limits import FoldBudget, check_foldable
from .loader import GraphInfo
from .node import Node
from .own_folds import OWN_FOLDS
from .parameters import LAYOUT_OPS, broadcast_source
from .registry import check_node, supported_list, unsupported
from .unvalued import Unvalued
from .values import Const, Value

# Operators never evaluated at import even on constant inputs: their result is random.
RANDOM_OPS = {"Dropout", "RandomNormal", "RandomNormalLike", "RandomUniform",
              "RandomUniformLike", "Multinomial", "Bernoulli"}
# Operators whose result is a constant whatever their input (shapes are static here).
SHAPE_OPS = {"Shape", "Size"}
TORCH_ROUTE = ("A model written in PyTorch may import through flexflow.torch instead "
               "(PyTorchModel), which traces the module rather than its export.")


def nodes_of(info: GraphInfo) -> list[Node]:
    wanted = {name for node in info.nodes for name in node.input if name}
    wanted |= {output.name for output in info.outputs}
    return [Node(proto, info.opset, info.source, wanted) for proto in info.nodes]


def folds(node: Node, constant: list[bool], trainable: list[bool]) -> bool:
    """Whether `node` is evaluated at import, given which of its inputs are constants and which
    of those are parameters (or made from one)."""
    if node.op_type in RANDOM_OPS or node.domain not in ("", "ai.onnx"):
        return False
    if any(trainable) and node.op_type not in LAYOUT_OPS | SHAPE_OPS:
        return False
    return all(constant) and (bool(constant) or node.op_type == "Constant")


def check_graph(info: GraphInfo, constant_inputs=()) -> None:
    """Raise for the nodes whose operator or attributes are unsupported, all of them in one
    error, assuming the graph inputs named in `constant_inputs` are given as arrays and the
    others as tensors."""
    constant = set(info.initializers) | set(constant_inputs)
    refused: list[str] = []
    trainable = set(info.parameters)
    for node in nodes_of(info):
        present = [name for name in node.inputs if name]
        if folds(node, [name in constant for name in present],
                 [name in trainable for name in present]):
            check_foldable(node)
            constant.update(node.outputs)
            if trainable.intersection(present) and node.op_type in LAYOUT_OPS:
                trainable.update(node.outputs)
        elif node.op_type in SHAPE_OPS:
            constant.update(node.outputs)
        elif (reason := unsupported(node)) is not None:
            refused.append(f"{node}: {reason}")
    if len(refused) == 1:
        raise ONNXImportError(f"{info.source}: {refused[0]}. {supported_list()}")
    if refused:
        raise ONNXImportError(f"{info.source}: {len(refused)} nodes cannot be imported:\n  "
                              + "\n  ".join(refused) + f"\n{supported_list()}. {TORCH_ROUTE}")


class Converter:
    def __init__(self, ffmodel, info: GraphInfo):
        self.ffmodel = ffmodel
        self.info = info
        self.symbols: dict[str, Value] = {}
        self.zero_d: set[str] = set()  # 0-d values, held as 1-element tensors (`as_0d`)
        self._materialized: dict[tuple[str, DataType], Tensor] = {}
        self.fold_budget = FoldBudget(info.initializers)  # all the constants folded, together

    # ---- the walk ---------------------------------------------------------------------------
    def run(self, feeds: dict[str, Value]) -> list[Value]:
        for name, array in self.info.initializers.items():
            self.symbols[name] = Const(array, name in self.info.parameters, name)
        for name in self.info.unvalued:
            self.symbols[name] = Unvalued(name, self.info.declared.get(name))
        self.symbols.update(feeds)
        for node in nodes_of(self.info):
            inputs = [self.symbols[name] if name else None for name in node.inputs]
            present = [x for x in inputs if x is not None]
            held_0d = [name for name in node.inputs if name in self.zero_d]
            if held_0d:
                raise node.error(f"it reads '{held_0d[0]}', a 0-d value; FlexFlow tensors have "
                                 f"at least one dim, so a 0-d value can only be a graph output "
                                 f"(as a 1-element tensor)")
            if folds(node, [isinstance(x, Const) for x in present],
                     [isinstance(x, Const) and x.trainable for x in present]):
                outputs = self._fold(node, inputs)
            else:
                rule = check_node(node)
                try:
                    outputs = rule.handler(self, node, resolve(self, node, inputs))
                except ShapeError as error:
                    raise node.error(str(error)) from None
                except ONNXImportError:  # already names the node and the problem
                    raise
                except (ValueError, TypeError, IndexError, KeyError, AttributeError,
                        ArithmeticError) as error:  # inputs or attributes of a malformed file
                    raise node.error(f"malformed ({type(error).__name__}: {error})") from error
            for index, name in enumerate(node.outputs):
                if index < len(outputs) and outputs[index] is not None:
                    self.symbols[name] = outputs[index]
                elif node.wanted(index):
                    raise node.error(f"output {index} ('{name}') is not supported")
        return [self.symbols[output.name] for output in self.info.outputs]

    def _fold(self, node: Node, inputs: list) -> list[Const]:
        feeds = {name: x.value for name, x in zip(node.inputs, inputs) if x is not None}
        check_foldable(node)
        self.fold_budget.check(node, feeds)
        if node.op_type in OWN_FOLDS:
            arrays = OWN_FOLDS[node.op_type](node, *[x.value for x in inputs if x is not None])
        else:
            arrays = _reference(node, feeds)
        self.fold_budget.charge(node, arrays)
        trainable = any(x is not None and x.trainable for x in inputs)
        produced = iter(arrays)
        return [_const(next(produced), trainable, name) if name else None
                for name in node.outputs]

    # ---- helpers for handlers ---------------------------------------------------------------
    def tensor(self, value: Value, node: Node, any_dtype: bool = False) -> Tensor:
        """`value` as a float32 tensor of the model: a constant becomes a model constant (one
        repeated value) or a weight layer (trainable if it came from an initializer). With
        `any_dtype` (operators that only move elements), a tensor may also be an integer one."""
        if isinstance(value, Tensor):
            if value.data_type != DataType.DT_FLOAT and not any_dtype:
                raise node.error(f"FlexFlow computes this operator in float32; an input is "
                                 f"{value.data_type.name}")
            return value
        key = (value.name, DataType.DT_FLOAT)
        if value.name is not None and key in self._materialized:
            return self._materialized[key]
        array = value.value
        if array.dtype.kind not in "fiub":
            raise node.error(f"a constant input of dtype {array.dtype} cannot be a tensor")
        array = array.astype(np.float32).reshape(array.shape or (1,))
        if array.size == 0:
            raise node.error(f"a constant input has zero elements (shape {array.shape})")
        if not value.trainable and (array == array.flat[0]).all():
            tensor = self.ffmodel.create_constant(array.shape, float(array.flat[0]),
                                                  DataType.DT_FLOAT)
        else:
            tensor = self._weight(array, value.trainable, value.name or node.name)
        if value.name is not None:
            self._materialized[key] = tensor
        return tensor

    def _weight(self, array: np.ndarray, trainable: bool, name: str) -> Tensor:
        """A weight layer holding `array`. A parameter that repeats one slice (parameters.py)
        is a weight of that slice, broadcast to `array`'s shape by adding zeros, so that the
        copies train as the one parameter they are."""
        source = broadcast_source(array) if trainable else array
        weight = self.ffmodel.create_weight(source.shape, trainable, name=name)
        self.load(weight, [source])
        if source.shape == array.shape:
            return weight
        zeros = self.ffmodel.create_constant(array.shape, 0.0, DataType.DT_FLOAT)
        return self.ffmodel.add(zeros, weight, name=name)

    def operand(self, value: Value, node: Node, data_type: DataType) -> Tensor:
        """`value` as a tensor of `data_type` (operators that take integer and bool tensors): a
        tensor must already have it; a constant is a model constant of that type when it holds
        one repeated value, else a float32 weight cast to it, which must hold it exactly."""
        if isinstance(value, Tensor):
            if value.data_type != data_type:
                raise node.error(f"an input is {value.data_type.name} where "
                                 f"{data_type.name} is expected")
            return value
        if data_type == DataType.DT_FLOAT:
            return self.tensor(value, node)
        key = (value.name, data_type)
        if value.name is not None and key in self._materialized:
            return self._materialized[key]
        array = value.value.reshape(value.shape or (1,))
        target = np.dtype(NUMPY_DTYPE[data_type])
        if array.size and (array == array.flat[0]).all() and not value.trainable:
            tensor = self.ffmodel.create_constant(array.shape, float(array.flat[0]), data_type)
        else:
            if not np.array_equal(array.astype(np.float32).astype(target), array.astype(target)):
                raise node.error(f"a constant input of shape {value.shape} cannot be a "
                                 f"{data_type.name} tensor: its values are not all exact in "
                                 f"float32, the type of FlexFlow weights")
            tensor = self.ffmodel.cast(self.tensor(Const(array, value.trainable), node),
                                       data_type, name=node.name)
        if value.name is not None:
            self._materialized[key] = tensor
        return tensor

    def as_0d(self, x: Tensor, node: Node, index: int = 0) -> Tensor:
        """Output `index` of `node` is 0-d: FlexFlow tensors have at least one dim, so it is
        held as the 1-element tensor `x` and may only be a graph output (`zero_d`)."""
        self.zero_d.add(node.outputs[index])
        return self.reshape(x, (1,), node)

    def load(self, output: Tensor, arrays) -> None:
        """Set the weights of the layer that produced `output`, in its weight order."""
        op = output.owner_op
        for index, array in enumerate(arrays):
            op.get_parameter_by_id(index).set_weights(self.ffmodel, np.asarray(array, np.float32))

    def reshape(self, x: Tensor, dims, node: Node) -> Tensor:
        dims = tuple(int(d) for d in dims)
        if dims == tuple(x.dims):
            return x
        return self.ffmodel.reshape(x, dims, name=node.name)


def _reference(node: Node, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    """The node evaluated by ONNX's reference implementation, as a one-node model (so that the
    node's opset picks the operator's version)."""
    graph = helper.make_graph(
        [node.proto], "fold", [helper.make_empty_tensor_value_info(n) for n in feeds],
        [helper.make_empty_tensor_value_info(n) for n in node.outputs if n])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", node.opset)])
    try:
        results = ReferenceEvaluator(model).run(None, feeds)
    except Exception as error:
        raise node.error(f"could not evaluate it on its constant inputs: {error}") from None
    return [np.asarray(r) for r in results]


def _const(array: np.ndarray, from_trainable: bool, name: str) -> Const:
    """A folded value: trainable when computed from a parameter and still a float."""
    return Const(array, from_trainable and array.dtype.kind == "f", name)
