"""Operands without values: what a file exported without parameters leaves of its weights.

`torch.onnx.export(..., export_params=False)` writes the architecture only. The legacy exporter
(`dynamo=False`) lists the weights as graph inputs, which FlexFlow's programs do not map (they
map the data input only, `{"input.1": x}`); torch's current exporter leaves them out altogether,
with the constants it made (a Reshape's target shape): they are read and nothing provides them.
Such an operand is accepted, in a file without initializers, where its operator can do without
it, at the slots in `SLOTS`, and only when every reader reads it there; `defaults.py` then gives
it FlexFlow's default value. Anywhere else, and in a file with initializers, a value nothing
provides stays an error (a missing initializer).

`declared_dims` collects the shapes the file declares (graph inputs, value_info, outputs), from
which the widths of layers whose weights have no value are read.
"""

from __future__ import annotations

from dataclasses import dataclass

# operator -> the input slots an operand without a value may fill
SLOTS = {"Conv": (1, 2), "Gemm": (1, 2), "MatMul": (1,), "BatchNormalization": (1, 2, 3, 4),
         "LayerNormalization": (1, 2), "Reshape": (1,)}

Dims = tuple  # of int, or None where a dim is symbolic


@dataclass(frozen=True)
class Unvalued:
    """An operand with no value: its name and the dims the file declares for it, if any."""

    name: str
    dims: Dims | None = None


def optional_operands(graph, default_domains) -> set[str]:
    """Names that every node reading them reads at one of its `SLOTS` (operators of the
    `default_domains`)."""
    slotted: set[str] = set()
    elsewhere: set[str] = set()
    for node in graph.node:
        slots = SLOTS.get(node.op_type, ()) if node.domain in default_domains else ()
        for index, name in enumerate(node.input):
            if name:
                (slotted if index in slots else elsewhere).add(name)
    return slotted - elsewhere


def declared_dims(graph) -> dict[str, Dims]:
    """The dims the file declares for its values (None for a symbolic dim)."""
    dims = {}
    for value in list(graph.input) + list(graph.value_info) + list(graph.output):
        tensor_type = value.type.tensor_type
        if value.type.WhichOneof("value") == "tensor_type" and tensor_type.HasField("shape"):
            dims[value.name] = tuple(d.dim_value if d.HasField("dim_value") else None
                                     for d in tensor_type.shape.dim)
    return dims
