"""torch functions, operators and Tensor methods -> IR (op type and parameters).

FX records `torch.cat(...)`, `x + y`, `F.relu(x)` as `call_function` nodes (the target is the
callable) and `x.view(...)` as `call_method` nodes (the target is the method name). Both map to
one converter per operation, chosen by the callable or method name itself (FlexFlow matched
substrings of node names, which mistook e.g. `matmul` for `mul`). A method's `self` is its
argument 0, as for the function form.

Binary arithmetic writes `ADD`/`SUBTRACT`/`MULTIPLY`/`DIVIDE` between two nodes, or
`SCALAR_<OP>; <number>` with a Python number, with a trailing `reversed` when the number is the
left operand of `-` or `/`. Nodes may stand for Python values (sizes from `x.size(0)`), which the
builder computes with; parameters that name such nodes are `Ref`s.
"""

from __future__ import annotations

import operator

import torch
import torch.fx as fx
import torch.nn.functional as F

from flexflow.type import OpType, PoolType

from . import pooling
from .call import Call, is_number
from .ir import Ref, TorchOp

REVERSED = "reversed"
GELUS = {"none": OpType.GELU, "tanh": TorchOp.GELU_TANH}
COMPARISONS = ("eq", "ne", "lt", "le", "gt", "ge")


def _value(value):
    """A parameter: a node becomes a `Ref` (its value is used), numbers stay as they are."""
    if isinstance(value, fx.Node):
        return Ref(value.name)
    if isinstance(value, (tuple, list)):
        return type(value)(_value(v) for v in value)
    return value


def _binary(tensor_op: OpType, scalar_op: OpType, commutes: bool):
    def convert(call: Call):
        a, b = call.arg(0, "input"), call.arg(1, "other")
        alpha = call.kwargs.get("alpha", 1)
        call.expect(alpha == 1, f"alpha={alpha} is not supported")
        call.expect(call.kwargs.get("rounding_mode") is None,
                    f"rounding_mode={call.kwargs.get('rounding_mode')!r} is not supported")
        if isinstance(a, fx.Node) and isinstance(b, fx.Node):
            return tensor_op, ()
        if isinstance(a, fx.Node) and is_number(b):
            return scalar_op, (b,)
        if is_number(a) and isinstance(b, fx.Node):
            return scalar_op, (a,) if commutes else (a, REVERSED)
        raise call.fail(f"operands {a!r} and {b!r} are not supported (tensors of the model or "
                        f"Python numbers)")
    return convert


def _floordiv(call: Call):
    a, b = call.arg(0, "input"), call.arg(1, "other")
    call.expect(isinstance(a, fx.Node) and is_number(b),
                "floor division is supported only for sizes divided by a number")
    return OpType.SCALAR_FLOORDIV, (b,)


def _neg(call: Call):
    call.tensor(0, "input")
    return OpType.SCALAR_MULTIPLY, (-1,)


def _pow(call: Call):
    call.tensor(0, "input")
    exponent = call.arg(1, "exponent")
    call.expect(is_number(exponent), f"only a number exponent is supported, got {exponent!r}")
    return OpType.POW, (exponent,)


def _sqrt(call: Call):
    call.tensor(0, "input")
    return OpType.POW, (0.5,)


def _getitem(call: Call):
    call.tensor(0, "input")
    index = call.arg(1, "index")
    items = index if isinstance(index, tuple) else (index,)
    for item in items:
        parts = (item.start, item.stop, item.step) if isinstance(item, slice) else (item,)
        call.expect(not any(isinstance(p, fx.Node) for p in parts),
                    f"indexing with values computed in the model ({index!r}) is not supported")
        call.expect(item is None or item is Ellipsis or isinstance(item, (int, slice)),
                    f"index {item!r} is not supported (ints, slices, None and ... are)")
    return OpType.GETITEM, items


def _getattr(call: Call):
    call.tensor(0, "input")
    name = call.arg(1, "name")
    call.expect(name in ("shape", "ndim"), f"attribute {name!r} is not supported (shape, ndim are)")
    return OpType.GETATTR, (name,)


