"""aten ops of masks -> the COMPARE, WHERE, LOGICAL and CLAMP nodes logic.py builds, and the
gathers by constant indices with which Hugging Face's mask functions lay a (batch, keys) padding
mask out as (batch, 1, 1, keys), for aten.py.

What a mask computes from an `attention_mask` input is data and becomes layers; what it computes
from constants alone (the causal part) aten.py folds at import, and reads as a tensor where it
meets the data (a bool constant: a float32 buffer cast back to bool).
"""

from __future__ import annotations

import math

import torch
import torch.fx as fx

from flexflow.type import OpType

from .call import Call, meta
from .ir import TorchOp

aten = torch.ops.aten
FLIPPED = {"eq": "eq", "ne": "ne", "lt": "gt", "le": "ge", "gt": "lt", "ge": "le"}


def _compare(op: str):
    """x op y, or x op number; a number on the left (a one-element constant: `limit < x` of a
    buffer) flips the comparison (2 < x is x > 2)."""
    def convert(tr, call: Call) -> str:
        a, b = call.arg(0, "input"), call.arg(1, "other")
        found = tr.number_operand(call, a, b)
        if found is None:
            return tr.emit(call.node.name, TorchOp.COMPARE,
                           [tr.tensor(call, a), tr.tensor(call, b)], (op,))
        k, number = found
        return tr.emit(call.node.name, TorchOp.COMPARE, [tr.tensor(call, (a, b)[1 - k])],
                       (op if k else FLIPPED[op], number))
    return convert


def _choose(tr, call: Call, cond, choices) -> str:
    """A WHERE node: choices that are numbers (or one-element constants that leave the result's
    shape as it is) become its parameters, the others its tensor inputs after cond."""
    numbers = [tr.scalar(c) for c in choices]
    kept = [cond] + [c for c, n in zip(choices, numbers) if n is None]
    if torch.broadcast_shapes(*(meta(t).shape for t in kept)) != meta(call.node).shape:
        numbers = [None if isinstance(c, fx.Node) else n for c, n in zip(choices, numbers)]
    inputs = [tr.tensor(call, cond)] + [tr.tensor(call, c) for c, n in zip(choices, numbers)
                                        if n is None]
    return tr.emit(call.node.name, TorchOp.WHERE, inputs, tuple(numbers))


def _where(tr, call: Call) -> str:
    return _choose(tr, call, call.arg(0, "condition"), [call.arg(1, "self"),
                                                        call.arg(2, "other")])


def _masked_fill(tr, call: Call) -> str:
    """x.masked_fill(mask, value): value where mask holds, else x."""
    return _choose(tr, call, call.arg(1, "mask"), [call.arg(2, "value"), call.arg(0, "input")])


def _logical(op: str):
    """and, or, not of bool tensors (`&`, `|`, `~` and logical_*; bitwise ops on integers are
    refused)."""
    def convert(tr, call: Call) -> str:
        operands = [call.arg(0, "input")] + ([] if op == "not" else [call.arg(1, "other")])
        types = [meta(o).dtype for o in operands if isinstance(o, fx.Node)]
        call.expect(all(t == torch.bool for t in types),
                    f"'{op}' of {[str(t) for t in types]} tensors is not supported (bool only)")
        return tr.emit(call.node.name, TorchOp.LOGICAL, [tr.tensor(call, o) for o in operands],
                       (op,))
    return convert


def _clamp(*names):
    """clamp(x, min, max), clamp_min(x, min), clamp_max(x, max): `names` are the bounds the op
    takes in order, None for the one it lacks."""
    def convert(tr, call: Call) -> str:
        bounds, index = [], 1
        for name in names:
            value = None if name is None else call.arg(index, name, None)
            index += name is not None
            number = None if value is None else tr.scalar(value)
            call.expect(value is None or number is not None,
                        f"clamp's {name} must be a number, got {value!r}")
            bounds.append(number)
        return tr.emit(call.node.name, TorchOp.CLAMP, [tr.tensor(call, call.arg(0, "input"))],
                       tuple(bounds))
    return convert


def _index(tr, call: Call) -> str:
    """x[indices] with constant index tensors that only lay x's elements out anew, each once in
    order, broadcast along some dims (Hugging Face's padding masks): a reshape, then an expand.
    Found by indexing x's element positions as torch would."""
    x, indices = call.arg(0, "input"), call.arg(1, "indices")
    call.expect(all(i is None or i.name in tr.constants for i in indices),
                "indices computed from the inputs are not supported")
    shape = tuple(meta(x).shape)
    positions = torch.arange(math.prod(shape)).reshape(shape)
    picked = positions[tuple(slice(None) if i is None else tr.constants[i.name]
                             for i in indices)]
    out = tuple(picked.shape)
    laid = [n if n > 1 and bool((picked != picked.narrow(d, 0, 1)).any()) else 1
            for d, n in enumerate(out)]
    call.expect(math.prod(laid) == positions.numel() and torch.equal(
        positions.reshape(laid).expand(out), picked), "only indices that lay the input out "
        "in order, broadcast along some dims, are supported (no reordering or repeats)")
    name, source = call.node.name, tr.tensor(call, x)
    if tuple(laid) != shape:
        source = tr.emit(name if tuple(laid) == out else f"{name}_laid", OpType.RESHAPE,
                         [source], (laid,))
    if tuple(laid) != out:
        source = tr.emit(name, OpType.EXPAND, [source], (list(out),))
    return source


MASK_CONVERTERS = {
    **{getattr(aten, op): _compare(op) for op in FLIPPED},
    aten.where: _where, aten.masked_fill: _masked_fill,
    aten.logical_and: _logical("and"), aten.bitwise_and: _logical("and"),
    aten.__and__: _logical("and"), aten.logical_or: _logical("or"),
    aten.bitwise_or: _logical("or"), aten.__or__: _logical("or"),
    aten.logical_not: _logical("not"), aten.bitwise_not: _logical("not"),
    aten.clamp: _clamp("min", "max"), aten.clamp_min: _clamp("min", None),
    aten.clamp_max: _clamp(None, "max"), aten.index: _index,
}
