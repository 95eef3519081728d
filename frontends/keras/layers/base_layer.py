"""The Layer base class: naming, symbolic calls, and weight access once compiled.

Calling a layer on Keras tensors records a `Node` (the call: input and output tensors) and infers
the output shapes at once, so a shape error points at the line that made it. Nothing is computed
until a model is compiled: then each node emits the FFModel ops it stands for (`emit`).

A layer may be called more than once. In one compiled model, every call of a layer uses the same
weights (Keras semantics); FFModel shares weights for dense, conv2d and embedding ops. A model that
is re-applied to a new tensor (`model(t)`) calls its layers again, so the new calls share the
layers (and, inside one model, their weights) with the original ones.
"""

from __future__ import annotations

import itertools
import weakref
from collections import Counter
from dataclasses import dataclass, field

from ..tensor import Tensor, check_dtype

_name_counts: Counter = Counter()
_node_order = itertools.count()


def unique_name(base: str) -> str:
    """`base`, then `base_1`, `base_2`, ... for later layers with the same default name."""
    count = _name_counts[base]
    _name_counts[base] += 1
    return base if count == 0 else f"{base}_{count}"


def reset_names() -> None:
    """Start default names afresh (`backend.clear_session()`)."""
    _name_counts.clear()


@dataclass(eq=False)
class Node:
    """One call of a layer: what it read and what it produced."""

    layer: "Layer"
    inputs: list[Tensor]
    outputs: list[Tensor]
    order: int = field(default_factory=lambda: next(_node_order))


