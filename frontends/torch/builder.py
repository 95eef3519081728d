"""IR nodes -> layers of an FFModel, through its public op builders.

Nodes are built in order. Each node's value is an FFModel `Tensor`, a list of them (a split), a
tuple (a module's tuple output, e.g. attention's (output, weights)) or a plain Python value (a
size: `x.size(0)`, `x.shape`), which arithmetic nodes then compute with. Layers are named after
their nodes; a node that needs helper layers (a reshape around an embedding, the transposes of a
sequence-first attention) names them `<node>_<purpose>`.

Semantics follow PyTorch where FlexFlow's importer did not (see docs/frontends.md):
batch norm has no fused ReLU, `SOFTMAX` without a dim uses torch's implicit dim, `SPLIT; n` cuts
pieces of size n along dim 0 (or the given dim), layer norm is a real layer norm, `expand`
broadcasts. Where PyTorch's reading gives a model that cannot run, fallbacks.py says what is done
instead (FlexFlow's reading of a split, FlexFlow's initializers, or a refusal).
"""

from __future__ import annotations

import math
import operator
from functools import partial
from typing import Callable

from flexflow.initializers import ArrayInitializer, NormInitializer
from flexflow.tensor import Tensor
from flexflow.type import ActiMode, AggrMode, DataType, OpType, PoolType

from .composed import COMPOSED, pieces, scaled_layer_norm
from .fallbacks import flexflow_split, warn_torch_weights_unused
from .ir import ConversionError, IRNode, Ref, format_node
from .logic import broadcast
from .pooling import ADAPTIVE
from .weights import BUFFER, PARAMETER, TorchState, ff_arrays, load, misfit

BN_DEFAULTS = (1e-5, 0.1)  # eps, momentum of FFModel.batch_norm
REVERSED = "reversed"
EMBEDDING_INIT_SEED = 42  # FlexFlow's file importer initialises embeddings with N(0, 1), seed 42

_PYTHON_OPS = {OpType.ADD: operator.add, OpType.SUBTRACT: operator.sub,
               OpType.MULTIPLY: operator.mul, OpType.DIVIDE: operator.truediv,
               OpType.SCALAR_ADD: operator.add, OpType.SCALAR_SUB: operator.sub,
               OpType.SCALAR_MULTIPLY: operator.mul, OpType.SCALAR_TRUEDIV: operator.truediv,
               OpType.SCALAR_FLOORDIV: operator.floordiv, OpType.POW: operator.pow}
_TENSOR_OPS = {OpType.ADD: "add", OpType.SUBTRACT: "subtract", OpType.MULTIPLY: "multiply",
               OpType.DIVIDE: "divide"}
_UNARY = {OpType.RELU: "relu", OpType.SIGMOID: "sigmoid", OpType.TANH: "tanh",
          OpType.ELU: "elu", OpType.GELU: "gelu", OpType.IDENTITY: "identity",
          OpType.EXP: "exp", OpType.RSQRT: "rsqrt"}
_TORCH_DATA_TYPES = {"torch.float32": DataType.DT_FLOAT, "torch.float64": DataType.DT_DOUBLE,
                     "torch.int32": DataType.DT_INT32, "torch.int64": DataType.DT_INT64,
                     "torch.bool": DataType.DT_BOOLEAN}
MAX_SIZE = 1 << 62  # plain integers computed in a graph are sizes; larger ones are hostile
MAX_EXPONENT = 64


def _normalize(dim: int, rank: int, node: IRNode) -> int:
    return node.dim(dim, rank)


def _python_op(node: IRNode, op_type: OpType, a, b):
    """Arithmetic on plain values (sizes: `x.size(0) * 2`, `x.shape + (1,)`). A file chooses the
    operands, so results stay the size of sizes: no repeated sequences, no huge integers."""
    if op_type in (OpType.MULTIPLY, OpType.SCALAR_MULTIPLY) and any(
            isinstance(v, (tuple, list, str)) for v in (a, b)):
        raise node.error(f"cannot multiply {a!r} by {b!r}: numbers expected")
    if op_type == OpType.POW and isinstance(b, int) and abs(b) > MAX_EXPONENT:
        raise node.error(f"the exponent {b} is out of range for a size")
    result = _PYTHON_OPS[op_type](a, b)
    if isinstance(result, int) and abs(result) > MAX_SIZE:
        raise node.error(f"{a!r} and {b!r} give an integer of {result.bit_length()} bits, out "
                         f"of range for a size")
    return result


