"""A torch.export program (aten ops) -> IR nodes and weights, for models torch.fx cannot trace.

torch.fx traces Python symbolically and fails on much of what Hugging Face models do (their
caches, generated masks, `*args` forwards); torch.export runs the model on example inputs and
records the aten ops it dispatches, so the graph holds fixed shapes (the examples' batch and
sequence length) and no Python control flow. Its graph is translated here into the IR the
builder already builds, so the `.ff` format and the builder are the same for both routes.

What a node becomes depends on what it reads:

* a node that reads neither a user input nor a parameter (`arange`, position ids, causal masks,
  rotary tables, buffers) is evaluated at once in torch: a constant. A constant read by a
  computed node becomes an ATTRIBUTE node holding it as a frozen buffer; a one-element constant
  becomes a scalar operand;
* a parameter becomes the weight of the layer that reads it (linear, addmm, embedding,
  layer_norm), or, read by anything else (an RMS norm's `weight * x`), an ATTRIBUTE node holding
  it as a trainable weight. A parameter read by two layers (GPT-2's tied token embedding and
  output projection) is one weight: the later layer shares the first one's (`TorchState.shared`);
* a mask computed from an input (a Hugging Face `attention_mask`: a cast to bool, a gather by
  constant indices, an `and` with the causal mask, a `where`) becomes layers: TO, RESHAPE and
  the COMPARE, WHERE, LOGICAL nodes of masks.py; a bool constant it meets is a buffer cast back;
* every other node becomes one IR node named after it (scaled dot-product attention and SiLU
  the TorchOp nodes the builder composes), or a few named `<node>_<part>` where the IR has no
  op for it (an embedding of constant ids), or none where it changes nothing (clone, alias, a
  cast to the type it has, dropout off, a reshape to the same shape).

Every node that cannot be translated is named in one error, with its aten op and source line.
"""

from __future__ import annotations

import operator
import warnings

import numpy as np
import torch
import torch.fx as fx
import torch.nn.functional as F
from torch.export import ExportedProgram
from torch.export.graph_signature import InputKind, OutputKind

from flexflow.type import OpType

from .call import Call, is_number, meta, source_line
from .fallbacks import TorchImportWarning
from .functions import GELUS, REVERSED
from .ir import (ONNX_ROUTE, ConversionError, IRNode, TorchOp, all_errors, format_param,
                 parse_param)
from .masks import MASK_CONVERTERS
from .modules import NO_ACTIVATION
from .weights import BUFFER, PARAMETER, TorchState

aten = torch.ops.aten
MASKED = float(np.finfo(np.float32).min)  # what a False of a bool attention mask adds
_IGNORED = {aten._assert_tensor_metadata, aten._assert_scalar, aten.sym_constrain_range_for_size}


def normalized(params) -> tuple:
    """Parameters as they read back from a `.ff` file, so both routes build the same."""
    return tuple(parse_param(format_param(p)) for p in params)


def export_program(model: torch.nn.Module, example_inputs) -> ExportedProgram:
    """torch.export's program of `model` on `example_inputs`: a tuple of positional tensors, or
    a dict of keyword tensors (a Hugging Face model's `input_ids`, ...)."""
    args, kwargs = ((), dict(example_inputs)) if isinstance(example_inputs, dict) else (
        tuple(example_inputs), {})
    try:
        return torch.export.export(model, args, kwargs)
    except Exception as error:  # torch.export's own reasons: data-dependent flow and the like
        raise ConversionError(f"torch.export cannot export {type(model).__name__}: "
                              f"{type(error).__name__}: {error}") from error


