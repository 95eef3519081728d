"""What a forward keeps of a gathered weight, between the forward and the backward of a layer
whose weights are sharded (`ParallelConfig.shard_weights`).

Operators keep their weights for backward (a dense layer its kernel, as the array or as a torch
tensor over the same memory): left there, the whole box gathered for the forward would stay
alive to the backward, and sharding would save nothing. So when the forward's gathered box is
freed, every reference to it in what the layer's forwards on that device kept is replaced by a
`Detached` mark (`detach`), and the box gathered again before the backward is put back in its
place (`attach`), as the same kind of object: an array, or a tensor over it.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

from .store import WeightKey


@dataclasses.dataclass(frozen=True)
class Detached:
    """Where a forward kept the whole of weight box `key`: as a torch tensor (`tensor`) or as
    an array of the device's array module."""

    key: WeightKey
    tensor: bool


def _is_tensor(value) -> bool:
    return hasattr(value, "data_ptr") and hasattr(value, "untyped_storage")


def _layout(value) -> tuple | None:
    """(address, shape, contiguous) of an array or a torch tensor, None for anything else."""
    if _is_tensor(value):
        return value.data_ptr(), tuple(value.shape), value.is_contiguous()
    interface = getattr(value, "__array_interface__", None)
    if interface is None and hasattr(value, "data") and hasattr(value, "flags"):
        interface = getattr(value, "__cuda_array_interface__", None)  # (a CuPy array)
    if interface is None:
        return None
    return interface["data"][0], tuple(value.shape), bool(value.flags.c_contiguous)


def replaced(value, swap: Callable[[Any], Any]):
    """`value` (what a forward kept: arrays, tensors, tuples, lists, dataclasses) with every
    item `swap` gives a replacement for (not None) replaced; the same object where nothing
    is, so that nothing is copied for the rest."""
    found = swap(value)
    if found is not None:
        return found
    if isinstance(value, (tuple, list)):
        items = [replaced(item, swap) for item in value]
        if all(a is b for a, b in zip(items, value)):
            return value
        if hasattr(value, "_fields"):  # a named tuple
            return type(value)(*items)
        return type(value)(items)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        changed = {}
        for f in dataclasses.fields(value):
            if f.init:
                item = getattr(value, f.name)
                new = replaced(item, swap)
                if new is not item:
                    changed[f.name] = new
        return dataclasses.replace(value, **changed) if changed else value
    return value


def detach(kept, key: WeightKey, whole):
    """`kept` with the references to `whole` (weight box `key`'s gathered array, C-ordered)
    marked `Detached`: the array itself and tensors over all of its memory."""
    target = _layout(whole)

    def swap(item):
        if isinstance(item, Detached) or _layout(item) != target:
            return None
        return Detached(key, _is_tensor(item))
    return replaced(kept, swap)


def attach(kept, key: WeightKey, whole, xp):
    """`kept` with the marks `detach` left for box `key` replaced by `whole` (gathered again),
    or by a torch tensor over it where a tensor was kept (the vendor kernels' bridge)."""
    def swap(item):
        if not isinstance(item, Detached) or item.key != key:
            return None
        if not item.tensor:
            return whole
        from ..ops import vendor
        bridge = vendor.aten(xp)
        if bridge is None:  # (the setting changed since the forward: torch's own view)
            import torch
            return torch.as_tensor(whole)
        return bridge.tensor(whole)
    return replaced(kept, swap)
