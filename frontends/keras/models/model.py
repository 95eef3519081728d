"""Model: the functional API, a graph of layer calls from `inputs` to `outputs`."""

from __future__ import annotations

from ..layers.input_layer import InputLayer
from .base_model import BaseModel
from .graph import collect_nodes
from ..tensor import Tensor


class Model(BaseModel):
    """`Model(inputs, outputs)`: `inputs` an Input tensor or a list of them (the order of the
    arrays fit takes), `outputs` the one output tensor. Any acyclic graph of calls works,
    including sub-models applied with `model(t)`."""

    def __init__(self, inputs, outputs, name=None, ffconfig=None):
        super().__init__(name, ffconfig, default_name="model")
        inputs = list(inputs) if isinstance(inputs, (list, tuple)) else [inputs]
        if isinstance(outputs, (list, tuple)):
            if len(outputs) != 1:
                raise ValueError(f"model '{self.name}': one output is supported, got "
                                 f"{len(outputs)}")
            outputs = outputs[0]
        for tensor in inputs + [outputs]:
            if not isinstance(tensor, Tensor):
                raise TypeError(f"model '{self.name}': inputs and outputs must be Keras tensors, "
                                f"got {tensor!r}")
        for tensor in inputs:
            if not isinstance(tensor.from_layer, InputLayer):
                raise ValueError(f"model '{self.name}': inputs must come from Input(...), got "
                                 f"{tensor!r}")
        if len(set(map(id, inputs))) != len(inputs):
            raise ValueError(f"model '{self.name}': an input is listed twice")
        self._inputs, self._output = inputs, outputs
        self._nodes = collect_nodes(inputs, outputs)
