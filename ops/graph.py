"""The dataflow graph IR: layers and tensors, shapes inferred as layers are added.

Layers are kept in creation order, which is a topological order (a layer can only consume
tensors that already exist). Layer names follow FlexFlow's C++ op names, `<name or type>_<guid>`
with a per-graph guid counter from 100, because strategy files are keyed by them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

from .base import Operator
from .spec import ShapeError, TensorSpec, WeightSpec

FIRST_GUID = 100


@dataclass(frozen=True)
class GraphTensor:
    id: int
    spec: TensorSpec
    producer: tuple[int, int] | None = None  # (layer index, output index); None for inputs
    constant: float | None = None  # value of a create_constant tensor


@dataclass(frozen=True)
class Layer:
    index: int
    name: str                   # unique: "<user name or type name>_<guid>"
    user_name: str | None       # the `name=` the user passed, if any
    op: Operator
    inputs: tuple[int, ...]     # tensor ids
    outputs: tuple[int, ...]    # tensor ids
    weights: tuple[WeightSpec, ...]
    weight_owner: int           # layer index whose weights this layer uses (itself unless shared)

    @property
    def type_name(self) -> str:
        return self.op.type_name


@dataclass
class Graph:
    tensors: list[GraphTensor] = field(default_factory=list)
    layers: list[Layer] = field(default_factory=list)
    inputs: list[int] = field(default_factory=list)  # ids of tensors fed from outside

    def add_input(self, spec: TensorSpec) -> GraphTensor:
        tensor = GraphTensor(len(self.tensors), spec)
        self.tensors.append(tensor)
        self.inputs.append(tensor.id)
        return tensor

    def add_label(self, spec: TensorSpec) -> GraphTensor:
        """A tensor fed from outside that no layer reads: what a loss compares the output with
        (kept out of `inputs`, which are the model's own inputs)."""
        tensor = GraphTensor(len(self.tensors), spec)
        self.tensors.append(tensor)
        return tensor

    def add_constant(self, spec: TensorSpec, value: float) -> GraphTensor:
        tensor = GraphTensor(len(self.tensors), spec, constant=float(value))
        self.tensors.append(tensor)
        return tensor

    def add_layer(self, op: Operator, inputs: Sequence[int], name: str | None = None,
                  shared_with: int | None = None) -> Layer:
        """Append a layer; any ShapeError is re-raised naming the layer."""
        index = len(self.layers)
        unique = f"{name or op.type_name}_{FIRST_GUID + index}"
        in_specs = [self.tensors[i].spec for i in inputs]
        try:
            out_specs = op.infer(in_specs)
            weights = op.weight_specs(in_specs)
        except ShapeError as error:
            shapes = ", ".join(str(s.shape) for s in in_specs)
            raise ShapeError(f"layer '{name or unique}' ({op.type_name}) with input shape(s) "
                             f"{shapes}: {error}") from None
        owner = index
        if shared_with is not None:
            owner = self.layers[shared_with].weight_owner
            theirs = self.layers[owner].weights
            if [w.shape for w in theirs] != [w.shape for w in weights]:
                raise ShapeError(
                    f"layer '{name or unique}' ({op.type_name}) cannot share the weights of "
                    f"'{self.layers[owner].name}': shapes {[w.shape for w in weights]} vs "
                    f"{[w.shape for w in theirs]}")
        outputs = []
        for k, spec in enumerate(out_specs):
            tensor = GraphTensor(len(self.tensors), spec, producer=(index, k))
            self.tensors.append(tensor)
            outputs.append(tensor.id)
        layer = Layer(index, unique, name, op, tuple(inputs), tuple(outputs), tuple(weights), owner)
        self.layers.append(layer)
        return layer

    def consumers(self, tensor_id: int) -> list[tuple[Layer, int]]:
        """(layer, input position) pairs that read `tensor_id`."""
        return [(layer, pos) for layer in self.layers
                for pos, t in enumerate(layer.inputs) if t == tensor_id]

    def in_specs(self, layer: Layer) -> list[TensorSpec]:
        return [self.tensors[i].spec for i in layer.inputs]