class Translator:
    """The state of one translation: what each graph node stands for so far.

    A node stands for a constant (`constants`, its torch value), a parameter (`parameters`, by
    placeholder name), or an IR node (`names`, the IR node whose value it has)."""

    def __init__(self, program: ExportedProgram):
        self.program = program
        self.nodes: list[IRNode] = []
        self.state = TorchState()
        self.constants: dict[str, object] = {}
        self.parameters: dict[str, torch.Tensor] = {}
        self.names: dict[str, str] = {}
        self.owners: dict[str, tuple[str, str]] = {}  # parameter -> (IR node, weight name)
        self.taken: set[str] = set()
        self.where = ""

    # ---- reading arguments ----------------------------------------------------------------------
    def is_constant(self, value) -> bool:
        found = []
        fx.node.map_arg(value, lambda n: found.append(n.name not in self.constants))
        return not any(found)

    def constant(self, value):
        """The torch value of an argument made of constants."""
        return fx.node.map_arg(value, lambda n: self.constants[n.name])

    def tensor(self, call: Call, value) -> str:
        """The IR node holding argument `value`: a computed node's, or an ATTRIBUTE node made
        for a constant or a parameter read as a tensor."""
        if not isinstance(value, fx.Node):
            raise call.fail(f"a tensor of the model was expected, got {value!r}")
        if value.name in self.names:
            return self.names[value.name]
        if value.name in self.parameters:
            return self.parameter_attribute(call, value.name)
        array = self.constants[value.name]
        if not isinstance(array, torch.Tensor) or not (
                array.is_floating_point() or torch.equal(array.float().to(array.dtype), array)):
            raise call.fail(f"the constant '{value.name}' ({_describe(array)}) is read as a "
                            f"tensor; only float constants and bool or integer ones that float32 "
                            f"holds exactly can be")
        if not array.is_floating_point():
            return self.cast_constant(call, value.name, array)
        self.names[value.name] = self.buffer(value.name, array)
        return self.names[value.name]

    def cast_constant(self, call: Call, name: str, array: torch.Tensor) -> str:
        """A bool or integer constant (a causal mask) as a float32 buffer cast back to its type:
        FlexFlow's weights and buffers are float32."""
        self.buffer(name, array)
        self.names[name] = self.emit(f"{name}_{str(array.dtype)[6:]}", OpType.TO, [name],
                                     (str(array.dtype),))
        return self.names[name]

    def buffer(self, name: str, array: torch.Tensor) -> str:
        """An ATTRIBUTE node holding the constant `array` (float32), which never trains."""
        self.emit(name, OpType.ATTRIBUTE, (), ())
        self.state.tensors[name] = {BUFFER: _array(array)}
        return name

    def parameter_attribute(self, call: Call, parameter: str) -> str:
        """The ATTRIBUTE node of a parameter read as a tensor (a trainable weight), one for all
        such reads."""
        owner = self.owners.get(parameter)
        if owner is not None and owner[1] != PARAMETER:
            raise call.fail(f"parameter '{parameter}' is the weight of layer '{owner[0]}' and is "
                            f"read directly too: a FlexFlow weight is either")
        if owner is None:
            name = self.emit(parameter, OpType.ATTRIBUTE, (), ())
            self.state.tensors[name] = {PARAMETER: _array(self.parameters[parameter])}
            self.owners[parameter] = (name, PARAMETER)
        return self.owners[parameter][0]

    def parameter(self, call: Call, index: int, name: str, optional=False):
        """(placeholder name, tensor) of the parameter passed as argument `name`; None for an
        optional argument not passed."""
        value = call.arg(index, name, None)
        if value is None and optional:
            return None
        if not isinstance(value, fx.Node) or value.name not in self.parameters:
            raise call.fail(f"argument '{name}' must be a parameter of the model")
        return value.name, self.parameters[value.name]

    def scalar(self, value):
        """A number for a Python number or a one-element constant, else None."""
        if is_number(value):
            return value
        if isinstance(value, fx.Node) and value.name in self.constants:
            constant = self.constants[value.name]
            if isinstance(constant, torch.Tensor) and constant.numel() == 1:
                return constant.item()
        return None

    def number_operand(self, call: Call, a, b) -> tuple[int, object] | None:
        """(k, number) where operand k of a binary op is a number (or a one-element constant)
        that leaves the other's shape as the result's, the right one tried first; else None."""
        shape = tuple(meta(call.node).shape)
        for k in (1, 0):
            number, other = self.scalar((a, b)[k]), (a, b)[1 - k]
            if number is not None and isinstance(other, fx.Node) and tuple(
                    meta(other).shape) == shape:
                return k, number
        return None

    # ---- writing IR -----------------------------------------------------------------------------
    def emit(self, name: str, op_type, inputs, params) -> str:
        if name in self.taken:
            raise ConversionError(f"two IR nodes would be named '{name}'")
        self.taken.add(name)
        self.nodes.append(IRNode(name, tuple(inputs), (), op_type, normalized(params),
                                 self.where))
        return name

    def layer(self, call: Call, op_type: OpType, inputs, params, weights: dict) -> str:
        """A layer with weights, `weights` mapping torch weight names to (parameter, array).
        Parameters already the weights of an earlier layer make this layer share its weights."""
        name = call.node.name
        owners = {self.owners[p][0] if p in self.owners else None for p, _ in weights.values()}
        if owners == {None}:
            self.state.tensors[name] = {key: array for key, (_, array) in weights.items()}
            self.owners.update({parameter: (name, key) for key, (parameter, _)
                                in weights.items()})
        else:
            self.state.shared[name] = self._shared_owner(call, owners, weights)
        return self.emit(name, op_type, inputs, params)

    def _shared_owner(self, call: Call, owners: set, weights: dict) -> str:
        """The earlier layer whose weights are `weights`, all of them, in the same roles and
        layouts: FlexFlow layers share all of their weights or none (not an ATTRIBUTE's, nor
        a transposed copy's)."""
        owner = next(iter(owners))
        theirs = self.state.tensors.get(owner, {})
        if len(owners) > 1 or owner is None or theirs.keys() != weights.keys() or any(
                not np.array_equal(theirs[key], array) for key, (_, array) in weights.items()):
            raise call.fail(f"its parameters {[p for p, _ in weights.values()]} are read by "
                            f"other nodes in another way; FlexFlow layers share all of their "
                            f"weights or none")
        return owner

    # ---- the graph ------------------------------------------------------------------------------
    def bind_inputs(self) -> None:
        """User inputs become INPUT nodes (in order), parameters weights, buffers and lifted
        tensors constants (a parameter that does not train is a constant too)."""
        program = self.program
        for spec in program.graph_signature.input_specs:
            name, target = spec.arg.name, spec.target
            if spec.kind == InputKind.USER_INPUT:
                self.names[name] = self.emit(name, OpType.INPUT, (), ())
            elif spec.kind == InputKind.PARAMETER and program.state_dict[target].requires_grad:
                self.parameters[name] = program.state_dict[target]
            elif spec.kind in (InputKind.PARAMETER, InputKind.BUFFER,
                               InputKind.CONSTANT_TENSOR):
                self.constants[name] = (program.state_dict[target]
                                        if target in program.state_dict
                                        else program.constants[target])
            else:
                raise ConversionError(f"input '{name}' of the exported program is a "
                                      f"{spec.kind.name}, which cannot be translated")

    def translate(self, node: fx.Node) -> None:
        """Evaluate `node` now if it reads only constants, else translate it."""
        call = Call(node, str(node.target), source_line(node))
        self.where = call.where
        if self.is_constant((node.args, node.kwargs)):
            with torch.no_grad():
                self.constants[node.name] = node.target(*self.constant(node.args),
                                                        **self.constant(node.kwargs))
            return
        packet = getattr(node.target, "overloadpacket", node.target)
        if packet in _IGNORED:
            return
        convert = CONVERTERS.get(packet)
        if convert is None:
            raise call.fail("this op is not supported by the torch.export route")
        self.names[node.name] = convert(self, call)

    def output(self, node: fx.Node) -> None:
        """The OUTPUT node: the model's returned tensors (a model that changes its buffers as
        it runs, batch-norm statistics or a cache, is refused)."""
        call = Call(node, "output", "")
        specs = self.program.graph_signature.output_specs
        changed = [spec.target for spec in specs if spec.kind != OutputKind.USER_OUTPUT]
        if changed:
            raise call.fail(f"the model changes {changed} as it runs, which FlexFlow's layers "
                            f"cannot (batch-norm statistics or a cache: build it without)")
        returned = [self.tensor(call, value) for value in node.args[0]]
        self.emit("output", OpType.OUTPUT, returned, ())