def _size(call: Call):
    call.tensor(0, "input")
    dim = call.arg(1, "dim", None)
    return OpType.GETATTR, ("shape",) if dim is None else ("shape", _value(dim))


def _dim(call: Call):
    call.tensor(0, "input")
    return OpType.GETATTR, ("ndim",)


def _cat(call: Call):
    tensors = call.arg(0, "tensors")
    call.expect(isinstance(tensors, (tuple, list)) and tensors
                and all(isinstance(t, fx.Node) for t in tensors),
                "the tensors to concatenate must be a list of tensors of the model")
    return OpType.CONCAT, (call.arg(1, "dim", 0),)


def _split(call: Call):
    call.tensor(0, "input")
    sizes = call.arg(1, "split_size_or_sections", None)
    if sizes is None:
        sizes = call.arg(1, "split_size")
    call.expect(is_number(sizes) or (isinstance(sizes, (tuple, list))
                                     and all(isinstance(s, int) for s in sizes)),
                f"split sizes must be an int or a list of ints, got {sizes!r}")
    dim = call.arg(2, "dim", 0)
    sizes = list(sizes) if isinstance(sizes, (tuple, list)) else sizes
    return OpType.SPLIT, (sizes,) if dim == 0 else (sizes, dim)


def _flatten(call: Call):
    call.tensor(0, "input")
    start, end = call.arg(1, "start_dim", 0), call.arg(2, "end_dim", -1)
    return (OpType.FLAT, ()) if (start, end) == (1, -1) else (OpType.FLAT, (start, end))


def _unary(op_type: OpType | TorchOp):
    def convert(call: Call):
        call.tensor(0, "input")
        return op_type, ()
    return convert


def _gelu(call: Call):
    call.tensor(0, "input")
    approximate = call.arg(1, "approximate", "none")
    call.expect(approximate in GELUS, f"approximate={approximate!r} is not supported")
    return GELUS[approximate], ()


def _compare(op: str):
    """x op y, or x op number (Python turns `2 < x` into `x > 2` before FX records it)."""
    def convert(call: Call):
        call.tensor(0, "input")
        b = call.arg(1, "other")
        if isinstance(b, fx.Node):
            return TorchOp.COMPARE, (op,)
        call.expect(_is_scalar(b), f"{b!r} is not supported (a tensor or a number)")
        return TorchOp.COMPARE, (op, b)
    return convert


def _is_scalar(value) -> bool:
    return isinstance(value, (bool, int, float))


def _where(call: Call):
    """torch.where(cond, a, b): numbers become parameters, tensors inputs after cond."""
    call.tensor(0, "condition")
    choices = [call.arg(1, "input"), call.arg(2, "other")]
    call.expect(all(isinstance(c, fx.Node) or _is_scalar(c) for c in choices),
                f"the choices {choices!r} must be tensors of the model or numbers")
    return TorchOp.WHERE, tuple(None if isinstance(c, fx.Node) else c for c in choices)


def _logical(op: str):
    def convert(call: Call):
        for index, name in enumerate(("input", "other")[:1 if op == "not" else 2]):
            call.tensor(index, name)
        return TorchOp.LOGICAL, (op,)
    return convert


def _clamp(call: Call):
    call.tensor(0, "input")
    low, high = call.arg(1, "min", None), call.arg(2, "max", None)
    call.expect(all(v is None or is_number(v) for v in (low, high))
                and (low, high) != (None, None),
                f"min {low!r} and max {high!r} must be numbers or None, not both None")
    return TorchOp.CLAMP, (low, high)


def _bool(call: Call):
    call.tensor(0, "input")
    return OpType.TO, (str(torch.bool),)


def _elu(call: Call):
    call.tensor(0, "input")
    alpha = call.arg(1, "alpha", 1.0)
    call.expect(alpha == 1.0, f"alpha={alpha} is not supported (elu has alpha 1)")
    return OpType.ELU, ()


def _softmax(call: Call):
    call.tensor(0, "input")
    call.expect(call.kwargs.get("dtype") is None, "dtype= is not supported")
    dim = call.arg(1, "dim", None)
    return (OpType.SOFTMAX, ()) if dim is None else (OpType.SOFTMAX, (dim,))


