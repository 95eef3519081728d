"""A torch.nn.Module -> IR nodes and its weights, through torch.fx.

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

from flexflow.type import OpType

from .call import Call, describe_target, source_line
from .functions import function_op
from .ir import ONNX_ROUTE, ConversionError, IRNode, all_errors, format_param, parse_param
from .modules import module_op, module_state
from .weights import BUFFER, PARAMETER, TorchState


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


def to_ir(model: nn.Module) -> tuple[list[IRNode], TorchState]:
    """IR nodes of `model` (v2 parameters, normalised as they read back from a file) and its
    weights. Every node that cannot be translated is named in one error, with the ONNX route."""
    module = trace(model)
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
                            op_type, tuple(parse_param(format_param(p)) for p in params),
                            call.where))
    if errors:
        raise all_errors(errors, type(model).__name__, hint=ONNX_ROUTE)
    return nodes, state