def _array(tensor: torch.Tensor) -> np.ndarray:
    return tensor.detach().float().cpu().numpy().copy()


def _describe(value) -> str:
    if isinstance(value, torch.Tensor):
        return f"{str(value.dtype).removeprefix('torch.')} {tuple(value.shape)}"
    return repr(value)


# ---- converters: (translator, call) -> the IR node that holds the node's value -----------------
def _input(tr: Translator, call: Call, index: int = 0, name: str = "input") -> str:
    return tr.tensor(call, call.arg(index, name))


def _same(tr: Translator, call: Call) -> str:
    """clone, contiguous, alias, detach: the input's own IR node."""
    return _input(tr, call)


def _unary(op_type: OpType | TorchOp, *params):
    return lambda tr, call: tr.emit(call.node.name, op_type, [_input(tr, call)], params)


def _to(tr: Translator, call: Call) -> str:
    """A cast: nothing when the type stays (a device or layout change), else a TO node."""
    target = meta(call.node).dtype
    if meta(call.arg(0, "input")).dtype == target:
        return _input(tr, call)
    return tr.emit(call.node.name, OpType.TO, [_input(tr, call)], (str(target),))


def _dropout(tr: Translator, call: Call) -> str:
    rate, train = float(call.arg(1, "p")), call.arg(2, "train")
    if not train or rate == 0:
        return _input(tr, call)
    return tr.emit(call.node.name, OpType.DROPOUT, [_input(tr, call)], (rate,))


