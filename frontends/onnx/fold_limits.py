"""How large a value the importer may compute at import, checked before computing it.

Nodes whose inputs are all constants are evaluated at import (converter.py). Some operators'
output size comes from the *values* of their inputs or attributes (ConstantOfShape, Expand,
Tile, Range, Pad, Resize, OneHot, ...), so a file could ask for a value of any size with a few
bytes. Before evaluating a node, ONNX's shape inference (with data propagation) works out its
output shapes from its input shapes and the values of its small inputs (Tile and Range are
also sized exactly here); an output of more than `MAX_FOLDED_ELEMENTS` elements is refused
with the node named. Constants computed from constants are shapes, masks and weight
preprocessing, never near that size.
"""

from __future__ import annotations

import math

import numpy as np
from onnx import helper, numpy_helper, shape_inference

from .node import Node

MAX_FOLDED_ELEMENTS = 1 << 30
VALUE_INPUT_ELEMENTS = 64  # inputs this small are given to shape inference with their values


def check_output_sizes(node: Node, feeds: dict[str, np.ndarray]) -> None:
    """Raise the node's error if evaluating it on `feeds` would make an output of more than
    `MAX_FOLDED_ELEMENTS` elements, or of a negative size. Outputs whose shape inference cannot
    tell are let through: their size follows from their inputs' sizes."""
    exact = _exact_size(node, feeds)
    if exact is not None and exact > MAX_FOLDED_ELEMENTS:
        raise node.error(f"its output would have {exact} elements, more than "
                         f"{MAX_FOLDED_ELEMENTS}; not computed at import")
    for name, dims in zip(node.outputs, _inferred_dims(node, feeds)):
        known = [d for d in dims if d is not None]
        if any(d < 0 for d in known) or math.prod(known) > MAX_FOLDED_ELEMENTS:
            raise node.error(f"output '{name}' would have shape {dims}: a negative dim or more "
                             f"than {MAX_FOLDED_ELEMENTS} elements; not computed at import")


def _exact_size(node: Node, feeds: dict[str, np.ndarray]) -> int | float | None:
    """The output size of the operators whose size is a product or quotient of input values
    (Tile, Range), in Python's unbounded integers: shape inference's int64 arithmetic wraps
    round on hostile values, and numpy crashes on some of them."""
    arrays = [feeds.get(name) for name in node.inputs]
    if any(a is None for a in arrays):
        return None
    if node.op_type == "Tile" and len(arrays) == 2 and arrays[1].dtype.kind in "iu":
        data, repeats = arrays
        return math.prod(n * int(r) for n, r in zip(data.shape, repeats.reshape(-1)))
    if node.op_type == "Range" and len(arrays) == 3 and all(a.size == 1 for a in arrays):
        start, limit, delta = (a.reshape(()).item() for a in arrays)
        if not all(isinstance(v, int) or math.isfinite(v) for v in (start, limit, delta)):
            return math.inf
        return max(math.ceil((limit - start) / delta), 0) if delta else 0
    return None


def _inferred_dims(node: Node, feeds: dict[str, np.ndarray]) -> list[list[int | None]]:
    """Per output of the node, its dims as shape inference sees them (None: unknown)."""
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
    shapes = {}
    for value in inferred.graph.output:
        tensor = value.type.tensor_type
        if tensor.HasField("shape"):
            shapes[value.name] = [d.dim_value if d.HasField("dim_value") else None
                                  for d in tensor.shape.dim]
    return [shapes.get(name, []) for name in node.outputs]
