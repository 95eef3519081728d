"""The layer calls (Nodes) that connect a model's inputs to its output, and replaying them on new
input tensors (a model used as a layer: `model(t)`, or added to a Sequential)."""

from __future__ import annotations

from ..layers.base_layer import Node
from ..tensor import Tensor


def collect_nodes(inputs: list[Tensor], output: Tensor) -> list[Node]:
    """The calls that compute `output` from `inputs`, each after the calls it reads from.

    Creation order is a valid order: a call is always made after the calls that produced its
    inputs. A ValueError names any tensor on the way that does not come from `inputs`."""
    sources = set(map(id, inputs))
    nodes: dict[int, Node] = {}
    pending = [output]
    while pending:
        tensor = pending.pop()
        if id(tensor) in sources:
            continue
        node = tensor.from_node
        if node is None:
            raise ValueError(f"the model output depends on {tensor!r}, which is not one of the "
                             f"model's inputs {[t.name for t in inputs]}")
        if id(node) not in nodes:
            nodes[id(node)] = node
            pending.extend(node.inputs)
    ordered = sorted(nodes.values(), key=lambda n: n.order)
    read = {id(t) for node in ordered for t in node.inputs}
    unused = [t.name for t in inputs if id(t) not in read and t is not output]
    if unused:
        raise ValueError(f"model input(s) {unused} do not feed any layer on the way to the output")
    return ordered


def replay(nodes: list[Node], old_inputs: list[Tensor], new_inputs: list[Tensor]):
    """Call the layers of `nodes` again, reading `new_inputs` where the originals read
    `old_inputs`. Returns (the new nodes, a map from each old tensor's id to its new tensor)."""
    if len(new_inputs) != len(old_inputs):
        raise ValueError(f"the model takes {len(old_inputs)} input tensor(s), got "
                         f"{len(new_inputs)}")
    mapping = {id(old): new for old, new in zip(old_inputs, new_inputs)}
    new_nodes = []
    for node in nodes:
        outputs = node.layer([mapping[id(t)] for t in node.inputs])
        outputs = outputs if isinstance(outputs, list) else [outputs]
        new_nodes.append(node.layer.nodes[-1])
        mapping.update({id(old): new for old, new in zip(node.outputs, outputs)})
    return new_nodes, mapping