def _gelu(tr: Translator, call: Call) -> str:
    approximate = call.kwargs.get("approximate", "none")
    call.expect(approximate in GELUS, f"gelu(approximate={approximate!r}) is not supported")
    return tr.emit(call.node.name, GELUS[approximate], [_input(tr, call)], ())


def _pow(tr: Translator, call: Call) -> str:
    exponent = call.arg(1, "exponent")
    call.expect(is_number(exponent), f"only a number exponent is supported, got {exponent!r}")
    return tr.emit(call.node.name, OpType.POW, [_input(tr, call)], (exponent,))


def _arithmetic(tensor_op: OpType, scalar_op: OpType, commutes: bool):
    def convert(tr: Translator, call: Call) -> str:
        call.expect(call.kwargs.get("alpha", 1) == 1, "alpha is not supported")
        call.expect(call.kwargs.get("rounding_mode") is None, "rounding_mode is not supported")
        a, b = call.arg(0, "input"), call.arg(1, "other")
        found = tr.number_operand(call, a, b)
        if found is not None:
            k, number = found
            flip = (REVERSED,) if k == 0 and not commutes else ()
            return tr.emit(call.node.name, scalar_op, [tr.tensor(call, (a, b)[1 - k])],
                           (number,) + flip)
        return tr.emit(call.node.name, tensor_op, [tr.tensor(call, a), tr.tensor(call, b)], ())
    return convert


def _neg(tr: Translator, call: Call) -> str:
    return tr.emit(call.node.name, OpType.SCALAR_MULTIPLY, [_input(tr, call)], (-1,))


def _mean(tr: Translator, call: Call) -> str:
    dims = call.arg(1, "dim", None) or range(meta(call.arg(0, "input")).dim())
    keepdim = (True,) if call.arg(2, "keepdim", False) else ()
    return tr.emit(call.node.name, OpType.MEAN, [_input(tr, call)], tuple(dims) + keepdim)


def _softmax(tr: Translator, call: Call) -> str:
    return tr.emit(call.node.name, OpType.SOFTMAX, [_input(tr, call)], (call.arg(1, "dim"),))


# ---- shapes and pieces --------------------------------------------------------------------------
def _reshape(tr: Translator, call: Call) -> str:
    """view, reshape, squeeze, flatten, ...: a reshape to the shape torch.export recorded
    (none where the shape stays)."""
    shape = list(meta(call.node).shape)
    if list(meta(call.arg(0, "input")).shape) == shape:
        return _input(tr, call)
    return tr.emit(call.node.name, OpType.RESHAPE, [_input(tr, call)], (shape,))


