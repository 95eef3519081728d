"""Tensor and Parameter handles: host access to a model's tensors and weights.

A Tensor names a tensor of the model's graph; its data lives on the devices (activations), in the
fed batch (inputs, the label) or in an attached numpy array (data-loader "full" tensors). A
Parameter names one weight of a layer.
"""

from __future__ import annotations

import numpy as np

from .ops.spec import ShapeError
from .type import DATA_TYPE, NUMPY_DTYPE, DataType


class Tensor:
    def __init__(self, model, tensor_id: int, owner_op=None):
        self._model = model
        self._id = tensor_id
        self.owner_op = owner_op
        self.mapped = False
        self._mapped_array: np.ndarray | None = None
        self._attached: np.ndarray | None = None

    # ---- description --------------------------------------------------------------------------
    @property
    def spec(self):
        return self._model.graph.tensors[self._id].spec

    @property
    def dims(self) -> tuple[int, ...]:
        return self.spec.shape

    @property
    def num_dims(self) -> int:
        return len(self.dims)

    @property
    def data_type(self) -> DataType:
        return DATA_TYPE[self.spec.dtype]

    @property
    def handle(self):
        return self

    def __repr__(self) -> str:
        return f"Tensor(dims={self.dims}, data_type={self.data_type.name})"

    # ---- data ---------------------------------------------------------------------------------
    def get_tensor(self, ffmodel=None, comm_type=None) -> np.ndarray:
        """A host copy of this tensor's current value."""
        return np.array(self._model._read_tensor(self._id), copy=True)

    def set_tensor(self, ffmodel, np_array, comm_type=None) -> None:
        """Feed this tensor (a model input or the label) for the next iteration."""
        self._model._feed(self._id, self._checked(np_array, "set_tensor"))

    def get_gradients(self, ffmodel=None, comm_type=None) -> np.ndarray:
        return self._model._read_gradient(self._id)

    def attach_numpy_array(self, ffconfig, np_array) -> None:
        """Back this tensor with `np_array` (exact dims); data loaders read from it."""
        self._attached = self._checked(np_array, "attach_numpy_array")
        if self._id in self._model.graph.inputs or self._model._is_label(self._id):
            self._model._feed(self._id, self._attached)

    def detach_numpy_array(self, ffconfig=None) -> None:
        self._attached = None

    def inline_map(self, *args) -> None:
        """Map the tensor for host access: `get_array` then returns a writable array, and
        `inline_unmap` writes changes back (FlexFlow's Legion inline mapping)."""
        self._mapped_array = (self._attached if self._attached is not None
                              else self._model._read_tensor(self._id, for_write=True))
        self.mapped = True

    def inline_unmap(self, *args) -> None:
        if not self.mapped:
            raise RuntimeError(f"{self} is not mapped; call inline_map first")
        self._model._write_back(self._id, self._mapped_array)
        self._mapped_array = None
        self.mapped = False

    def is_mapped(self) -> bool:
        return self.mapped

    def get_array(self, *args) -> np.ndarray:
        """The mapped array (r20.12's `get_array(ffconfig, data_type)` form is accepted)."""
        if not self.mapped:
            raise RuntimeError(f"{self} is not mapped; call inline_map(ffconfig) first")
        return self._mapped_array

    def get_flat_array(self, *args) -> np.ndarray:
        return self.get_array().reshape(-1)

    def _checked(self, array, what: str) -> np.ndarray:
        array = np.asarray(array)
        expected = NUMPY_DTYPE[self.data_type]
        if tuple(array.shape) != self.dims:
            raise ShapeError(f"{what}: tensor {tensor_name(self._model, self._id)} has dims "
                             f"{self.dims}, got an array of shape {tuple(array.shape)}")
        if array.dtype != np.dtype(expected):
            raise ShapeError(f"{what}: tensor {tensor_name(self._model, self._id)} holds "
                             f"{expected}, got an array of dtype {array.dtype}")
        return np.ascontiguousarray(array)


class Parameter(Tensor):
    """One weight of a layer, addressed as (owning layer, weight index)."""

    def __init__(self, model, layer_index: int, weight_index: int):
        super().__init__(model, -1)
        self._layer = layer_index
        self._weight = weight_index

    @property
    def weight_spec(self):
        layer = self._model.graph.layers[self._layer]
        return self._model.graph.layers[layer.weight_owner].weights[self._weight]

    @property
    def spec(self):
        return self.weight_spec.spec

    @property
    def name(self) -> str:
        return f"{self._model.graph.layers[self._layer].name}.{self.weight_spec.name}"

    def __repr__(self) -> str:
        return f"Parameter({self.name}, dims={self.dims})"

    def get_weights(self, ffmodel=None) -> np.ndarray:
        return self._model._get_weight(self._layer, self._weight)

    def set_weights(self, ffmodel, np_array) -> None:
        array = np.asarray(np_array)
        if tuple(array.shape) != self.dims:
            raise ShapeError(f"set_weights: {self.name} has dims {self.dims}, got an array of "
                             f"shape {tuple(array.shape)}")
        self._model._set_weight(self._layer, self._weight, array.astype(np.float32))

    def get_tensor(self, ffmodel=None, comm_type=None) -> np.ndarray:
        return self.get_weights()

    def set_tensor(self, ffmodel, np_array, comm_type=None) -> None:
        self.set_weights(ffmodel, np_array)

    def get_gradients(self, ffmodel=None, comm_type=None) -> np.ndarray:
        return self._model._get_weight_grad(self._layer, self._weight)

    def inline_map(self, *args) -> None:
        self._mapped_array = self.get_weights()
        self.mapped = True

    def inline_unmap(self, *args) -> None:
        if not self.mapped:
            raise RuntimeError(f"{self} is not mapped; call inline_map first")
        self.set_weights(None, self._mapped_array)
        self._mapped_array = None
        self.mapped = False


def tensor_name(model, tensor_id: int) -> str:
    """How messages name a tensor of `model`: the label, a model input by its position, or the
    output of the layer that computes it, with its shape."""
    graph = model.graph
    tensor = graph.tensors[tensor_id]
    if model._is_label(tensor_id):
        return f"label tensor {tensor.spec.shape}"
    if tensor.producer is None:
        position = graph.inputs.index(tensor_id) if tensor_id in graph.inputs else tensor_id
        return f"input tensor #{position} {tensor.spec.shape}"
    return f"output of layer '{graph.layers[tensor.producer[0]].name}' {tensor.spec.shape}"
