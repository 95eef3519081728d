"""ONNX operators that move or select elements, and the shape queries.

Reshape/Flatten/Squeeze/Unsqueeze are FFModel reshapes (a no-op reshape builds nothing);
Gather, Slice and Pad's reflect/edge/wrap modes select indices with `compose.take`; Pad's
constant mode concatenates constant slabs; Gather from a constant table by tensor indices is an
embedding lookup. Shape and Size are constants: shapes are static here. So is a result with no
elements (an empty slice or split part): it holds no data, and FlexFlow tensors have no zero-size
dims.
"""

from __future__ import annotations

import numpy as np

from flexflow.core import AggrMode, DataType, Tensor
from flexflow.type import NUMPY_DTYPE

from .compose import pad_constant, take
from .registry import handles, one_of
from .values import Const, const_float, const_ints, shape


def _axis(node, axis: int, rank: int) -> int:
    if not -rank <= axis < rank:
        raise node.error(f"axis {axis} is out of range for a {rank}-d input")
    return axis % rank


def _empty(x: Tensor, dims) -> Const:
    """The value of a result of x's type with zero-size `dims`: no elements, so a constant."""
    return Const(np.zeros(tuple(dims), NUMPY_DTYPE[x.data_type]))


# ---- reshapes -----------------------------------------------------------------------------------
@handles("Reshape")
def reshape(cv, node, xs):
    x = cv.tensor(xs[0], node, any_dtype=True)
    target = node.ints("shape") or const_ints(xs[1], node, "the shape input")
    dims = [x.dims[i] if d == 0 and not node.attr("allowzero", 0) else d
            for i, d in enumerate(target)]
    if dims.count(-1) > 1:
        raise node.error(f"the shape {list(target)} has more than one -1")
    if 0 in dims:
        raise node.error(f"cannot reshape {tuple(x.dims)} to {list(target)}: a tensor with "
                         f"elements to a zero-size shape")
    if -1 in dims:
        known = int(np.prod([d for d in dims if d != -1]))
        dims[dims.index(-1)] = int(np.prod(x.dims)) // known
    if int(np.prod(dims)) != int(np.prod(x.dims)):
        raise node.error(f"cannot reshape {tuple(x.dims)} to {list(target)}")
    return [cv.reshape(x, dims, node)]


@handles("Flatten")
def flatten(cv, node, xs):
    x = cv.tensor(xs[0], node, any_dtype=True)
    rank = x.num_dims
    axis = int(node.attr("axis", 1))
    if not -rank <= axis <= rank:
        raise node.error(f"axis {axis} is out of range for a {rank}-d input")
    axis = axis + rank if axis < 0 else axis
    dims = (int(np.prod(x.dims[:axis])), int(np.prod(x.dims[axis:])))
    if axis == 1 and rank > 2:
        return [cv.ffmodel.flat(x, name=node.name)]
    return [cv.reshape(x, dims, node)]


@handles("Squeeze")
def squeeze(cv, node, xs):
    x = cv.tensor(xs[0], node, any_dtype=True)
    axes = node.ints("axes") or const_ints(xs[1] if len(xs) > 1 else None, node, "the axes")
    rank = x.num_dims
    axes = ({_axis(node, a, rank) for a in axes} if axes else
            {d for d, n in enumerate(x.dims) if n == 1})
    if any(x.dims[a] != 1 for a in axes):
        raise node.error(f"cannot squeeze dims {sorted(axes)} of shape {tuple(x.dims)}: not "
                         f"all are 1")
    dims = [n for d, n in enumerate(x.dims) if d not in axes]
    if not dims:
        return [cv.as_0d(x, node)]
    return [cv.reshape(x, dims, node)]


@handles("Unsqueeze")
def unsqueeze(cv, node, xs):
    x = cv.tensor(xs[0], node, any_dtype=True)
    axes = node.ints("axes") or const_ints(xs[1], node, "the axes")
    rank = x.num_dims + len(axes)
    axes = {_axis(node, a, rank) for a in axes}
    rest = iter(x.dims)
    return [cv.reshape(x, [1 if d in axes else next(rest) for d in range(rank)], node)]


@handles("Transpose")
def transpose(cv, node, xs):
    x = cv.tensor(xs[0], node, any_dtype=True)
    perm = node.ints("perm") or tuple(reversed(range(x.num_dims)))
    if perm == tuple(range(x.num_dims)):
        return [x]
    return [cv.ffmodel.transpose(x, perm, name=node.name)]


# ---- joining and splitting ----------------------------------------------------------------------
@handles("Concat")
def concat(cv, node, xs):
    present = [x for x in xs if x is not None and 0 not in shape(x)]
    rank = len(shape(present[0]))
    axis = _axis(node, int(node.attr("axis")), rank)
    tensors = [cv.tensor(x, node, any_dtype=True) for x in present]
    if len(tensors) == 1:
        return tensors
    return [cv.ffmodel.concat(tensors, axis, name=node.name)]