def _expand(tr: Translator, call: Call) -> str:
    return tr.emit(call.node.name, OpType.EXPAND, [_input(tr, call)],
                   (list(meta(call.node).shape),))


def _transpose(tr: Translator, call: Call) -> str:
    dims = (0, 1) if call.node.target == aten.t.default else (call.arg(1, "dim0"),
                                                              call.arg(2, "dim1"))
    return tr.emit(call.node.name, OpType.TRANSPOSE, [_input(tr, call)], dims)


def _permute(tr: Translator, call: Call) -> str:
    return tr.emit(call.node.name, OpType.PERMUTE, [_input(tr, call)],
                   tuple(call.arg(1, "dims")))


def _unsqueeze(tr: Translator, call: Call) -> str:
    return tr.emit(call.node.name, OpType.UNSQUEEZE, [_input(tr, call)], (call.arg(1, "dim"),))


def _index_at(call: Call, dim: int, item) -> tuple:
    """The basic index that picks `item` (an int or a slice) along `dim`."""
    rank = meta(call.arg(0, "input")).dim()
    return (slice(None),) * (dim % rank) + (item,)


def _slice(tr: Translator, call: Call) -> str:
    dim = call.arg(1, "dim", 0)
    item = slice(call.arg(2, "start", None), call.arg(3, "end", None), call.arg(4, "step", 1))
    return tr.emit(call.node.name, OpType.GETITEM, [_input(tr, call)],
                   _index_at(call, dim, item))


def _select(tr: Translator, call: Call) -> str:
    return tr.emit(call.node.name, OpType.GETITEM, [_input(tr, call)],
                   _index_at(call, call.arg(1, "dim"), call.arg(2, "index")))


def _split(tr: Translator, call: Call) -> str:
    """split, split_with_sizes, chunk: the pieces' sizes as torch.export recorded them."""
    dim = call.arg(2, "dim", 0)
    sizes = [piece.shape[dim] for piece in meta(call.node)]
    return tr.emit(call.node.name, OpType.SPLIT, [_input(tr, call)], (sizes, dim))


def _getitem(tr: Translator, call: Call) -> str:
    return tr.emit(call.node.name, OpType.GETITEM, [_input(tr, call)], (call.arg(1, "index"),))


def _cat(tr: Translator, call: Call) -> str:
    tensors = [tr.tensor(call, t) for t in call.arg(0, "tensors")]
    return tr.emit(call.node.name, OpType.CONCAT, tensors, (call.arg(1, "dim", 0),))


def _matmul(tr: Translator, call: Call) -> str:
    a, b = _input(tr, call), _input(tr, call, 1, "other")
    return tr.emit(call.node.name, OpType.BATCH_MATMUL, [a, b], ())


# ---- layers with weights ------------------------------------------------------------------------
def _weights(tr: Translator, call: Call, names: dict[str, int]) -> dict:
    """{torch weight name: (parameter, array)} of the parameters passed at `names`' positions
    (optional ones left out when not passed)."""
    weights = {}
    for key, index in names.items():
        found = tr.parameter(call, index, key, optional=key == "bias")
        if found is not None:
            weights[key] = (found[0], _array(found[1]))
    return weights


def _linear(tr: Translator, call: Call) -> str:
    weights = _weights(tr, call, {"weight": 1, "bias": 2})
    out_features = weights["weight"][1].shape[0]
    return tr.layer(call, OpType.LINEAR, [_input(tr, call)],
                    (out_features, NO_ACTIVATION, int("bias" in weights)), weights)


