"""A torch.nn.Module -> IR nodes and its weights, through torch.fx or else torch.export.

torch.fx is the first choice: it needs no inputs and keeps sizes computed in the graph. Where it
cannot trace the model (a Hugging Face model, data-dependent Python), the model is exported with
torch.export on example inputs and its aten graph translated by aten.py; Hugging Face models
(`PyTorchModel(..., is_hf_model=True)`) go that way at once. The examples fix the shapes: a model
imported that way is built for their batch and sequence length.

The module is traced symbolically (`torch.fx.Tracer`, recording source lines for error messages);
nodes whose results nothing uses are dropped. Each node becomes one IR node, in the graph's
(topological) order, named as FX names it: that name becomes the FlexFlow layer's name. A module
called a second time gets a node of its own (`conv1_1`) whose layer shares the first node's
weights (`TorchState.shared`).
"""

from __future__ import annotations

import torch
import torch.fx as fx
import torch.nn as nn

from flexflow.tensor import Tensor
from flexflow.type import DataType, OpType

from . import aten
from .call import Call, describe_target, source_line
from .functions import function_op
from .ir import ONNX_ROUTE, ConversionError, IRNode, all_errors
from .modules import module_op, module_state
from .weights import BUFFER, PARAMETER, TorchState

_TORCH_TYPES = {DataType.DT_FLOAT: torch.float32, DataType.DT_DOUBLE: torch.float64,
                DataType.DT_INT32: torch.int32, DataType.DT_INT64: torch.int64,
                DataType.DT_BOOLEAN: torch.bool}


def trace(model: nn.Module) -> fx.GraphModule:
    if not isinstance(model, nn.Module):
        raise TypeError(f"expected a torch.nn.Module, got {type(model).__name__}")
    tracer = fx.Tracer()
    tracer.record_stack_traces = True
    try:
        graph = tracer.trace(model)
    except Exception as error:  # torch.fx reports data-dependent control flow and the like
        raise ConversionError(f"torch.fx cannot trace {type(model).__name__}: {error}") from error
    module = fx.GraphModule(tracer.root, graph)
    module.graph.eliminate_dead_code()
    return module


def _input_names(node: fx.Node) -> tuple[str, ...]:
    """Names of the nodes among the node's arguments, in order, repeats kept."""
    names: list[str] = []
    fx.node.map_arg((node.args, node.kwargs), lambda n: names.append(n.name))
    return tuple(names)


def _attribute(root: nn.Module, target: str):
    value = root
    for part in target.split("."):
        value = getattr(value, part)
    return value


def _op(node: fx.Node, root: nn.Module, call: Call):
    if node.op == "placeholder":
        return OpType.INPUT, ()
    if node.op == "output":
        return OpType.OUTPUT, ()
    if node.op == "get_attr":
        return OpType.ATTRIBUTE, ()
    if node.op == "call_module":
        return module_op(root.get_submodule(node.target), call)
    return function_op(call)


def _record_state(node: fx.Node, root: nn.Module, state: TorchState, owners: dict) -> None:
    """Keep the tensors of the module or attribute `node` uses; a later use of the same one
    shares the first node's layer."""
    if node.op == "call_module":
        named = module_state(root.get_submodule(node.target))
    elif node.op == "get_attr":
        value = _attribute(root, node.target)
        if not isinstance(value, torch.Tensor):
            return
        kind = PARAMETER if isinstance(value, nn.Parameter) and value.requires_grad else BUFFER
        named = {kind: value.detach().cpu().numpy().copy()}
    else:
        return
    if not named:
        return
    if node.target in owners:
        state.shared[node.name] = owners[node.target]
    else:
        owners[node.target] = node.name
        state.tensors[node.name] = named


def to_ir(model: nn.Module, example_inputs=None, *,
          export_first: bool = False) -> tuple[list[IRNode], TorchState]:
    """IR nodes of `model` (v2 parameters, normalised as they read back from a file) and its
    weights. Every node that cannot be translated is named in one error, with the ONNX route.

    `example_inputs` (a tuple of tensors, or a dict of keyword tensors) let torch.export trace
    the model where torch.fx cannot, or at once with `export_first`."""
    if export_first:
        return _exported(model, example_inputs, None)
    try:
        module = trace(model)
    except ConversionError as error:
        return _exported(model, example_inputs, error)
    return _from_fx(model, module)


def examples(tensors, names=None):
    """Zeros shaped and typed as FFModel input `tensors`, for torch.export to trace on: a tuple,
    or a dict under `names` (a Hugging Face model's keyword inputs). None when some are not
    FFModel tensors (the builder then says which)."""
    if not all(isinstance(t, Tensor) and t.data_type in _TORCH_TYPES for t in tensors):
        return None
    zeros = tuple(torch.zeros(t.dims, dtype=_TORCH_TYPES[t.data_type]) for t in tensors)
    if names is None:
        return zeros
    if len(names) != len(zeros):
        raise ConversionError(f"input_names {list(names)} name {len(names)} inputs, got "
                              f"{len(zeros)} input tensors")
    return dict(zip(names, zeros))


def _exported(model: nn.Module, example_inputs, fx_error: ConversionError | None):
    if example_inputs is None:
        why = f"{fx_error}\n" if fx_error is not None else ""
        raise ConversionError(
            f"{why}torch.export can trace {type(model).__name__} given example inputs, which "
            f"the in-process route takes from its input tensors (torch_to_ff); for a file, give "
            f"PyTorchModel example_inputs=(tensors...) or, for a Hugging Face model, "
            f"is_hf_model=True with batch_size and seq_length")
    try:
        program = aten.export_program(model, example_inputs)
    except ConversionError as error:
        if fx_error is None:
            raise
        raise ConversionError(f"{fx_error}\n{error}") from error  # both routes' reasons
    return aten.to_ir(program, type(model).__name__)


def _from_fx(model: nn.Module, module: fx.GraphModule) -> tuple[list[IRNode], TorchState]:
    root = module
    nodes, state, owners, errors = [], TorchState(), {}, []
    for node in module.graph.nodes:
        target_module = root.get_submodule(node.target) if node.op == "call_module" else None
        call = Call(node, describe_target(node, target_module), source_line(node))
        try:
            op_type, params = _op(node, root, call)
        except ConversionError as error:
            errors.append(error)
            continue
        _record_state(node, root, state, owners)
        nodes.append(IRNode(node.name, _input_names(node), tuple(u.name for u in node.users),
                            op_type, aten.normalized(params), call.where))
    if errors:
        raise all_errors(errors, type(model).__name__, hint=ONNX_ROUTE)
    return nodes, state