def _dropout(call: Call):
    """Dropout follows the FlexFlow model's mode (training or inference), whatever `training`
    was when the model was traced."""
    call.tensor(0, "input")
    return OpType.DROPOUT, (float(call.arg(1, "p", 0.5)),)


def _max_pool2d(call: Call):
    call.tensor(0, "input")
    return pooling.fixed(call, PoolType.POOL_MAX, call.arg(1, "kernel_size"),
                         call.arg(2, "stride", None), call.arg(3, "padding", 0),
                         dilation=call.arg(4, "dilation", 1),
                         ceil_mode=call.arg(5, "ceil_mode", False),
                         return_indices=call.arg(6, "return_indices", False))


def _avg_pool2d(call: Call):
    call.tensor(0, "input")
    return pooling.fixed(call, PoolType.POOL_AVG, call.arg(1, "kernel_size"),
                         call.arg(2, "stride", None), call.arg(3, "padding", 0),
                         ceil_mode=call.arg(4, "ceil_mode", False),
                         count_include_pad=call.arg(5, "count_include_pad", True),
                         divisor_override=call.arg(6, "divisor_override", None))


def _adaptive_pool2d(pool_type: PoolType):
    def convert(call: Call):
        call.tensor(0, "input")
        return pooling.adaptive(call, pool_type, call.arg(1, "output_size"),
                                call.arg(2, "return_indices", False))
    return convert


def _layer_norm(call: Call):
    call.tensor(0, "input")
    shape = call.arg(1, "normalized_shape")
    call.expect(call.arg(2, "weight", None) is None and call.arg(3, "bias", None) is None,
                "F.layer_norm with weight or bias is not supported; use nn.LayerNorm")
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    return OpType.LAYER_NORM, (shape, float(call.arg(4, "eps", 1e-5)), False)


def _in_order(call: Call, names: str, tensors: list) -> None:
    """The builder takes a node's tensors in the order of its arguments, keywords last as
    written: tensors given by keyword in another order would be mistaken for one another."""
    order: list[fx.Node] = []
    fx.node.map_arg((call.args, call.kwargs), order.append)
    call.expect(order == [t for t in tensors if t is not None],
                f"{names} must be passed in this order")


def _group_norm(call: Call):
    x = call.tensor(0, "input")
    weight, bias = call.arg(2, "weight", None), call.arg(3, "bias", None)
    call.expect(all(isinstance(t, fx.Node) for t in (weight, bias)) or weight is bias is None,
                "weight and bias must both be tensors of the model, or both None")
    _in_order(call, "input, weight and bias", [x, weight, bias])
    return TorchOp.GROUP_NORM, (call.arg(1, "num_groups"), None, float(call.arg(4, "eps", 1e-5)),
                                weight is not None)


def _attention(call: Call):
    """F.scaled_dot_product_attention: dropout_p applies in training only, as FFModel's dropout
    does (torch's functional drops whenever dropout_p > 0)."""
    tensors = [call.tensor(index, name) for index, name in enumerate(("query", "key", "value"))]
    mask, causal = call.arg(3, "attn_mask", None), call.arg(5, "is_causal", False)
    dropout, scale = call.arg(4, "dropout_p", 0.0), call.arg(6, "scale", None)
    call.expect(mask is None or isinstance(mask, fx.Node),
                f"attn_mask must be a tensor of the model, got {mask!r}")
    call.expect(mask is None or not causal, "attn_mask with is_causal=True is not supported")
    call.expect(not call.arg(7, "enable_gqa", False), "enable_gqa=True is not supported")
    call.expect(is_number(dropout) and (scale is None or is_number(scale)),
                f"dropout_p {dropout!r} and scale {scale!r} must be numbers")
    _in_order(call, "query, key, value and attn_mask", tensors + [mask])
    return TorchOp.SCALED_DOT_PRODUCT_ATTENTION, (float(dropout), bool(causal),
                                                  None if scale is None else float(scale))