def _addmm(tr: Translator, call: Call) -> str:
    """bias + x @ weight (GPT-2's Conv1D): a linear layer whose kernel is the weight's
    transpose, a copy (so the weight cannot be read elsewhere as well)."""
    for name in ("beta", "alpha"):
        call.expect(call.kwargs.get(name, 1) == 1, f"{name} is not supported")
    weights = _weights(tr, call, {"bias": 0, "weight": 2})
    parameter, kernel = weights["weight"]
    weights["weight"] = (parameter, np.ascontiguousarray(kernel.T))
    return tr.layer(call, OpType.LINEAR, [_input(tr, call, 1, "mat1")],
                    (kernel.shape[1], NO_ACTIVATION, 1), weights)


def _layer_norm(tr: Translator, call: Call) -> str:
    """A layer norm; with a weight and no bias, LAYER_NORM's fourth parameter (bias) False."""
    shape = tuple(call.arg(1, "normalized_shape"))
    weights = _weights(tr, call, {"weight": 2, "bias": 3}) if call.arg(2, "weight", None) is \
        not None else {}
    call.expect(call.arg(3, "bias", None) is None or weights,
                "a layer norm with a bias and no weight is not supported")
    params = (shape, float(call.arg(4, "eps", 1e-5)), bool(weights)) + (
        (False,) if weights and "bias" not in weights else ())
    if not weights:
        return tr.emit(call.node.name, OpType.LAYER_NORM, [_input(tr, call)], params)
    return tr.layer(call, OpType.LAYER_NORM, [_input(tr, call)], params, weights)


def _embedding(tr: Translator, call: Call) -> str:
    """A lookup in a parameter table. Constant indices (position ids) select the rows by a
    product with their one-hot matrix, which is exact and trains the rows it reads."""
    weights = _weights(tr, call, {"weight": 0})
    parameter, table = weights["weight"]
    indices = call.arg(1, "indices")
    if indices.name in tr.constants:
        return _embedding_of_constant(tr, call, parameter, tr.constants[indices.name])
    padding = call.arg(2, "padding_idx", -1)
    call.expect(not call.arg(3, "scale_grad_by_freq", False), "scale_grad_by_freq is not "
                "supported")
    if padding >= 0:
        warnings.warn(TorchImportWarning(
            f"node '{call.node.name}' ({call.target}): padding_idx {padding}: FlexFlow's "
            f"embedding trains that row as well, where PyTorch leaves it; inputs that hold "
            f"index {padding} train differently"), stacklevel=2)
    return tr.layer(call, OpType.EMBEDDING, [tr.tensor(call, indices)], table.shape, weights)


def _embedding_of_constant(tr: Translator, call: Call, parameter: str, indices) -> str:
    name = call.node.name
    rows = tr.parameter_attribute(call, parameter)
    onehot = F.one_hot(indices.reshape(-1), tr.parameters[parameter].shape[0])
    picks = tr.buffer(f"{name}_onehot", onehot)
    product = tr.emit(f"{name}_rows", OpType.BATCH_MATMUL, [picks, rows], ())
    return tr.emit(name, OpType.RESHAPE, [product], (list(meta(call.node).shape),))


# ---- attention ----------------------------------------------------------------------------------
def _attention(tr: Translator, call: Call) -> str:
    """One SCALED_DOT_PRODUCT_ATTENTION node (the builder composes it); a mask computed from
    constants (a model's causal or padding mask) becomes what it adds to the scores."""
    call.expect(not call.kwargs.get("enable_gqa", False), "enable_gqa is not supported")
    inputs = [_input(tr, call, i, role) for i, role in enumerate(("query", "key", "value"))]
    bias = _attention_bias(tr, call)
    params = (float(call.arg(4, "dropout_p", 0.0)), bool(call.arg(5, "is_causal", False)),
              call.arg(6, "scale", None))
    return tr.emit(call.node.name, TorchOp.SCALED_DOT_PRODUCT_ATTENTION,
                   inputs + ([bias] if bias is not None else []), params)


