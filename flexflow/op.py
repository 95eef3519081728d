"""Op handles: FlexFlow's per-layer wrapper objects (`get_layers()`, `get_layer_by_id(i)`)."""

from __future__ import annotations

from .tensor import Parameter, Tensor


class Op:
    def __init__(self, model, layer_index: int):
        self._model = model
        self.idx = layer_index

    @property
    def _layer(self):
        return self._model.graph.layers[self.idx]

    @property
    def name(self) -> str | None:
        """The `name=` given when the layer was created (None if none was)."""
        return self._layer.user_name

    @property
    def op_name(self) -> str:
        """The unique name strategies use, e.g. `Dense_100`."""
        return self._layer.name

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.op_name})"

    def get_number_parameters(self) -> int:
        return len(self._layer.weights)

    def get_parameter_by_id(self, i: int) -> Parameter:
        if not 0 <= i < len(self._layer.weights):
            raise IndexError(f"{self.op_name} has {len(self._layer.weights)} parameters, "
                             f"asked for #{i}")
        return Parameter(self._model, self.idx, i)

    def get_number_inputs(self) -> int:
        return len(self._layer.inputs)

    def get_input_by_id(self, i: int) -> Tensor:
        return self._model._tensor(self._layer.inputs[i])

    def get_number_outputs(self) -> int:
        return len(self._layer.outputs)

    def get_output_by_id(self, i: int) -> Tensor:
        return self._model._tensor(self._layer.outputs[i])

    def get_input_tensor(self) -> Tensor:
        return self.get_input_by_id(0)

    def get_output_tensor(self) -> Tensor:
        return self.get_output_by_id(0)

    get_input_tensor_by_id = get_input_by_id

    def get_weight_tensor(self) -> Parameter:
        return self.get_parameter_by_id(0)

    def get_bias_tensor(self) -> Parameter:
        return self.get_parameter_by_id(1)

    @property
    def num_weights(self) -> int:
        return self.get_number_parameters()

    def init(self, model) -> None:
        """Weights are initialised for the whole model by `init_layers`."""

    def forward(self, model) -> None:
        model.forward()


# One subclass per operator, named as FlexFlow's Python wrappers are, for isinstance checks.
_WRAPPER_NAMES = {
    "Conv2D": "Conv2D", "Dense": "Linear", "Pool2D": "Pool2D", "Flat": "Flat",
    "Embedding": "Embedding", "LayerNorm": "LayerNorm", "BatchNorm": "BatchNorm",
    "Concat": "Concat", "Softmax": "Softmax", "Exp": "Exp", "Add": "Add", "Sub": "Subtract",
    "Mul": "Multiply", "Div": "Divide", "Max": "Max", "Min": "Min", "Dropout": "Dropout",
    "ScalarMultiply": "ScalarMultiply", "ScalarAdd": "ScalarAdd", "ScalarSub": "ScalarSub",
    "ScalarTrueDiv": "ScalarTrueDiv", "Rsqrt": "Rsqrt", "Pow": "Pow", "Mean": "Mean",
    "ReLU": "Relu", "Gelu": "Gelu", "Sigmoid": "Sigmoid", "Tanh": "Tanh", "Elu": "Elu",
    "BatchMatmul": "Batch_Matmul", "Split": "Split", "Reshape": "Reshape",
    "Identity": "Identity", "Transpose": "Transpose", "Reverse": "Reverse",
    "MultiHeadAttention": "MultiHeadAttention", "Constant": "Constant",
}
WRAPPERS = {type_name: type(cls_name, (Op,), {"__doc__": f"Handle of a {type_name} layer."})
            for type_name, cls_name in _WRAPPER_NAMES.items()}
globals().update({cls.__name__: cls for cls in WRAPPERS.values()})
Batch_Norm = WRAPPERS["BatchNorm"]


def wrap(model, layer_index: int) -> Op:
    type_name = model.graph.layers[layer_index].type_name
    return WRAPPERS.get(type_name, Op)(model, layer_index)