def _hardtanh(call: Call):
    call.tensor(0, "input")
    low, high = call.arg(1, "min_val", -1.0), call.arg(2, "max_val", 1.0)
    call.expect(is_number(low) and is_number(high) and low < high,
                f"min_val {low!r} and max_val {high!r} must be numbers, min_val the lower")
    return TorchOp.HARDTANH, (float(low), float(high))


def _relu6(call: Call):
    call.tensor(0, "input")
    return TorchOp.HARDTANH, (0.0, 6.0)


def _chunk(call: Call):
    call.tensor(0, "input")
    chunks, dim = call.arg(1, "chunks"), call.arg(2, "dim", 0)
    call.expect(isinstance(chunks, int) and not isinstance(chunks, bool) and chunks > 0
                and isinstance(dim, int), f"chunks {chunks!r} must be a positive int and dim "
                f"{dim!r} an int")
    return TorchOp.CHUNK, (chunks, dim)


def _transpose(call: Call):
    call.tensor(0, "input")
    return OpType.TRANSPOSE, (call.arg(1, "dim0"), call.arg(2, "dim1"))


def _t(call: Call):
    call.tensor(0, "input")
    return OpType.TRANSPOSE, (0, 1)


def _permute(call: Call):
    call.tensor(0, "input")
    return OpType.PERMUTE, tuple(call.rest(1))


def _shape_op(op_type: OpType):
    """reshape/view/expand: sizes as separate arguments or one tuple, possibly computed in the
    model (`x.size(0)`), or another tensor whose shape to take (`view_as`, `expand_as`)."""
    def convert(call: Call):
        call.tensor(0, "input")
        sizes = call.rest(1) or (call.kwargs.get("shape") or call.kwargs.get("size") or ())
        call.expect(len(sizes) > 0, "the target shape is missing")
        call.expect(not any(isinstance(s, torch.dtype) for s in sizes),
                    "reinterpreting the dtype (view(dtype)) is not supported")
        return op_type, tuple(_value(s) for s in sizes)
    return convert


def _unsqueeze(call: Call):
    call.tensor(0, "input")
    return OpType.UNSQUEEZE, (call.arg(1, "dim"),)


def _mean(call: Call):
    call.tensor(0, "input")
    call.expect(call.kwargs.get("dtype") is None, "dtype= is not supported")
    dim = call.arg(1, "dim", None)
    keepdim = call.arg(2, "keepdim", False)
    dims = () if dim is None else (dim,) if isinstance(dim, int) else tuple(dim)
    return OpType.MEAN, dims + ((True,) if keepdim else ())


def _to(call: Call):
    """`.to(dtype|device|tensor)`: the builder casts where a dtype change is asked for."""
    call.tensor(0, "input")
    target = call.arg(1, "dtype", None) or call.kwargs.get("device")
    if isinstance(target, fx.Node):
        return OpType.TO, (_value(target),)
    return OpType.TO, () if target is None else (str(target),)


def _tensor_method(op_type: OpType):
    """A method of one tensor with no parameters (float(), contiguous(), type_as(other))."""
    def convert(call: Call):
        call.tensor(0, "input")
        return op_type, ()
    return convert


_ADD = _binary(OpType.ADD, OpType.SCALAR_ADD, commutes=True)
_SUB = _binary(OpType.SUBTRACT, OpType.SCALAR_SUB, commutes=False)
_MUL = _binary(OpType.MULTIPLY, OpType.SCALAR_MULTIPLY, commutes=True)
_DIV = _binary(OpType.DIVIDE, OpType.SCALAR_TRUEDIV, commutes=False)


def _matmul(call: Call):
    call.tensor(0, "input")
    call.tensor(1, "other")
    return OpType.BATCH_MATMUL, ()