def _attention_bias(tr: Translator, call: Call) -> str | None:
    """The IR node of the mask: a constant bool mask becomes the float one it adds, 0 where it
    holds and float32's lowest elsewhere (None when it holds everywhere: BERT's without
    padding); a float mask, or one computed from the inputs (a padding mask), is itself."""
    mask = call.arg(3, "attn_mask", None)
    if mask is None or not tr.is_constant(mask):  # a bool one keeps scores where it holds
        return None if mask is None else tr.tensor(call, mask)
    value = tr.constants[mask.name]
    if value.dtype != torch.bool:
        return tr.tensor(call, mask)
    if bool(value.all()):
        return None
    return tr.buffer(f"{call.node.name}_bias", torch.where(value, 0.0, MASKED))


CONVERTERS = {
    aten.clone: _same, aten.contiguous: _same, aten.alias: _same, aten.detach: _same,
    aten.lift_fresh_copy: _same, aten.to: _to, aten._to_copy: _to, aten.type_as: _to,
    aten.dropout: _dropout, aten.gelu: _gelu, aten.silu: _unary(TorchOp.SILU),
    aten.tanh: _unary(OpType.TANH), aten.sigmoid: _unary(OpType.SIGMOID),
    aten.relu: _unary(OpType.RELU), aten.exp: _unary(OpType.EXP),
    aten.rsqrt: _unary(OpType.RSQRT), aten.sqrt: _unary(OpType.POW, 0.5), aten.pow: _pow,
    aten.neg: _neg, aten.mean: _mean, aten.softmax: _softmax, aten._softmax: _softmax,
    aten.add: _arithmetic(OpType.ADD, OpType.SCALAR_ADD, True),
    aten.sub: _arithmetic(OpType.SUBTRACT, OpType.SCALAR_SUB, False),
    aten.mul: _arithmetic(OpType.MULTIPLY, OpType.SCALAR_MULTIPLY, True),
    aten.div: _arithmetic(OpType.DIVIDE, OpType.SCALAR_TRUEDIV, False),
    aten.view: _reshape, aten.reshape: _reshape, aten._unsafe_view: _reshape,
    aten.squeeze: _reshape, aten.flatten: _reshape, aten.unflatten: _reshape,
    aten.expand: _expand, aten.transpose: _transpose, aten.t: _transpose,
    aten.permute: _permute, aten.unsqueeze: _unsqueeze, aten.slice: _slice,
    aten.select: _select, aten.split: _split, aten.split_with_sizes: _split,
    aten.chunk: _split, operator.getitem: _getitem, aten.cat: _cat,
    aten.matmul: _matmul, aten.bmm: _matmul, aten.mm: _matmul,
    aten.linear: _linear, aten.addmm: _addmm, aten.layer_norm: _layer_norm,
    aten.embedding: _embedding, aten.scaled_dot_product_attention: _attention,
    **MASK_CONVERTERS,
}


def _live(graph: fx.Graph) -> set[str]:
    """Names of the nodes the output depends on."""
    live: set[str] = set()
    for node in reversed(graph.nodes):
        if node.op == "output" or node.name in live:
            live.add(node.name)
            live.update(n.name for n in node.all_input_nodes)
    return live


def _with_users(nodes: list[IRNode]) -> list[IRNode]:
    users: dict[str, list[str]] = {node.name: [] for node in nodes}
    for node in nodes:
        for name in dict.fromkeys(node.inputs):
            users[name].append(node.name)
    for node in nodes:
        node.outputs = tuple(users[node.name])
    return nodes


def to_ir(program: ExportedProgram, source: str) -> tuple[list[IRNode], TorchState]:
    """IR nodes and weights of `program`; every node that cannot be translated is named in one
    error. `source` names the model in that error."""
    translator = Translator(program)
    translator.bind_inputs()
    live = _live(program.graph)
    errors, failed = [], set()
    for node in program.graph.nodes:
        if node.name not in live or node.op not in ("call_function", "output"):
            continue
        if any(n.name in failed for n in node.all_input_nodes):
            failed.add(node.name)  # its inputs' errors say why
            continue
        try:
            if node.op == "output":
                translator.output(node)
            else:
                translator.translate(node)
        except ConversionError as error:
            errors.append(error)
            failed.add(node.name)
    if errors:
        raise all_errors(errors, source, hint=ONNX_ROUTE)
    return _with_users(translator.nodes), translator.state