def _pair(value) -> tuple[int, int]:
    return tuple(value) if isinstance(value, (tuple, list)) else (value, value)


class Builder:
    def __init__(self, ffmodel, state: TorchState | None = None, verbose: bool = False,
                 source: str = "the model"):
        self.ff = ffmodel
        self.state = state or TorchState()
        self.verbose = verbose
        self.source = source  # names the file (or model) in errors about no particular node
        self.values: dict[str, object] = {}
        self.weight_ops: dict[str, object] = {}  # node -> the Op holding its layer's weights
        self.nodes: dict[str, IRNode] = {}
        self.torch_weights: list[tuple[IRNode, object, list]] = []  # (node, Op, arrays)

    # ---- driver ---------------------------------------------------------------------------------
    def build(self, nodes: list[IRNode], input_tensors) -> list[Tensor]:
        """Build every node; returns the model's outputs. Layers that have torch weights get them
        as the values compile() creates their weights with."""
        self._check(nodes, input_tensors)
        self.nodes = {node.name: node for node in nodes}
        feed = iter(input_tensors)
        outputs = None
        for node in nodes:
            if self.verbose:
                print(format_node(node))
            args = [self.values[name] for name in node.inputs]
            params = tuple(self._resolve(p) for p in node.params)
            try:
                value = (next(feed) if node.op_type == OpType.INPUT
                         else self._op(node)(node, args, params))
            except ConversionError:
                raise
            except (ValueError, TypeError, IndexError, KeyError, AttributeError,
                    ArithmeticError) as error:  # ShapeError, or a file's parameters of the
                # wrong type or range, which FFModel's builders and Python's operators refuse
                raise node.error(f"{error} (parameters {list(params)})") from error
            self.values[node.name] = value
            if node.op_type == OpType.OUTPUT:
                outputs = value
        self._load_torch_weights()
        return outputs

    def _load_torch_weights(self) -> None:
        """Give the layers their torch weights; none when some do not fit their layers only in
        the dims the layers' inputs decide (fallbacks.py); refused when some contradict what
        their nodes declare (another model's weights)."""
        misfits = [m for m in (misfit(n, op, arrays) for n, op, arrays in self.torch_weights)
                   if m is not None]
        contradiction = next((why for why, by_input in misfits if not by_input), None)
        if contradiction is not None:
            raise ConversionError(contradiction)
        if misfits:
            warn_torch_weights_unused(self.source, misfits[0][0])
            return
        for _, op, arrays in self.torch_weights:
            load(self.ff, op, arrays)

    def _check(self, nodes: list[IRNode], input_tensors) -> None:
        """Before building anything: inputs match, every op type can be built, every reference is
        to an earlier node, one output node."""
        wanted = [n.name for n in nodes if n.op_type == OpType.INPUT]
        tensors = list(input_tensors)
        if len(tensors) != len(wanted):
            raise self._error(f"the model has {len(wanted)} inputs {wanted}, got {len(tensors)} "
                              f"input tensors")
        for name, tensor in zip(wanted, tensors):
            if not isinstance(tensor, Tensor):
                raise self._error(f"input '{name}': expected a Tensor made by "
                                  f"ffmodel.create_tensor, got {tensor!r}")
        if [n.op_type for n in nodes].count(OpType.OUTPUT) != 1:
            raise self._error("the model must have exactly one OUTPUT node")
        seen: set[str] = set()
        for node in nodes:
            if node.op_type != OpType.INPUT:
                self._op(node)  # raises for op types that cannot be built
            refs = [p.name for p in node.params if isinstance(p, Ref)]
            for name in list(node.inputs) + refs:
                if name not in seen:
                    raise node.error(f"reads '{name}', which no earlier node defines")
            seen.add(node.name)
        for node, owner in self.state.shared.items():
            if owner not in seen or node not in seen:
                raise self._error(f"the weights share '{owner}' with '{node}', but the model has "
                                  f"no such node")

    def _error(self, what: str) -> ConversionError:
        return ConversionError(f"{self.source}: {what}")

    def _resolve(self, param):
        if isinstance(param, Ref):
            return self.values[param.name]
        return param

    def _op(self, node: IRNode) -> Callable:
        if node.op_type in _UNARY:
            return self._unary
        if node.op_type in (OpType.FLOAT, OpType.CONTIGUOUS, OpType.TYPE_AS, OpType.TO):
            return self._convert
        if node.op_type in COMPOSED:
            return partial(COMPOSED[node.op_type], self)
        method = _BUILDERS.get(node.op_type)
        if method is None:
            raise node.error(f"{node.op_type.name} nodes are not supported")
        return getattr(self, method)

    # ---- helpers --------------------------------------------------------------------------------
    def _tensor(self, node: IRNode, value, what: str = "input") -> Tensor:
        if not isinstance(value, Tensor):
            raise node.error(f"its {what} must be a tensor, got {value!r}")
        return value

    def _shared(self, node: IRNode, shareable: bool = True):
        """The Op whose weights `node`'s layer uses, if it calls an already-called module."""
        owner = self.state.shared.get(node.name)
        if owner is None:
            return None
        if not shareable:
            raise node.error(f"it calls the module of node '{owner}' again, and this layer "
                             f"cannot share weights")
        return self.weight_ops[owner]

    def _weights(self, node: IRNode, output: Tensor) -> Tensor:
        """Record the layer of `output` as the weight holder of `node`, and the node's torch
        weights for it (a node sharing an earlier node's weights has none of its own)."""
        op = output.owner_op
        self.weight_ops[node.name] = op
        named = self.state.tensors.get(node.name)
        if named is not None:
            self.torch_weights.append((node, op, ff_arrays(node, named)))
        return output

    def _reshape(self, x: Tensor, shape, name: str) -> Tensor:
        shape = tuple(int(s) for s in shape)
        return x if shape == x.dims else self.ff.reshape(input=x, shape=list(shape), name=name)

    # ---- graph ends -----------------------------------------------------------------------------
    def _output(self, node, args, params):
        for name, value in zip(node.inputs, args):
            self._tensor(node, value, f"returned value '{name}'")
        return list(args)

    def _attribute(self, node, args, params):
        """A tensor the model uses directly: an `nn.Parameter` becomes a trainable weight, a
        buffer a frozen one. A second use of the same tensor is the same FlexFlow tensor."""
        owner = self.state.shared.get(node.name)
        if owner is not None:
            return self.values[owner]
        named = self.state.tensors.get(node.name, {})
        kind = PARAMETER if PARAMETER in named else BUFFER if BUFFER in named else None
        if kind is None:
            raise node.error("the value of this attribute is not known (a file read without its "
                             ".npz weights)")
        value = named[kind]
        if value.dtype.kind != "f":
            raise node.error(f"a {value.dtype} tensor used directly is not supported (only "
                             f"float tensors)")
        return self.ff.create_weight(list(value.shape), trainable=kind == PARAMETER,
                                     initializer=ArrayInitializer(value), name=node.name)

    # ---- layers with weights --------------------------------------------------------------------
    def _linear(self, node, args, params):
        out_dim, activation, bias = params
        shared = self._shared(node)
        y = self.ff.dense(input=self._tensor(node, args[0]), out_dim=out_dim,
                          activation=ActiMode(activation), use_bias=bool(bias), shared_op=shared,
                          name=node.name)
        return self._weights(node, y)

    def _conv2d(self, node, args, params):
        """A Conv1d's (N, C, L) input runs as (N, C, 1, L) (modules.py)."""
        oc, kh, kw, sh, sw, ph, pw, activation, groups, bias = params
        shared = self._shared(node)
        x = self._tensor(node, args[0])
        one_d = x.num_dims == 3
        if one_d:
            x = self._reshape(x, x.dims[:2] + (1,) + x.dims[2:], f"{node.name}_2d")
        y = self.ff.conv2d(input=x, out_channels=oc, kernel_h=kh, kernel_w=kw, stride_h=sh,
                           stride_w=sw, padding_h=ph, padding_w=pw,
                           activation=ActiMode(activation), groups=groups, use_bias=bool(bias),
                           shared_op=shared, name=node.name)
        self._weights(node, y)
        return self._reshape(y, y.dims[:2] + y.dims[3:], f"{node.name}_1d") if one_d else y

    def _batch_norm(self, node, args, params):
        """BatchNorm1d/2d: torch's has no fused ReLU. (N, C) and (N, C, L) inputs are normalised
        as (N, C, L, 1)."""
        x = self._tensor(node, args[0])
        eps, momentum = params or BN_DEFAULTS
        settings = {} if (eps, momentum) == BN_DEFAULTS else {"eps": eps, "momentum": momentum}
        if x.num_dims not in (2, 3, 4):
            raise node.error(f"batch norm needs a 2-d, 3-d or 4-d input, got {x.dims}")
        x4 = self._reshape(x, (x.dims + (1, 1))[:4], f"{node.name}_to4d")
        self._shared(node, shareable=False)
        y = self.ff.batch_norm(input=x4, relu=False, name=node.name, **settings)
        self._weights(node, y)
        return self._reshape(y, x.dims, f"{node.name}_back")

    def _layer_norm(self, node, args, params):
        """`LAYER_NORM` alone (FlexFlow's files): the last dim, eps 1e-5, affine. A fourth
        parameter False (bias) with affine: a weight and no bias (composed.py)."""
        x = self._tensor(node, args[0])
        shape, eps, affine, *bias = params or ((x.dims[-1],), 1e-5, True)
        shape = tuple(shape)
        if x.dims[len(x.dims) - len(shape):] != shape:
            raise node.error(f"normalized_shape {shape} does not match the input's trailing "
                             f"dims {x.dims}")
        if bias and not isinstance(bias[0], bool):
            raise node.error(f"the fourth parameter (bias) must be True or False, got {bias[0]!r}")
        axes = list(range(-len(shape), 0))
        if affine and bias == [False]:
            return scaled_layer_norm(self, node, x, axes, eps)
        self._shared(node, shareable=False)
        y = self.ff.layer_norm(input=x, axes=axes, elementwise_affine=bool(affine), eps=eps,
                               name=node.name)
        return self._weights(node, y)

    def _embedding(self, node, args, params):
        """Indices of any rank: flattened to (dims[0], rest) for the lookup, then reshaped."""
        num, dim = params
        x = self._tensor(node, args[0])
        shared = self._shared(node)
        rows = (x.dims[0], math.prod(x.dims[1:])) if x.num_dims > 1 else (x.dims[0], 1)
        flat = self._reshape(x, rows, f"{node.name}_flat")
        y = self.ff.embedding(input=flat, num_embeddings=num, embedding_dim=dim,
                              aggr=AggrMode.AGGR_MODE_NONE, shared_op=shared,
                              kernel_initializer=NormInitializer(EMBEDDING_INIT_SEED, 0, 1),
                              name=node.name)
        self._weights(node, y)
        return self._reshape(y, x.dims + (dim,), f"{node.name}_reshape")

    def _attention(self, node, args, params):
        """torch's MultiheadAttention; sequence-first inputs (batch_first=False) are transposed
        to FlexFlow's batch-first layout and back. Returns (output, None): attention weights are
        not computed."""
        embed, heads, kdim, vdim, dropout, bias, bias_kv, zero_attn, batch_first = params
        qkv = [self._tensor(node, a, "query, key and value") for a in args[:3]]
        self._shared(node, shareable=False)
        if not batch_first:
            swapped: dict[int, Tensor] = {}
            for role, t in zip(("query", "key", "value"), qkv):
                if id(t) not in swapped:
                    swapped[id(t)] = self.ff.transpose(input=t, perm=[1, 0, 2],
                                                       name=f"{node.name}_{role}_t")
            qkv = [swapped[id(t)] for t in qkv]
        y = self.ff.multihead_attention(*qkv, embed_dim=embed, num_heads=heads, kdim=kdim,
                                        vdim=vdim, dropout=dropout, bias=bool(bias),
                                        add_bias_kv=bool(bias_kv),
                                        add_zero_attn=bool(zero_attn), name=node.name)
        self._weights(node, y)
        if not batch_first:
            y = self.ff.transpose(input=y, perm=[1, 0, 2], name=f"{node.name}_output_t")
        return (y, None)

    # ---- layers without weights -----------------------------------------------------------------
    def _pool2d(self, node, args, params):
        x = self._tensor(node, args[0])
        if x.num_dims != 4:
            raise node.error(f"pooling needs an NCHW input, got {x.dims}")
        if params[0] == ADAPTIVE:
            _, size, pool_type, activation = params
            kernel = stride = self._adaptive_window(node, x.dims[2:], size)
            padding = (0, 0)
        else:
            kernel, stride, padding, pool_type, activation = params
            kernel, stride, padding = _pair(kernel), _pair(stride), _pair(padding)
        return self.ff.pool2d(input=x, kernel_h=kernel[0], kernel_w=kernel[1],
                              stride_h=stride[0], stride_w=stride[1], padding_h=padding[0],
                              padding_w=padding[1], pool_type=PoolType(pool_type),
                              activation=ActiMode(activation), name=node.name)

    @staticmethod
    def _adaptive_window(node, in_hw, size) -> tuple[int, int]:
        """Adaptive pooling from in_hw to `size` is a fixed pool when each output size divides
        the input size: windows of in/out with stride in/out."""
        out_hw = tuple(n if s is None else s for n, s in zip(in_hw, _pair(size)))
        if any(n % s for n, s in zip(in_hw, out_hw)):
            raise node.error(f"adaptive pooling from {tuple(in_hw)} to {out_hw}: the input size "
                             f"must be a multiple of the output size (other sizes need windows "
                             f"of varying size, which pool2d cannot express)")
        return tuple(n // s for n, s in zip(in_hw, out_hw))

    def _unary(self, node, args, params):
        x = self._tensor(node, args[0])
        return getattr(self.ff, _UNARY[node.op_type])(x, name=node.name)

    def _softmax(self, node, args, params):
        """Without a dim, torch's implicit choice: dim 0 for ranks 0, 1 and 3, else dim 1 (the
        last dim of FlexFlow's 2-d case)."""
        x = self._tensor(node, args[0])
        dim = params[0] if params else (0 if x.num_dims in (0, 1, 3) else 1)
        return self.ff.softmax(input=x, axis=_normalize(dim, x.num_dims, node), name=node.name)

    def _dropout(self, node, args, params):
        return self.ff.dropout(input=self._tensor(node, args[0]), rate=params[0], seed=0,
                               name=node.name)

    def _flat(self, node, args, params):
        x = self._tensor(node, args[0])
        start, end = params or (1, -1)
        start, end = _normalize(start, x.num_dims, node), _normalize(end, x.num_dims, node)
        if (start, end) == (1, x.num_dims - 1) and x.num_dims >= 2:
            return self.ff.flat(input=x, name=node.name)
        shape = x.dims[:start] + (math.prod(x.dims[start:end + 1]),) + x.dims[end + 1:]
        return self._reshape(x, shape, node.name)

    def _binary(self, node, args, params):
        a, b = args
        if not isinstance(a, Tensor) and not isinstance(b, Tensor):
            return _python_op(node, node.op_type, a, b)
        if isinstance(a, Tensor) and isinstance(b, Tensor):
            return getattr(self.ff, _TENSOR_OPS[node.op_type])(x=a, y=b, name=node.name)
        scalar_op = {OpType.ADD: OpType.SCALAR_ADD, OpType.SUBTRACT: OpType.SCALAR_SUB,
                     OpType.MULTIPLY: OpType.SCALAR_MULTIPLY,
                     OpType.DIVIDE: OpType.SCALAR_TRUEDIV}[node.op_type]
        tensor, number = (a, b) if isinstance(a, Tensor) else (b, a)
        flip = (REVERSED,) if isinstance(b, Tensor) else ()
        return self._scalar_on(node, scalar_op, tensor, number, flip)

    def _scalar(self, node, args, params):
        (x,) = args
        scalar, flip = params[0], params[1:]
        if not isinstance(x, Tensor):
            operands = (scalar, x) if flip else (x, scalar)
            return _python_op(node, node.op_type, *operands)
        return self._scalar_on(node, node.op_type, x, scalar, flip)

    def _scalar_on(self, node, op_type, x: Tensor, scalar, flip):
        """x <op> scalar, or scalar <op> x when `flip` says the scalar came first."""
        if op_type == OpType.SCALAR_FLOORDIV:
            raise node.error("floor division of a tensor is not supported")
        if op_type in (OpType.SCALAR_ADD, OpType.SCALAR_MULTIPLY) or not flip:
            method = {OpType.SCALAR_ADD: "scalar_add", OpType.SCALAR_SUB: "scalar_sub",
                      OpType.SCALAR_MULTIPLY: "scalar_multiply",
                      OpType.SCALAR_TRUEDIV: "scalar_true_divide"}[op_type]
            return getattr(self.ff, method)(input=x, scalar=float(scalar), name=node.name)
        if op_type == OpType.SCALAR_SUB:  # scalar - x
            negated = self.ff.scalar_multiply(input=x, scalar=-1.0, name=f"{node.name}_neg")
            return self.ff.scalar_add(input=negated, scalar=float(scalar), name=node.name)
        inverse = self.ff.pow(input=x, exponent=-1.0, name=f"{node.name}_inverse")  # scalar / x
        return self.ff.scalar_multiply(input=inverse, scalar=float(scalar), name=node.name)

    def _pow(self, node, args, params):
        (x,) = args
        if not isinstance(x, Tensor):
            return _python_op(node, OpType.POW, x, params[0])
        return self.ff.pow(input=x, exponent=float(params[0]), name=node.name)

    def _mean(self, node, args, params):
        x = self._tensor(node, args[0])
        keepdim = bool(params and isinstance(params[-1], bool) and params[-1])
        dims = [p for p in params if not isinstance(p, bool)] or list(range(x.num_dims))
        return self.ff.mean(input=x, dims=[_normalize(d, x.num_dims, node) for d in dims],
                            keepdims=keepdim, name=node.name)

    def _batch_matmul(self, node, args, params):
        a, b = (self._tensor(node, t, "operand") for t in args)
        if a.num_dims == b.num_dims == 2:  # a plain matrix product, as a batch of one
            a3 = self._reshape(a, (1,) + a.dims, f"{node.name}_a")
            b3 = self._reshape(b, (1,) + b.dims, f"{node.name}_b")
            y = self.ff.batch_matmul(A=a3, B=b3, name=node.name)
            return self._reshape(y, y.dims[1:], f"{node.name}_reshape")
        if a.num_dims != b.num_dims or a.dims[:-2] != b.dims[:-2]:
            raise node.error(f"matmul of {a.dims} and {b.dims}: only equal leading dims are "
                             f"supported (no broadcasting)")
        return self.ff.batch_matmul(A=a, B=b, name=node.name)

    # ---- moving elements ------------------------------------------------------------------------
    def _concat(self, node, args, params):
        tensors = [self._tensor(node, t) for t in args]
        axis = _normalize(params[0], tensors[0].num_dims, node)
        return self.ff.concat(tensors=tensors, axis=axis, name=node.name)

    def _split(self, node, args, params):
        """torch.split: pieces of `size` (the last one shorter) or the given sections, along
        `dim` (0 unless given); FlexFlow's reading where PyTorch's cannot be unpacked."""
        x = self._tensor(node, args[0])
        sizes, dim = params[0], (params[1] if len(params) > 1 else 0)
        if len(params) == 1:  # as FlexFlow's exporter writes it
            legacy = flexflow_split(node, self.nodes, x, sizes, self.source)
            if legacy is not None:
                return self.ff.split(input=x, sizes=legacy[0], axis=legacy[1], name=node.name)
        dim = _normalize(dim, x.num_dims, node)
        length = x.dims[dim]
        if isinstance(sizes, int):
            if sizes <= 0:
                raise node.error(f"split size must be positive, got {sizes}")
            sizes = pieces(length, sizes)
        return self.ff.split(input=x, sizes=list(sizes), axis=dim, name=node.name)

    def _getitem(self, node, args, params):
        (value,) = args
        if isinstance(value, Tensor):
            return self._index(node, value, params)
        if len(params) != 1:
            raise node.error(f"cannot index {value!r} with {params}")
        try:
            item = value[params[0]]
        except (IndexError, TypeError) as error:
            raise node.error(f"cannot index {value!r} with {params[0]!r}: {error}") from None
        if item is None:
            raise node.error("attention weights (output 1 of nn.MultiheadAttention) are not "
                             "computed")
        return item

    def _index(self, node, x: Tensor, index) -> Tensor:
        """Basic tensor indexing (ints, slices of step 1, None, ...) as splits and a reshape."""
        explicit = sum(1 for i in index if i is not None and i is not Ellipsis)
        if explicit > x.num_dims:
            raise node.error(f"too many indices {index} for a tensor of shape {x.dims}")
        expanded = []
        for item in index:
            expanded += [slice(None)] * (x.num_dims - explicit) if item is Ellipsis else [item]
        if Ellipsis not in index:
            expanded += [slice(None)] * (x.num_dims - explicit)
        shape, dim, y = [], 0, x
        for item in expanded:
            if item is None:
                shape.append(1)
                continue
            length = x.dims[dim]
            if isinstance(item, int):
                if not -length <= item < length:
                    raise node.error(f"index {item} is out of range for dim {dim} of {x.dims}")
                start, stop = item % length, item % length + 1
            else:
                start, stop, step = item.indices(length)
                if step != 1 or stop <= start:
                    raise node.error(f"slice {item} of dim {dim} ({length}) is not supported "
                                     f"(step 1, non-empty)")
                shape.append(stop - start)
            y = self._narrow(node, y, dim, start, stop)
            dim += 1
        return self._reshape(y, shape, node.name)

    def _narrow(self, node, x: Tensor, dim: int, start: int, stop: int) -> Tensor:
        length = x.dims[dim]
        if (start, stop) == (0, length):
            return x
        sizes = [n for n in (start, stop - start, length - stop) if n]
        pieces = self.ff.split(input=x, sizes=sizes, axis=dim, name=f"{node.name}_dim{dim}")
        return pieces[1 if start else 0]

    def _getattr(self, node, args, params):
        x = self._tensor(node, args[0])
        if params[0] == "ndim":
            return x.num_dims
        if params[0] != "shape":
            raise node.error(f"attribute {params[0]!r} is not supported")
        return x.dims if len(params) == 1 else x.dims[_normalize(params[1], x.num_dims, node)]

    def _transpose(self, node, args, params):
        x = self._tensor(node, args[0])
        if node.op_type == OpType.TRANSPOSE:
            if x.num_dims < 2:
                return x
            d0, d1 = (_normalize(d, x.num_dims, node) for d in params)
            perm = list(range(x.num_dims))
            perm[d0], perm[d1] = perm[d1], perm[d0]
        else:
            perm = [_normalize(d, x.num_dims, node) for d in params]
        return self.ff.transpose(input=x, perm=perm, name=node.name)

    def _target_shape(self, node, params) -> list[int]:
        """Sizes given one by one, as a tuple (x.shape), or as a tensor to take them from."""
        if len(params) == 1 and isinstance(params[0], Tensor):
            return list(params[0].dims)
        shape = []
        for p in params:
            shape += list(p) if isinstance(p, (tuple, list)) else [p]
        if not all(isinstance(s, int) for s in shape):
            raise node.error(f"the target shape {shape} must be ints")
        return shape

    def _reshape_node(self, node, args, params):
        x = self._tensor(node, args[0])
        shape = self._target_shape(node, params)
        if shape.count(-1) == 1:
            known = math.prod(s for s in shape if s != -1)
            total = math.prod(x.dims)
            if known <= 0 or total % known:
                raise node.error(f"cannot view {x.dims} as {tuple(shape)}")
            shape[shape.index(-1)] = total // known
        if math.prod(shape) != math.prod(x.dims):
            raise node.error(f"cannot view {x.dims} ({math.prod(x.dims)} elements) as "
                             f"{tuple(shape)}")
        return self.ff.reshape(input=x, shape=shape, name=node.name)

    def _expand(self, node, args, params):
        """Broadcast by adding a zero tensor of the target shape (exact; the gradient sums over
        the broadcast dims), a bool tensor by or-ing it with False (logic.py)."""
        x = self._tensor(node, args[0])
        shape = self._target_shape(node, params)
        lead = len(shape) - x.num_dims
        if lead < 0:
            raise node.error(f"cannot expand {x.dims} to fewer dims {tuple(shape)}")
        dims = (1,) * lead + x.dims
        target = [n if s == -1 else s for n, s in zip(dims, shape)]
        if any(n not in (1, t) for n, t in zip(dims, target)):
            raise node.error(f"cannot expand {x.dims} to {tuple(shape)}")
        if tuple(target) == x.dims:
            return x
        return broadcast(self, self._reshape(x, dims, f"{node.name}_rank"), target, node.name)

    def _unsqueeze(self, node, args, params):
        x = self._tensor(node, args[0])
        dim = _normalize(params[0], x.num_dims + 1, node)
        return self.ff.reshape(input=x, shape=list(x.dims[:dim] + (1,) + x.dims[dim:]),
                               name=node.name)

    def _convert(self, node, args, params):
        """float()/contiguous()/to()/type_as(): the input itself where its data type stays (a
        device, contiguous(), the type it has), else FFModel.cast to the type asked for."""
        x = self._tensor(node, args[0])
        target = args[1] if len(args) > 1 else params[0] if params else None
        if node.op_type == OpType.FLOAT:
            target = "torch.float32"
        if isinstance(target, Tensor):
            data_type = target.data_type
        elif target is None or not str(target).startswith("torch."):
            return x
        elif str(target) in _TORCH_DATA_TYPES:
            data_type = _TORCH_DATA_TYPES[str(target)]
        else:
            raise node.error(f"casting a {x.data_type.name} tensor to {target} is not supported")
        if data_type == x.data_type:
            return x
        return self.ff.cast(x, data_type, name=node.name)

_BUILDERS = {
    OpType.OUTPUT: "_output", OpType.ATTRIBUTE: "_attribute", OpType.LINEAR: "_linear",
    OpType.CONV2D: "_conv2d", OpType.BATCH_NORM: "_batch_norm", OpType.LAYER_NORM: "_layer_norm",
    OpType.EMBEDDING: "_embedding", OpType.MULTIHEAD_ATTENTION: "_attention",
    OpType.POOL2D: "_pool2d", OpType.SOFTMAX: "_softmax", OpType.DROPOUT: "_dropout",
    OpType.FLAT: "_flat", OpType.ADD: "_binary", OpType.SUBTRACT: "_binary",
    OpType.MULTIPLY: "_binary", OpType.DIVIDE: "_binary", OpType.SCALAR_ADD: "_scalar",
    OpType.SCALAR_SUB: "_scalar", OpType.SCALAR_MULTIPLY: "_scalar",
    OpType.SCALAR_TRUEDIV: "_scalar", OpType.SCALAR_FLOORDIV: "_scalar", OpType.POW: "_pow",
    OpType.MEAN: "_mean", OpType.BATCH_MATMUL: "_batch_matmul", OpType.CONCAT: "_concat",
    OpType.SPLIT: "_split", OpType.GETITEM: "_getitem", OpType.GETATTR: "_getattr",
    OpType.TRANSPOSE: "_transpose", OpType.PERMUTE: "_transpose", OpType.RESHAPE: "_reshape_node",
    OpType.VIEW: "_reshape_node", OpType.EXPAND: "_expand", OpType.UNSQUEEZE: "_unsqueeze",
}
