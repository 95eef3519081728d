"""Sequential: a chain of layers, each reading the previous one's output."""

from __future__ import annotations

from ..layers.base_layer import Layer
from ..layers.input_layer import Input
from .base_model import BaseModel
from .graph import replay
from ..tensor import Tensor


class Sequential(BaseModel):
    """`Sequential([Input(...), layer, ...])`, or layers added one by one with `add`. The first
    layer may instead declare `input_shape=`. Adding a model (Sequential or functional, with
    one input) appends its layers, applied to the current output."""

    def __init__(self, layers=None, name=None, ffconfig=None):
        super().__init__(name, ffconfig, default_name="sequential")
        for item in layers or ():
            self.add(item)

    def add(self, item) -> None:
        if self._ffmodel is not None:
            raise RuntimeError(f"Sequential '{self.name}': cannot add layers after compile()")
        if isinstance(item, Tensor):
            self._add_input(item)
        elif isinstance(item, BaseModel):
            self._add_model(item)
        elif isinstance(item, Layer):
            self._add_layer(item)
        else:
            raise TypeError(f"Sequential.add takes a layer, a model or an Input tensor, got "
                            f"{item!r}")

    def _add_input(self, tensor: Tensor) -> None:
        if self._inputs:
            raise ValueError(f"Sequential '{self.name}' already has an input")
        if tensor.from_node is not None:
            raise ValueError("Sequential.add takes Input(...) tensors, not layer outputs")
        self._inputs, self._output = [tensor], tensor

    def _add_layer(self, layer: Layer) -> None:
        if not self._inputs:
            if layer._declared_input_shape is None:
                raise ValueError(f"the first layer of Sequential '{self.name}' ('{layer.name}') "
                                 f"needs input_shape=..., or add an Input(shape=...) first")
            self._add_input(Input(layer._declared_input_shape, dtype=layer._declared_dtype))
        output = layer(self._output)
        if isinstance(output, list):
            raise ValueError(f"layer '{layer.name}' has {len(output)} outputs; a Sequential "
                             f"needs one")
        self._nodes.append(layer.nodes[-1])
        self._output = output

    def _add_model(self, model: BaseModel) -> None:
        if model.output is None:
            raise ValueError(f"model '{model.name}' has no layers")
        if not self._inputs:
            self._inputs, self._output = model.input, model.output
            self._nodes = list(model._nodes)
            return
        if len(model.input) != 1:
            raise ValueError(f"model '{model.name}' has {len(model.input)} inputs; only a "
                             f"one-input model can follow the layers of a Sequential")
        nodes, mapping = replay(model._nodes, model.input, [self._output])
        self._nodes += nodes
        self._output = mapping[id(model.output)]

    def pop(self) -> None:
        """Remove the last layer."""
        if not self._nodes or self._ffmodel is not None:
            raise ValueError(f"Sequential '{self.name}': nothing to pop (or already compiled)")
        node = self._nodes.pop()
        self._output = node.inputs[0]