@handles("Split")
def split(cv, node, xs):
    x = cv.tensor(xs[0], node, any_dtype=True)
    axis = _axis(node, int(node.attr("axis", 0)), x.num_dims)
    length = x.dims[axis]
    sizes = node.ints("split") or const_ints(xs[1] if len(xs) > 1 else None, node, "split")
    if not sizes:
        parts = int(node.attr("num_outputs", len(node.outputs)))
        chunk = -(-length // parts)  # the last part is smaller when the length does not divide
        sizes = [chunk] * (length // chunk) + ([length % chunk] if length % chunk else [])
    if sum(sizes) != length or len(sizes) != len(node.outputs):
        raise node.error(f"split sizes {list(sizes)} do not cut dim {axis} of {tuple(x.dims)} "
                         f"into {len(node.outputs)} outputs")
    filled = [size for size in sizes if size]
    parts = iter([x] if len(filled) == 1 else
                 cv.ffmodel.split(x, filled, axis, name=node.name))
    empty = _empty(x, [0 if d == axis else n for d, n in enumerate(x.dims)])
    return [next(parts) if size else empty for size in sizes]


# ---- selecting ----------------------------------------------------------------------------------
def _indices(node, indices: np.ndarray, n: int) -> np.ndarray:
    flat = indices.reshape(-1).astype(np.int64)
    bad = flat[(flat < -n) | (flat >= n)]
    if bad.size:
        raise node.error(f"index {int(bad[0])} is out of range for a dim of size {n}")
    return flat % n


@handles("Gather")
def gather(cv, node, xs):
    data, indices = xs
    axis = int(node.attr("axis", 0))
    if isinstance(data, Const) and isinstance(indices, Tensor):
        return [_embedding(cv, node, data, indices, axis)]
    if isinstance(indices, Tensor):
        raise node.error("gathering from a tensor with indices computed by the model is not "
                         "supported (constant indices, or a constant table, are)")
    x = cv.tensor(data, node, any_dtype=True)
    axis = _axis(node, axis, x.num_dims)
    flat = _indices(node, indices.value, x.dims[axis])
    dims = tuple(x.dims[:axis]) + indices.shape + tuple(x.dims[axis + 1:])
    if flat.size == 0:
        return [_empty(x, dims)]
    picked = take(cv, node, x, flat, axis)
    if not dims:
        return [cv.as_0d(picked, node)]
    return [cv.reshape(picked, dims, node)]


def _embedding(cv, node, table: Const, indices: Tensor, axis: int) -> Tensor:
    """table[indices] for a (num, dim) table and integer indices: an embedding lookup."""
    if table.value.ndim != 2 or axis % 2 != 0:
        raise node.error(f"gathering from a constant of shape {table.shape} along axis {axis} "
                         f"is only supported as an embedding lookup (2-d table, axis 0)")
    if indices.data_type not in (DataType.DT_INT32, DataType.DT_INT64):
        raise node.error(f"embedding indices must be int32 or int64, got "
                         f"{indices.data_type.name}")
    dims = tuple(indices.dims)
    rows = cv.reshape(indices, (dims[0], int(np.prod(dims[1:]))), node)
    num, width = table.shape
    y = cv.ffmodel.embedding(rows, num, width, AggrMode.AGGR_MODE_NONE, name=node.name)
    cv.load(y, [table.value])
    return cv.reshape(y, dims + (width,), node)


@handles("Slice")
def slice_(cv, node, xs):
    x = cv.tensor(xs[0], node, any_dtype=True)
    starts = node.ints("starts") or const_ints(xs[1], node, "starts")
    ends = node.ints("ends") or const_ints(xs[2], node, "ends")
    axes = node.ints("axes") or const_ints(xs[3] if len(xs) > 3 else None, node, "axes")
    steps = const_ints(xs[4] if len(xs) > 4 else None, node, "steps")
    axes = axes or tuple(range(len(starts)))
    steps = steps or (1,) * len(starts)
    picks = {}
    for start, end, axis, step in zip(starts, ends, axes, steps):
        axis = _axis(node, axis, x.num_dims)
        if step == 0:
            raise node.error("a slice step of 0")
        # Python's slice clamps out-of-range starts and ends exactly as ONNX specifies
        picks[axis] = range(*slice(start, end, step).indices(x.dims[axis]))
    if not all(picks.values()):
        return [_empty(x, [len(picks[d]) if d in picks else n for d, n in enumerate(x.dims)])]
    for axis, picked in picks.items():
        x = take(cv, node, x, picked, axis)
    return [x]


@handles("Pad", limits={"mode": one_of("constant", "reflect", "edge", "wrap")})
def pad(cv, node, xs):
    x = cv.tensor(xs[0], node, any_dtype=True)
    mode = node.attr("mode", "constant")
    pads = node.ints("pads") or const_ints(xs[1], node, "pads")
    value = float(node.attr("value", 0.0))
    if len(xs) > 2 and xs[2] is not None:
        value = const_float(xs[2], node, "the constant_value input", 0.0)
    axes = const_ints(xs[3] if len(xs) > 3 else None, node, "axes") or range(x.num_dims)
    axes = [_axis(node, a, x.num_dims) for a in axes]
    if len(pads) != 2 * len(axes):
        raise node.error(f"pads {list(pads)} must hold a begin and an end for each of the "
                         f"{len(axes)} axes")
    for axis, before, after in zip(axes, pads[:len(axes)], pads[len(axes):]):
        if before == after == 0:
            continue
        n = x.dims[axis]
        kept = np.arange(n)[max(-before, 0):n - max(-after, 0)]
        if kept.size == 0:
            raise node.error(f"pads {list(pads)} crop all of dim {axis} of {tuple(x.dims)}")
        grow = (max(before, 0), max(after, 0))
        if mode == "constant":
            x = take(cv, node, x, kept, axis)
            x = pad_constant(cv, node, x, axis, grow, value)
        else:
            x = take(cv, node, x, np.pad(kept, grow, mode=mode), axis)
    return [x]


# ---- shape queries ------------------------------------------------------------------------------
@handles("Shape")
def shape_of(cv, node, xs):
    dims = np.array(shape(xs[0]), np.int64)
    start, end = int(node.attr("start", 0)), node.attr("end")
    return [Const(dims[start:None if end is None else int(end)])]


@handles("Size")
def size(cv, node, xs):
    return [Const(np.array(int(np.prod(shape(xs[0]))), np.int64))]