class Layer:
    #: rank of one sample of the input (batch dim excluded), for `input_shape=`; None: any
    input_rank: int | None = None
    #: whether all calls of the layer in one model can use the same weights
    can_share_weights = False

    def __init__(self, default_name: str, layer_type: str, name: str | None = None,
                 input_shape=None, batch_input_shape=None, dtype=None, trainable=True):
        self.name = name if name is not None else unique_name(default_name)
        self.layer_type = layer_type
        self.layer_id = -1
        self.nodes: list[Node] = []
        self._declared_input_shape = self._sample_shape(input_shape, batch_input_shape)
        self._declared_dtype = check_dtype(dtype, f"layer '{self.name}'")
        if not trainable:
            raise ValueError(f"layer '{self.name}': trainable=False is not supported")
        self._ffops = weakref.WeakKeyDictionary()  # FFModel -> the op holding this layer's weights

    def __repr__(self) -> str:
        return f"<{self.layer_type} layer '{self.name}'>"

    def _sample_shape(self, input_shape, batch_input_shape):
        """The declared input shape without the batch dim. A shape one longer than
        `input_rank` includes the batch dim (FlexFlow accepts both forms)."""
        if batch_input_shape is not None:
            return tuple(batch_input_shape)[1:]
        if input_shape is None:
            return None
        shape = (int(input_shape),) if isinstance(input_shape, int) else tuple(input_shape)
        if self.input_rank is not None and len(shape) == self.input_rank + 1:
            shape = shape[1:]
        if self.input_rank is not None and len(shape) != self.input_rank:
            raise ValueError(f"layer '{self.name}': input_shape {tuple(input_shape)} should have "
                             f"{self.input_rank} dims (without the batch dim)")
        return tuple(int(d) for d in shape)

    # ---- symbolic calls -------------------------------------------------------------------------
    def __call__(self, inputs):
        tensors = list(inputs) if isinstance(inputs, (list, tuple)) else [inputs]
        for t in tensors:
            if not isinstance(t, Tensor):
                raise TypeError(f"layer '{self.name}' must be called on Keras tensors (from "
                                f"Input(...) or another layer), got {t!r}")
        shapes = [t.shape_without_batch for t in tensors]
        try:
            out_shapes = self.compute_output_shape(shapes)
            out_dtype = self.output_dtype([t.dtype_str for t in tensors])
        except ValueError as error:
            raise ValueError(f"layer '{self.name}' ({self.layer_type}) called on input shape(s) "
                             f"{', '.join(str((None,) + s) for s in shapes)}: {error}") from None
        node = Node(self, tensors, [])
        node.outputs = [Tensor(s, out_dtype, self, node) for s in out_shapes]
        self.nodes.append(node)
        for t in tensors:
            t.to_layers.append(self)
        return node.outputs[0] if len(node.outputs) == 1 else node.outputs

    def compute_output_shape(self, input_shapes: list[tuple]) -> list[tuple]:
        """Output shapes (batch dim excluded) for these input shapes; ValueError if invalid."""
        raise NotImplementedError

    def output_dtype(self, input_dtypes: list[str]) -> str:
        return "float32"

    @staticmethod
    def expect_inputs(shapes: list[tuple], count: int) -> list[tuple]:
        if len(shapes) != count:
            raise ValueError(f"expects {count} input tensor(s), got {len(shapes)}")
        return shapes

    # ---- FlexFlow's attributes: the latest call -------------------------------------------
    @property
    def input_tensors(self) -> list[Tensor]:
        return self.nodes[-1].inputs if self.nodes else []

    @property
    def output_tensors(self) -> list[Tensor]:
        return self.nodes[-1].outputs if self.nodes else []

    @property
    def input(self):
        return _single_or_list(self.input_tensors)

    @property
    def output(self):
        return _single_or_list(self.output_tensors)

    @property
    def input_shape(self):
        if not self.nodes:
            declared = self._declared_input_shape
            return None if declared is None else (None,) + declared
        return _single_or_list([t.batch_shape for t in self.input_tensors])

    @property
    def output_shape(self):
        return _single_or_list([t.batch_shape for t in self.output_tensors])

    @property
    def prev_layers(self) -> list["Layer"]:
        return [t.from_layer for t in self.input_tensors if t.from_layer is not None]

    @property
    def next_layers(self) -> list["Layer"]:
        return [layer for t in self.output_tensors for layer in t.to_layers]

    # ---- compile ----------------------------------------------------------------------------
    def emit(self, ffmodel, inputs: list) -> list:
        """Add this layer's FFModel ops for one call on FFModel tensors `inputs`; returns the
        call's FFModel output tensors."""
        shared = self._ffops.get(ffmodel)
        if shared is not None and not self.can_share_weights:
            raise ValueError(f"layer '{self.name}' ({self.layer_type}) is called more than once "
                             f"in the model; only Dense, Conv2D and Embedding layers can share "
                             f"their weights between calls")
        outputs, weight_op = self._emit(ffmodel, inputs, shared)
        if shared is None and weight_op is not None:
            self._ffops[ffmodel] = weight_op
        return outputs

    def _emit(self, ffmodel, inputs: list, shared_op):
        """(FFModel output tensors, the op holding the weights or None)."""
        raise NotImplementedError

    # ---- weights ----------------------------------------------------------------------------
    def _parameters(self, ffmodel) -> list:
        op = self._ffops.get(ffmodel) if ffmodel is not None else self._latest_op()
        if op is None:
            where = "this model" if ffmodel is not None else "any compiled model"
            raise ValueError(f"layer '{self.name}' ({self.layer_type}) has no weights in {where} "
                             f"(weights exist after model.compile(); pass the model's ffmodel)")
        return [op.get_parameter_by_id(i) for i in range(op.get_number_parameters())]

    def _latest_op(self):
        ops = list(self._ffops.values())
        return ops[-1] if ops else None

    @property
    def ffhandle(self):
        """The FFModel op holding this layer's weights in the model it was last compiled into
        (None for layers without weights or before compile)."""
        return self._latest_op()

    def weight_names(self, ffmodel=None) -> list[str]:
        return [p.weight_spec.name for p in self._parameters(ffmodel)]

    def get_weights(self, ffmodel=None) -> tuple:
        """This layer's weights in `ffmodel` (default: the model it was last compiled into) as
        float32 arrays in FlexFlow's layouts: Dense (kernel (out, in), bias), Conv2D (kernel
        (out, in/groups, kh, kw), bias), Embedding (table,), BatchNormalization (gamma, beta,
        moving mean, moving variance)."""
        return tuple(p.get_weights(ffmodel) for p in self._parameters(ffmodel))

    def set_weights(self, ffmodel, *weights) -> None:
        """`set_weights(ffmodel, kernel, bias)` (FlexFlow) or `set_weights(ffmodel, [kernel,
        bias])` (Keras); arrays in the order and shapes `get_weights` returns."""
        if len(weights) == 1 and isinstance(weights[0], (list, tuple)):
            weights = tuple(weights[0])
        params = self._parameters(ffmodel)
        if len(weights) != len(params):
            raise ValueError(f"layer '{self.name}' has {len(params)} weights "
                             f"({', '.join(p.weight_spec.name for p in params)}), got "
                             f"{len(weights)} arrays")
        for param, array in zip(params, weights):
            if tuple(getattr(array, "shape", ())) != tuple(param.dims):
                raise ValueError(f"layer '{self.name}': weight '{param.weight_spec.name}' has "
                                 f"shape {tuple(param.dims)}, got an array of shape "
                                 f"{tuple(getattr(array, 'shape', ()))}")
        for param, array in zip(params, weights):
            param.set_weights(ffmodel, array)


def _single_or_list(items: list):
    return items[0] if len(items) == 1 else items


def refuse(layer_name: str, **options) -> None:
    """A ValueError naming the first of `options` that is set (not None/False): arguments Keras
    has that this front end does not implement."""
    for key, value in options.items():
        if value is not None and value is not False:
            raise ValueError(f"layer '{layer_name}': {key}={value!r} is not supported")