FUNCTIONS = {
    operator.add: _ADD, operator.iadd: _ADD, torch.add: _ADD,
    operator.sub: _SUB, operator.isub: _SUB, torch.sub: _SUB, torch.subtract: _SUB,
    operator.mul: _MUL, operator.imul: _MUL, torch.mul: _MUL, torch.multiply: _MUL,
    operator.truediv: _DIV, operator.itruediv: _DIV, torch.div: _DIV, torch.true_divide: _DIV,
    operator.floordiv: _floordiv, operator.neg: _neg, torch.neg: _neg,
    operator.pow: _pow, torch.pow: _pow, torch.sqrt: _sqrt,
    operator.matmul: _matmul, torch.matmul: _matmul, torch.bmm: _matmul,
    operator.getitem: _getitem, getattr: _getattr,
    torch.cat: _cat, torch.concat: _cat, torch.split: _split, torch.flatten: _flatten,
    torch.relu: _unary(OpType.RELU), F.relu: _unary(OpType.RELU),
    torch.sigmoid: _unary(OpType.SIGMOID), F.sigmoid: _unary(OpType.SIGMOID),
    torch.tanh: _unary(OpType.TANH), F.tanh: _unary(OpType.TANH),
    torch.exp: _unary(OpType.EXP), torch.rsqrt: _unary(OpType.RSQRT),
    F.gelu: _gelu, F.elu: _elu, F.softmax: _softmax, torch.softmax: _softmax,
    F.dropout: _dropout, F.max_pool2d: _max_pool2d, F.avg_pool2d: _avg_pool2d,
    F.adaptive_avg_pool2d: _adaptive_pool2d(PoolType.POOL_AVG),
    F.adaptive_max_pool2d: _adaptive_pool2d(PoolType.POOL_MAX),
    F.layer_norm: _layer_norm, F.group_norm: _group_norm, F.silu: _unary(TorchOp.SILU),
    F.relu6: _relu6, F.hardtanh: _hardtanh, torch.chunk: _chunk,
    F.scaled_dot_product_attention: _attention, torch.transpose: _transpose,
    torch.permute: _permute,
    torch.reshape: _shape_op(OpType.RESHAPE), torch.unsqueeze: _unsqueeze, torch.mean: _mean,
    torch.where: _where, torch.clamp: _clamp, torch.clip: _clamp,
    operator.and_: _logical("and"), operator.or_: _logical("or"),
    operator.invert: _logical("not"), torch.logical_and: _logical("and"),
    torch.logical_or: _logical("or"), torch.logical_not: _logical("not"),
    **{getattr(operator, op): _compare(op) for op in COMPARISONS},
    **{getattr(torch, op): _compare(op) for op in COMPARISONS},
}

METHODS = {
    "add": _ADD, "add_": _ADD, "sub": _SUB, "sub_": _SUB, "mul": _MUL, "mul_": _MUL,
    "div": _DIV, "div_": _DIV, "pow": _pow, "sqrt": _sqrt, "neg": _neg, "matmul": _matmul,
    "bmm": _matmul, "size": _size, "dim": _dim, "split": _split, "flatten": _flatten,
    "relu": _unary(OpType.RELU), "relu_": _unary(OpType.RELU),
    "sigmoid": _unary(OpType.SIGMOID), "tanh": _unary(OpType.TANH),
    "exp": _unary(OpType.EXP), "rsqrt": _unary(OpType.RSQRT), "softmax": _softmax,
    "transpose": _transpose, "t": _t, "permute": _permute,
    "view": _shape_op(OpType.VIEW), "reshape": _shape_op(OpType.RESHAPE),
    "view_as": _shape_op(OpType.VIEW), "reshape_as": _shape_op(OpType.RESHAPE),
    "expand": _shape_op(OpType.EXPAND), "expand_as": _shape_op(OpType.EXPAND),
    "unsqueeze": _unsqueeze, "mean": _mean, "chunk": _chunk,
    "contiguous": _tensor_method(OpType.CONTIGUOUS),
    "float": _tensor_method(OpType.FLOAT), "type_as": _tensor_method(OpType.TYPE_AS), "to": _to,
    "bool": _bool, "clamp": _clamp, "clip": _clamp, "logical_and": _logical("and"),
    "logical_or": _logical("or"), "logical_not": _logical("not"),
    **{op: _compare(op) for op in COMPARISONS},
}


def function_op(call: Call):
    """(OpType, params) of a call_function or call_method node."""
    node = call.node
    convert = (METHODS.get(node.target) if node.op == "call_method"
               else FUNCTIONS.get(node.target))
    if convert is None:
        raise call.fail("this function is not supported")
    return convert(call)
