"""Masks and choices: the TorchOp nodes for comparisons, `where`, logical ops and clamp, built
from FFModel's compare, where and cast (a cast is the `TO; torch.<dtype>` node, builder.py).

Hugging Face models turn an `attention_mask` input into the mask of their attention this way
(a cast to bool, an `and` with the causal mask, a `where` that picks 0 or float32's lowest), and
that path is data, so it is built as layers. Parameters (the `.ff` line after the op type) and
inputs, in order:

* `COMPARE; op[; other]` (op one of eq, ne, lt, le, gt, ge; other a number): x `op` other, or
  x `op` y of a second tensor input, a bool tensor. Operands of one data type; a fractional
  number against an integer tensor compares the tensor as float32, as torch does. No gradient
  flows through it (FFModel's compare passes none, as torch passes none).
* `WHERE; a; b` (each a number, or None for the next tensor input; inputs cond, then the tensor
  choices): a where the bool tensor cond holds, else b, broadcast together. A number takes the
  data type of the tensor choice; between two numbers, torch's for Python scalars (bool for
  two bools, float32 with a float, else int64).
* `LOGICAL; op` (op one of and, or (two bool inputs), not (one)): and is where(a, b, a), or is
  where(a, a, b), not is a == False: exact, and bools only (cast others with `TO; torch.bool`).
* `CLAMP; min; max` (numbers, either None, not both): x below min becomes min, then above max
  becomes max, by comparisons and `where`, so the gradient is torch's: it passes where
  min <= x <= max (where HARDTANH's, from max/min, is halved at the ends).
"""

from __future__ import annotations

from flexflow.tensor import Tensor
from flexflow.type import DataType

from .ir import TorchOp

COMPARISONS = {"eq": "equal", "ne": "equal", "lt": "less", "le": "less_equal", "gt": "greater",
               "ge": "greater_equal"}
_INTEGERS = (DataType.DT_INT32, DataType.DT_INT64)


def constant(b, number, data_type: DataType) -> Tensor:
    """A one-element constant, broadcast against the tensor it meets."""
    return b.ff.create_constant([1], number, data_type)


def _bool(b, node, value, what: str) -> Tensor:
    x = b._tensor(node, value, what)
    if x.data_type != DataType.DT_BOOLEAN:
        raise node.error(f"its {what} must be a bool tensor, got {x.data_type.name} (cast it "
                         f"with .to(torch.bool) first)")
    return x


def negate(b, x: Tensor, name: str) -> Tensor:
    """not x, for a bool x."""
    return b.ff.compare(x, constant(b, False, DataType.DT_BOOLEAN), "equal", name=name)


def _number(node, value, what: str):
    if value is not None and not isinstance(value, (bool, int, float)):
        raise node.error(f"{what} must be a number or None, got {value!r}")
    return value


def compare(b, node, args, params):
    """x op y, with ne as not (x == y)."""
    op, *other = params
    if op not in COMPARISONS or len(other) + len(args) != 2 or len(other) > 1:
        raise node.error(f"expects COMPARE; op[; number] with op one of {sorted(COMPARISONS)} "
                         f"and two operands in all, got {list(params)} and {len(args)} inputs")
    x = b._tensor(node, args[0])
    if other:
        number = _number(node, other[0], "the number compared with")
        if x.data_type in _INTEGERS and number != int(number):
            x = b.ff.cast(x, DataType.DT_FLOAT, name=f"{node.name}_float")
        y = constant(b, number, x.data_type)
    else:
        y = b._tensor(node, args[1], "second operand")
        if y.data_type != x.data_type:
            raise node.error(f"compares a {x.data_type.name} tensor with a "
                             f"{y.data_type.name} one; cast one of them first")
    func = COMPARISONS[op]
    if op != "ne":
        return b.ff.compare(x, y, func, name=node.name)
    return negate(b, b.ff.compare(x, y, func, name=f"{node.name}_eq"), node.name)


def _number_type(numbers) -> DataType:
    """The data type of a result chosen between two numbers, torch's for Python scalars."""
    if all(isinstance(n, bool) for n in numbers):
        return DataType.DT_BOOLEAN
    if any(isinstance(n, float) for n in numbers):
        return DataType.DT_FLOAT
    return DataType.DT_INT64


def where(b, node, args, params):
    """cond ? a : b, numbers made constants of the tensor choice's data type."""
    if len(params) != 2 or len(args) != 1 + sum(p is None for p in params):
        raise node.error(f"expects WHERE; a; b (numbers, or None for a tensor input) and a "
                         f"condition and one input per None, got {list(params)} and {len(args)} "
                         f"inputs")
    cond = _bool(b, node, args[0], "condition")
    tensors = iter(b._tensor(node, t, "choice") for t in args[1:])
    choices = [next(tensors) if p is None else _number(node, p, "a choice") for p in params]
    types = {c.data_type for c in choices if isinstance(c, Tensor)}
    if len(types) > 1:
        raise node.error(f"chooses between tensors of types {sorted(t.name for t in types)}; "
                         f"cast one of them first")
    data_type = types.pop() if types else _number_type(choices)
    a, other = (c if isinstance(c, Tensor) else constant(b, c, data_type) for c in choices)
    return b.ff.where(cond, a, other, name=node.name)


def logical(b, node, args, params):
    """and, or, not of bool tensors."""
    (op,) = params if len(params) == 1 else (None,)
    arity = {"and": 2, "or": 2, "not": 1}.get(op)
    if arity is None or len(args) != arity:
        raise node.error(f"expects LOGICAL; and|or with two inputs or LOGICAL; not with one, got "
                         f"{list(params)} and {len(args)} inputs")
    x, *y = (_bool(b, node, a, "operand") for a in args)
    if op == "not":
        return negate(b, x, node.name)
    first, second = (y[0], x) if op == "and" else (x, y[0])
    return b.ff.where(x, first, second, name=node.name)


def clamp(b, node, args, params):
    """where(x < min, min, x), then where(y > max, max, y)."""
    if len(params) != 2:
        raise node.error(f"expects CLAMP; min; max, got {list(params)}")
    low, high = (_number(node, p, what) for p, what in zip(params, ("min", "max")))
    if low is None and high is None:
        raise node.error("needs min or max (both are None)")
    y = b._tensor(node, args[0])
    for bound, func, last in ((low, "less", high is None), (high, "greater", True)):
        if bound is None:
            continue
        limit = constant(b, bound, y.data_type)
        name = node.name if last else f"{node.name}_min"
        beyond = b.ff.compare(y, limit, func, name=f"{name}_{func}")
        y = b.ff.where(beyond, limit, y, name=name)
    return y


def broadcast(b, x: Tensor, shape, name: str) -> Tensor:
    """x broadcast to `shape` (leading dims already added), exactly for any data type: plus
    zeros, or for bools or-ed with False."""
    data_type = x.data_type
    if data_type == DataType.DT_BOOLEAN:
        falses = b.ff.create_constant(list(shape), False, data_type)
        return b.ff.where(x, x, falses, name=name)
    return b.ff.add(x=x, y=b.ff.create_constant(list(shape), 0, data_type), name=name)


LOGIC = {TorchOp.COMPARE: compare, TorchOp.WHERE: where, TorchOp.LOGICAL: logical,
         TorchOp.CLAMP: clamp}
