"""Building blocks that several handlers compose from FFModel layers.

* `arith`: + - * / of tensors and constants, a constant that acts as a scalar becoming a scalar
  layer (x + s, x / s), which is exact, instead of a tensor operand.
* `in_float64`: arithmetic on integer (or float64) tensors, computed in float64.
* `take`: elements at given indices along an axis (Gather, Slice, Pad's reflect/edge/wrap), as a
  split at the boundaries of the runs of consecutive indices, then a concat of the runs in order
  (a run of decreasing indices is reversed). Only data movement, so exact.
* `pad_constant`: constant slabs concatenated before and after along an axis.
* `matmul`: numpy's matmul of two tensors (1-d operands, broadcast leading dims) on batch_matmul.
* `reduce_max`: the maximum over some dims, as a max pool whose window spans them (after a
  transpose that puts them last), exact.
"""

from __future__ import annotations

import numpy as np

from flexflow.core import DataType, PoolType, Tensor

from .node import Node
from .values import Value, data_type_of, scalar_of, shape

_BINARY = {"Add": "add", "Sub": "subtract", "Mul": "multiply", "Div": "divide"}
_SCALAR = {"Add": "scalar_add", "Sub": "scalar_sub", "Mul": "scalar_multiply",
           "Div": "scalar_true_divide"}


def in_float64(cv, node: Node, compute, values) -> Tensor:
    """`compute` (a function of float64 tensors) of `values` converted to float64, its result
    converted back to the type of the first value. FlexFlow's element-wise layers compute on
    floats; in float64 integer arithmetic is exact while values and results stay below 2**53 in
    magnitude, and converting back truncates toward zero, as ONNX's integer Div does (exact for
    every int32 quotient)."""
    ff, double = cv.ffmodel, DataType.DT_DOUBLE
    result_type = data_type_of(values[0], node)
    wide = [cv.operand(v, node, double) if not isinstance(v, Tensor) or v.data_type == double
            else ff.cast(v, double, name=node.name) for v in values]
    y = compute(*wide)
    return y if result_type == double else ff.cast(y, result_type, name=node.name)


def computes_in_float32(*values: Value) -> bool:
    """Whether no operand is a tensor of another type than float32 (see `in_float64`)."""
    return all(not isinstance(v, Tensor) or v.data_type == DataType.DT_FLOAT for v in values)


def arith(cv, node: Node, op: str, a: Value, b: Value) -> Tensor:
    """a <op> b for op in Add, Sub, Mul, Div, with numpy broadcasting."""
    ff = cv.ffmodel
    if not computes_in_float32(a, b):
        return in_float64(cv, node, lambda x, y: getattr(ff, _BINARY[op])(x, y, name=node.name),
                          [a, b])
    s = scalar_of(b, len(shape(a)))
    if isinstance(a, Tensor) and s is not None and not (op == "Div" and s == 0):
        return getattr(ff, _SCALAR[op])(cv.tensor(a, node), s, name=node.name)
    s = scalar_of(a, len(shape(b)))
    if isinstance(b, Tensor) and s is not None and op in ("Add", "Mul"):
        return getattr(ff, _SCALAR[op])(cv.tensor(b, node), s, name=node.name)
    if isinstance(b, Tensor) and s is not None and op == "Sub":  # s - b == (-b) + s exactly
        negated = ff.scalar_multiply(cv.tensor(b, node), -1.0, name=node.name)
        return ff.scalar_add(negated, s, name=node.name)
    return getattr(ff, _BINARY[op])(cv.tensor(a, node), cv.tensor(b, node), name=node.name)


def runs(indices) -> list[tuple[int, int]]:
    """Maximal runs of consecutive indices stepping by +1 or -1, as (first, last) pairs."""
    found: list[tuple[int, int]] = []
    for i in indices:
        if found:
            first, last = found[-1]
            step = last - first  # 0 while the run has one index: it may go either way
            if (i - last == 1 and step >= 0) or (i - last == -1 and step <= 0):
                found[-1] = (first, i)
                continue
        found.append((i, i))
    return found


