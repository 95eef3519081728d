"""What the importer may compute at import, checked before computing it.

Nodes whose inputs are all constants are evaluated at import (converter.py). Two kinds of node
would let a file of a few hundred bytes ask for unbounded time or memory there:

* control flow (Loop, Scan, If, and any operator with a graph attribute): its trip count and
  body come from the file, so its cost is whatever the file says. It is refused with the node
  named (`check_foldable`); FlexFlow has no layer for it either.
* operators whose output size comes from the *values* of their inputs or attributes
  (ConstantOfShape, Expand, Tile, Range, Pad, Resize, OneHot, ...). Before evaluating a node,
  ONNX's shape inference (with data propagation) works out its output shapes and types from its
  input shapes and the values of its small inputs (Tile and Range are sized exactly here).

All the constants one model folds share one `FoldBudget` of bytes: `MAX_FOLDED_BYTES` plus
twice the bytes of the model's initializers (folding preprocesses weights: a transpose copies
them, a cast may double them). A node whose outputs would not fit what is left is refused with
the node named, before it is evaluated; what it did produce is then taken from the budget.
Constants computed from constants are shapes, masks and weight preprocessing, and the weights
of files that ship them as fills (ONNX's "light" VGG-19 fills 548 MiB from a 9 kB file): the
budget holds those, and stays under a gigabyte for a file of a few bytes.
"""

from __future__ import annotations

import math

import numpy as np
from onnx import AttributeProto, helper, numpy_helper, shape_inference

from .node import Node

MAX_FOLDED_BYTES = 768 << 20
VALUE_INPUT_ELEMENTS = 64  # inputs this small are given to shape inference with their values
CONTROL_FLOW = {"Loop", "Scan", "If"}
GRAPH_ATTRIBUTES = {AttributeProto.GRAPH, AttributeProto.GRAPHS}
UNKNOWN_ITEMSIZE = 8  # bytes per element of an output whose type inference cannot tell


def check_foldable(node: Node) -> None:
    """Raise the node's error if it is control flow, which is never evaluated at import."""
    if node.op_type in CONTROL_FLOW or any(a.type in GRAPH_ATTRIBUTES
                                           for a in node.proto.attribute):
        raise node.error("control flow (an operator with a graph attribute) is not evaluated "
                         "at import, even on constant inputs: its cost is whatever the file's "
                         "values say")


class FoldBudget:
    """The bytes the constants folded for one model may still take."""

    def __init__(self, initializers: dict[str, np.ndarray]):
        self.left = MAX_FOLDED_BYTES + 2 * sum(a.nbytes for a in initializers.values())

    def check(self, node: Node, feeds: dict[str, np.ndarray]) -> None:
        """Raise the node's error if its outputs, as far as they can be told from `feeds`
        without evaluating it, have a negative dim or would not fit the budget."""
        exact = _exact_bytes(node, feeds)
        if exact is not None:
            self._refuse_over(node, exact, "its output")
            return
        total = 0
        for name, (dims, itemsize) in zip(node.outputs, _inferred_outputs(node, feeds)):
            known = [d for d in dims if d is not None]
            if any(d < 0 for d in known):
                raise node.error(f"output '{name}' would have shape {dims}: a negative dim; "
                                 f"not computed at import")
            total += math.prod(known) * itemsize
        self._refuse_over(node, total, "its outputs")

    def charge(self, node: Node, arrays: list[np.ndarray]) -> None:
        """Take what the node produced from the budget (the sizes inference could not tell)."""
        produced = sum(a.nbytes for a in arrays)
        self._refuse_over(node, produced, "its outputs")
        self.left -= produced

    def _refuse_over(self, node: Node, nbytes: int | float, what: str) -> None:
        if nbytes > self.left:
            raise node.error(f"{what} would take {nbytes} bytes, more than the {self.left} left "
                             f"of the {MAX_FOLDED_BYTES}-byte budget (plus twice the "
                             f"initializers) for constants computed at import; not computed")


def _exact_bytes(node: Node, feeds: dict[str, np.ndarray]) -> int | float | None:
    """The output bytes of the operators whose size is a product or quotient of input values
    (Tile, Range), in Python's unbounded integers: shape inference's int64 arithmetic wraps
    round on hostile values, and numpy crashes on some of them."""
    arrays = [feeds.get(name) for name in node.inputs]
    if any(a is None for a in arrays):
        return None
    if node.op_type == "Tile" and len(arrays) == 2 and arrays[1].dtype.kind in "iu":
        data, repeats = arrays
        return math.prod(n * int(r) for n, r in zip(data.shape, repeats.reshape(-1))) * \
            data.itemsize
    if node.op_type == "Range" and len(arrays) == 3 and all(a.size == 1 for a in arrays):
        start, limit, delta = (a.reshape(()).item() for a in arrays)
        if not all(isinstance(v, int) or math.isfinite(v) for v in (start, limit, delta)):
            return math.inf
        count = max(math.ceil((limit - start) / delta), 0) if delta else 0
        return count * arrays[0].itemsize
    return None


def _inferred_outputs(node: Node, feeds: dict[str, np.ndarray]) -> list[tuple[list, int]]:
    """Per output of the node, its dims as shape inference sees them (None: unknown) and its
    element size in bytes."""
    small = {name: a for name, a in feeds.items() if a.size <= VALUE_INPUT_ELEMENTS}
    try:
        inputs = [helper.make_tensor_value_info(name, helper.np_dtype_to_tensor_dtype(a.dtype),
                                                a.shape)
                  for name, a in feeds.items() if name not in small]
        graph = helper.make_graph(
            [node.proto], "size", inputs, [helper.make_empty_tensor_value_info(n) for n in
                                           node.outputs if n],
            [numpy_helper.from_array(a, name) for name, a in small.items()])
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", node.opset)])
        inferred = shape_inference.infer_shapes(model, data_prop=True)
    except Exception:  # noqa: BLE001 (inference refused the node: evaluating it will say why)
        return []
    outputs = {}
    for value in inferred.graph.output:
        tensor = value.type.tensor_type
        dims = ([d.dim_value if d.HasField("dim_value") else None for d in tensor.shape.dim]
                if tensor.HasField("shape") else [])
        outputs[value.name] = (dims, _itemsize(tensor.elem_type))
    return [outputs.get(name, ([], UNKNOWN_ITEMSIZE)) for name in node.outputs]


def _itemsize(elem_type: int) -> int:
    try:
        return np.dtype(helper.tensor_dtype_to_np_dtype(elem_type)).itemsize or UNKNOWN_ITEMSIZE
    except Exception:  # noqa: BLE001 (undefined or non-numpy type: the widest numeric size)
        return UNKNOWN_ITEMSIZE