def take(cv, node: Node, x: Tensor, indices, axis: int) -> Tensor:
    """x's slices at `indices` (in range, non-negative) along `axis`, in that order."""
    ff = cv.ffmodel
    n = x.dims[axis]
    found = runs([int(i) for i in indices])
    if found == [(0, n - 1)]:
        return x
    cuts = sorted({0, n} | {min(r) for r in found} | {max(r) + 1 for r in found})
    sizes = [b - a for a, b in zip(cuts, cuts[1:])]
    pieces = ff.split(x, sizes, axis, name=node.name) if len(sizes) > 1 else [x]
    piece_at = dict(zip(cuts, pieces))
    parts = []
    for first, last in found:
        low, high = min(first, last), max(first, last)
        covering = [piece_at[c] for c in cuts[:-1] if low <= c <= high]
        part = covering[0] if len(covering) == 1 else ff.concat(covering, axis, name=node.name)
        if first > last:
            part = ff.reverse(part, axis, name=node.name)
        parts.append(part)
    return parts[0] if len(parts) == 1 else ff.concat(parts, axis, name=node.name)


def expand(cv, node: Node, x: Tensor, dims) -> Tensor:
    """x broadcast to `dims` (x * 1, exact), or x itself when it already has them."""
    dims = tuple(int(d) for d in dims)
    if tuple(x.dims) == dims:
        return x
    ones = cv.ffmodel.create_constant(dims, 1.0, DataType.DT_FLOAT)
    return cv.ffmodel.multiply(x, ones, name=node.name)


def matmul(cv, node: Node, a: Value, b: Value) -> Tensor:
    """numpy.matmul(a, b) for tensors of any rank >= 1, through one batch_matmul."""
    a, b = cv.tensor(a, node), cv.tensor(b, node)
    a_vector, b_vector = a.num_dims == 1, b.num_dims == 1
    if a_vector:
        a = cv.reshape(a, (1,) + tuple(a.dims), node)
    if b_vector:
        b = cv.reshape(b, tuple(b.dims) + (1,), node)
    (m, k), (k2, n) = a.dims[-2:], b.dims[-2:]
    if k != k2:
        raise node.error(f"matmul of shapes {shape(a)} and {shape(b)}: inner dims differ")
    try:
        lead = tuple(np.broadcast_shapes(tuple(a.dims[:-2]), tuple(b.dims[:-2])))
    except ValueError:
        raise node.error(f"matmul of shapes {shape(a)} and {shape(b)}: the leading dims do not "
                         f"broadcast") from None
    a = expand(cv, node, a, lead + (m, k))
    b = expand(cv, node, b, lead + (k, n))
    batch = int(np.prod(lead)) if lead else 1
    a3 = cv.reshape(a, (batch, m, k), node)
    b3 = cv.reshape(b, (batch, k, n), node)
    y = cv.ffmodel.batch_matmul(a3, b3, name=node.name)
    dims = lead + ((m,) if not a_vector else ()) + ((n,) if not b_vector else ())
    if not dims:  # the product of two vectors
        return cv.as_0d(y, node)
    return cv.reshape(y, dims, node)


def pad_constant(cv, node: Node, x: Tensor, axis: int, grow, value: float) -> Tensor:
    """x with `grow` = (before, after) slabs of `value` concatenated along `axis`."""
    pieces = []
    for count, is_x in ((grow[0], False), (0, True), (grow[1], False)):
        if is_x:
            pieces.append(x)
        elif count:
            dims = list(x.dims)
            dims[axis] = count
            pieces.append(cv.ffmodel.create_constant(dims, value, x.data_type))
    return pieces[0] if len(pieces) == 1 else cv.ffmodel.concat(pieces, axis, name=node.name)


def reduce_max(cv, node: Node, x: Tensor, axes, keepdims: bool) -> Tensor:
    """The maximum of x over the (sorted, distinct) `axes`: x's kept dims moved first, then a
    (kept, 1, 1, reduced) max pool with a 1 x reduced window."""
    ff = cv.ffmodel
    kept = [d for d in range(x.num_dims) if d not in axes]
    perm = kept + list(axes)
    moved = x if perm == sorted(perm) else ff.transpose(x, perm, name=node.name)
    rows = int(np.prod([x.dims[d] for d in kept]))
    span = int(np.prod([x.dims[d] for d in axes]))
    windows = cv.reshape(moved, (rows, 1, 1, span), node)
    y = ff.pool2d(windows, 1, span, 1, 1, 0, 0, PoolType.POOL_MAX, name=node.name)
    dims = [1 if d in axes else n for d, n in enumerate(x.dims) if keepdims or d not in axes]
    return cv.reshape(y, dims, node)
